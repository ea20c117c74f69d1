"""Topics of Avro records in Confluent's wire format, serialized by confluent-kafka's AvroSerializer
against a registry served over the store (tests of typed reads and typed tables)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
# V1 and an optional field with a default: a BACKWARD-compatible change.
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}


@contextlib.contextmanager
def served(store) -> Iterator[str]:
    """The URL of the store's registry, served in this process."""
    from lakelog.schemas.rest import start_registry

    server = start_registry(store.context, "127.0.0.1:0")
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()


def produce_avro(store, url: str, topic: str, schema: dict, values: list[dict]) -> None:
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE)
    with store.producer() as producer:
        for value in values:
            producer.send(topic, value=serializer(value, context), key=str(value["id"]).encode())
