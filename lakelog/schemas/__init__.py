"""A Confluent-compatible Schema Registry kept in the store (issue 28).

* :mod:`registry_errors` -- the registry's errors, each with Confluent's ``error_code``;
* :mod:`avro_schemas`, :mod:`json_schemas`, :mod:`protobuf_schemas` -- parsing one format's
  schema text and deciding whether a reader schema can read a writer schema's data (pure);
* :mod:`formats` -- the three behind one interface, by Confluent's ``schemaType``;
* :mod:`compatibility_levels` -- BACKWARD, FORWARD, FULL (and transitive), NONE over those checks;
* :mod:`schemas_topic` -- the records of the compacted ``_schemas`` topic (Confluent's and
  Karapace's key/value layout) and the registry state folded from them (pure);
* :mod:`registry` -- the registry over a store: reads ``_schemas`` and appends to it through
  the commit core, so that agents racing on one store never hand out one id twice;
* :mod:`rest` -- Confluent's REST API over HTTP (``lakelog serve --schema-registry-listen``);
* :mod:`validation` -- broker-side validation (``confluent.value.schema.validation``), used by
  ``lakelog serve``'s Produce;
* :mod:`decoding` -- records in Confluent's wire format decoded with the registry, without Spark.

* :mod:`spark_columns` -- the Spark SQL expressions (Spark's ``from_avro``, ``from_json``,
  lakelog-jvm.jar's ``lakelog_from_protobuf``) that
  decode a topic's keys and values for typed reads of ``format("lakelog")`` (pure);
* :mod:`json_spark_types` -- a JSON Schema as the Spark type ``from_json`` reads into (pure).

The package sits below ``lakelog.spark_connector`` (whose typed reads plan with it) and above the
engine (import-linter's layers in ``pyproject.toml``); the engine knows nothing of it.
"""
