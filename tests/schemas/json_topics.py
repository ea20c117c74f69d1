"""Topics of JSON Schema records in Confluent's JSON wire format, serialized by confluent-kafka's
JSONSerializer against a registry served over the store (tests of typed reads and typed tables)."""

from __future__ import annotations

import json

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

# Closed content model: adding a property to it is BACKWARD-compatible (a property added to an
# open model is not, PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL; lakelog/schemas/json_schemas.py).
JSON_V1 = {
    "type": "object",
    "title": "Order",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id", "item"],
    "additionalProperties": False,
}
JSON_V2 = {**JSON_V1, "properties": {**JSON_V1["properties"], "note": {"type": ["string", "null"]}}}


def produce_json(store, url: str, topic: str, schema: dict, values: list[dict]) -> None:
    serializer = JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": url}))
    context = SerializationContext(topic, MessageField.VALUE)
    with store.producer() as producer:
        for value in values:
            producer.send(topic, value=serializer(value, context), key=str(value["id"]).encode())
