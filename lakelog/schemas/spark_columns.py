"""The Spark SQL expressions that decode a topic's keys or values with the registry's schemas (pure).

Typed reads (``format("lakelog").option("valueFormat", "avro")`` or ``"json"``, the typed tables)
decode with Spark's own ``from_avro`` (the ``spark-avro`` module,
:func:`lakelog.jvm.jars.spark_avro_jar_set`) or its built-in ``from_json`` (JSON Schema topics,
:func:`json_expression`); this module only writes the expression, from a :class:`RegistryState`:

* Confluent's framing (byte 0, then the 4-byte big-endian schema id, then the Avro data) is taken
  apart with Spark expressions: ``substring(value, 1, 5)`` is compared with each schema id's
  5-byte header, so no id is computed for a known record, and ``from_avro`` reads
  ``substring(value, 6)``.
* Schema evolution: Spark's ``from_avro`` needs the schema the data was written with
  (``jsonFormatSchema``), and reads it as the schema in its ``avroSchema`` option when one is
  given (AvroDataToCatalyst's ``expectedSchema``: a GenericDatumReader(writer, reader), Avro's
  schema resolution; spark/connector/avro/src/main/scala/org/apache/spark/sql/avro/
  AvroDataToCatalyst.scala). So each schema id of the subject gets its own branch: its writer
  schema, the subject's latest schema as ``avroSchema``. Every branch then has the latest
  schema's struct type, and a record written before a field was added shows the field's
  default (null for an optional field).
* A record whose header names no version of the subject (an id the registry does not know, one
  of another subject, or a payload that is not in the wire format) fails the query with
  ``raise_error``, naming topic, partition, offset and the id (``mode`` FAILFAST, the default, as
  ``from_avro``'s), or decodes to null (PERMISSIVE, which ``from_avro`` also applies to data its
  schema cannot read).

* JSON Schema (:func:`json_expression`): Confluent's JSON wire format is the same header, then
  the document as UTF-8 text. ``from_json`` needs no writer schema, so every schema id of the
  subject shares one branch reading the subject's latest schema as a Spark type
  (:mod:`lakelog.schemas.json_spark_types`): a property the document lacks (written before a
  compatible change added it) is null, one the latest schema dropped is not read.
  ``mode`` is handed to ``from_json`` too (FAILFAST: a document that does not parse as the type
  fails the query; PERMISSIVE: its fields read as null).

* Protobuf (:func:`protobuf_expression`): Spark's ``from_protobuf`` is the ``spark-protobuf``
  module, which the Maven repository this project fetches jars from does not serve, so
  lakelog-jvm.jar registers ``lakelog_from_protobuf`` (jvm/src/.../ProtobufDecode.java: the same
  decoding, spark-protobuf's type mapping, with protobuf-java's DynamicMessage). Confluent's
  Protobuf wire format is the same header, then the message indexes (which message of the
  schema's file), then the message. Each schema id gets its own branch, handed the writer
  schema's file (to name the message of the indexes) and the subject's latest schema with the
  files it imports (a FileDescriptorSet): the data is parsed with the latest schema's message,
  Protobuf's own evolution (fields match by number; one an older writer lacked is unset, null).
  The message read is the first of the latest schema's file (Confluent's ``ProtobufSchema.name()``)
  unless ``valueMessage`` / ``keyMessage`` name another (spark-protobuf's ``messageName``); a record
  holding another one fails (FAILFAST, naming it) or reads as null (PERMISSIVE), as does data that
  does not parse.

The subject is Confluent's TopicNameStrategy (``<topic>-value``, ``<topic>-key``) unless named.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from google.protobuf import descriptor_pb2

from lakelog.engine.errors import InvalidConfigError
from lakelog.schemas.decoding import imported_files
from lakelog.schemas.json_schemas import parse_json_schema
from lakelog.schemas.json_spark_types import spark_struct
from lakelog.schemas.protobuf_schemas import file_set
from lakelog.schemas.registry_errors import InvalidSchemaError
from lakelog.schemas.schemas_topic import RegistryState, SchemaVersion

FORMATS = ("avro", "json", "protobuf")
# The registry's schemaType of each format (Confluent's names).
SCHEMA_TYPES = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}
# lakelog-jvm.jar's Protobuf decoder (jvm/src/.../ProtobufDecode.java NAME).
FROM_PROTOBUF = "lakelog_from_protobuf"
MODES = ("FAILFAST", "PERMISSIVE")


class TypedReadError(InvalidConfigError):
    """A typed read that cannot be planned: no schema for the subject, a format the subject's
    schemas are not in. The message names the topic and subject."""


@dataclass(frozen=True)
class Decoding:
    """How one column (``key`` or ``value``) of one topic is decoded."""

    column: str
    topic: str
    subject: str
    mode: str = "FAILFAST"
    format: str = "avro"  # one of FORMATS
    message: str | None = None  # protobuf: the message read (default: the schema's first)


def sql_string(text: str) -> str:
    """A Spark SQL string literal holding ``text``."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def header(schema_id: int) -> str:
    """Confluent's 5-byte header of ``schema_id`` as a Spark SQL binary literal."""
    return f"X'00{schema_id:08X}'"


def subject_format(state: RegistryState, decoding: Decoding) -> str:
    """The format (one of FORMATS) of the subject's latest schema, for a reader that did not name
    one (the typed tables). Raises TypedReadError when the subject has no live version."""
    live = state.versions(decoding.subject)
    if not live:
        raise TypedReadError(
            f"topic {decoding.topic!r}: subject {decoding.subject!r} has no schema in the store's registry, "
            f"so its {decoding.column}s cannot be decoded"
        )
    return next(f for f, t in SCHEMA_TYPES.items() if t == live[-1].schema_type)


def subject_versions(state: RegistryState, decoding: Decoding) -> list[SchemaVersion]:
    """The subject's versions in ``decoding.format`` (soft-deleted ones too: their records stay in
    the log). Raises TypedReadError when the subject has no live version or its latest schema is
    in another format."""
    found = subject_format(state, decoding)
    if found != decoding.format:
        raise TypedReadError(
            f"topic {decoding.topic!r}: subject {decoding.subject!r} holds {SCHEMA_TYPES[found]} schemas, "
            f"not {SCHEMA_TYPES[decoding.format]}: read it with {decoding.column}Format={found}"
        )
    wanted = SCHEMA_TYPES[decoding.format]
    return [sv for sv in state.versions(decoding.subject, deleted=True) if sv.schema_type == wanted]


def expression(state: RegistryState, decoding: Decoding) -> str:
    """The decoding expression of ``decoding.format`` (:func:`avro_expression`, :func:`json_expression`,
    :func:`protobuf_expression`)."""
    planners = {"avro": avro_expression, "json": json_expression, "protobuf": protobuf_expression}
    return planners[decoding.format](state, decoding)


def avro_expression(state: RegistryState, decoding: Decoding) -> str:
    """A Spark SQL expression over the Kafka source's columns that decodes ``decoding.column``
    with every schema id of the subject, read as the subject's latest schema (a struct column).
    Raises TypedReadError when the subject has no Avro schema."""
    versions = subject_versions(state, decoding)
    reader = state.versions(decoding.subject)[-1]
    column = f"`{decoding.column}`"

    def decode(writer: SchemaVersion) -> str:
        options = {"mode": decoding.mode}
        if writer.schema_id != reader.schema_id:
            options["avroSchema"] = reader.schema
        return f"from_avro(substring({column}, 6), {sql_string(writer.schema)}, {sql_map(options)})"

    return by_schema_id(decoding, versions, decode)


def by_schema_id(decoding: Decoding, versions: list[SchemaVersion], decode: Callable[[SchemaVersion], str]) -> str:
    """A CASE over the column's 5-byte header: the data of each schema id of ``versions`` decoded by
    ``decode(its version)``, a null column null, any other header :func:`unknown_id`."""
    column = f"`{decoding.column}`"
    branches = [
        f"WHEN {header(schema_id)} THEN {decode(next(sv for sv in versions if sv.schema_id == schema_id))}"
        for schema_id in sorted({sv.schema_id for sv in versions})
    ]
    return (
        f"CASE WHEN {column} IS NULL THEN NULL ELSE CASE substring({column}, 1, 5) "
        + " ".join(branches)
        + f" ELSE {unknown_id(decoding)} END END"
    )


def sql_map(options: dict[str, str]) -> str:
    """A Spark SQL ``map`` of string literals (the options of from_avro, from_json and lakelog_from_protobuf)."""
    return "map(" + ", ".join(f"{sql_string(k)}, {sql_string(v)}" for k, v in options.items()) + ")"


def json_expression(state: RegistryState, decoding: Decoding) -> str:
    """A Spark SQL expression over the Kafka source's columns that decodes ``decoding.column``
    (Confluent's JSON wire format) with ``from_json`` into the subject's latest JSON Schema as a
    struct, for every schema id of the subject. Raises TypedReadError when the subject has no
    JSON schema, JsonSchemaMappingError when the latest one has no Spark type."""
    versions = subject_versions(state, decoding)
    latest = state.versions(decoding.subject)[-1]
    references = {
        ref.name: parse_json_schema(state.subjects[ref.subject][ref.version].schema)
        for ref in latest.references
        if ref.version in state.subjects.get(ref.subject, {})
    }
    struct = spark_struct(parse_json_schema(latest.schema), decoding.subject, references)
    column = f"`{decoding.column}`"
    headers = ", ".join(header(i) for i in sorted({sv.schema_id for sv in versions}))
    decoded = (
        f"from_json(CAST(substring({column}, 6) AS STRING), {sql_string(json.dumps(struct))}, "
        f"{sql_map({'mode': decoding.mode})})"
    )
    return (
        f"CASE WHEN {column} IS NULL THEN NULL WHEN substring({column}, 1, 5) IN ({headers}) "
        f"THEN {decoded} ELSE {unknown_id(decoding)} END"
    )


def protobuf_expression(state: RegistryState, decoding: Decoding) -> str:
    """A Spark SQL expression over the Kafka source's columns that decodes ``decoding.column``
    (Confluent's Protobuf wire format) with lakelog-jvm.jar's ``lakelog_from_protobuf`` into
    ``decoding.message`` of the subject's latest schema (default: its first message) as a struct,
    for every schema id of the subject. Raises TypedReadError when the subject has no Protobuf
    schema, the latest one no such message, or a schema's files do not resolve (an import that is
    neither a reference nor a well-known file)."""
    versions = subject_versions(state, decoding)
    latest = state.versions(decoding.subject)[-1]
    reader = _files(state, decoding, latest)
    main = reader.file[-1]
    message = read_message(main, decoding)
    reader_files = base64.standard_b64encode(reader.SerializeToString(deterministic=True)).decode("ascii")
    column = f"`{decoding.column}`"

    def decode(writer: SchemaVersion) -> str:
        main = _files(state, decoding, writer).file[-1]
        options = {
            "topic": decoding.topic,
            "column": decoding.column,
            "schemaId": str(writer.schema_id),
            "writerFile": base64.standard_b64encode(main.SerializeToString(deterministic=True)).decode("ascii"),
            "readerFiles": reader_files,
            "message": message,
            "mode": decoding.mode,
        }
        return f"{FROM_PROTOBUF}(substring({column}, 6), `partition`, `offset`, {sql_map(options)})"

    return by_schema_id(decoding, versions, decode)


def read_message(main: descriptor_pb2.FileDescriptorProto, decoding: Decoding) -> str:
    """The full name of the message of ``main`` (the subject's latest schema) that ``decoding``
    reads: ``decoding.message`` (a full name, or one relative to the file's package), else the
    file's first. Raises TypedReadError naming the messages there are."""
    names: list[str] = []

    def walk(messages: Iterable[descriptor_pb2.DescriptorProto], scope: str) -> None:
        for m in messages:
            if not m.options.map_entry:
                names.append(f"{scope}{m.name}")
                walk(m.nested_type, f"{scope}{m.name}.")

    walk(main.message_type, f"{main.package}." if main.package else "")
    if decoding.message is None and names:
        return names[0]
    wanted = (decoding.message or "").removeprefix(".")
    for candidate in (wanted, f"{main.package}.{wanted}"):
        if candidate in names:
            return candidate
    raise TypedReadError(
        f"topic {decoding.topic!r}: subject {decoding.subject!r}'s latest schema has no message "
        f"{decoding.message!r} to read; its messages: {', '.join(names) or 'none'}"
    )


def _files(state: RegistryState, decoding: Decoding, version: SchemaVersion) -> descriptor_pb2.FileDescriptorSet:
    try:
        return file_set(version.schema, imported_files(state, version.references))
    except InvalidSchemaError as exc:
        raise TypedReadError(
            f"topic {decoding.topic!r}: subject {decoding.subject!r} version {version.version} (schema id "
            f"{version.schema_id}) cannot be read: {exc}"
        ) from exc


def unknown_id(decoding: Decoding) -> str:
    """What a record whose header names no version of the subject reads as: null (PERMISSIVE) or
    a ``raise_error`` naming topic, partition, offset and the id (FAILFAST)."""
    if decoding.mode == "PERMISSIVE":
        return "NULL"
    column = f"`{decoding.column}`"
    schema_id = f"CAST(conv(hex(substring({column}, 2, 4)), 16, 10) AS BIGINT)"
    return (
        "raise_error(concat("
        + sql_string(f"lakelog typed read: the {decoding.column} of topic {decoding.topic!r} partition ")
        + ", CAST(`partition` AS STRING), ' offset ', CAST(`offset` AS STRING), "
        + sql_string(" names schema id ")
        + f", coalesce(CAST({schema_id} AS STRING), 'none (not in the wire format)'), "
        + sql_string(
            f", which is no version of subject {decoding.subject!r} in the store's registry "
            "(option mode=PERMISSIVE reads it as null)"
        )
        + "))"
    )
