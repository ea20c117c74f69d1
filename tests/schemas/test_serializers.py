"""confluent-kafka's own Schema Registry serializers through ``lakelog serve``: records produced with
the Avro, JSON Schema and Protobuf serializers (schemas registered on the fly in the agent's
registry) come back equal through the matching deserializers, and the registry holds what
Confluent's would."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.schemas.conftest import RegistryAgent


@pytest.fixture(scope="module")
def agent(tmp_path_factory) -> Iterator[RegistryAgent]:
    from lakelog.store import Store

    root = tmp_path_factory.mktemp("serializers")
    with Store.open(root / "store") as store:
        for topic in ("users", "orders", "shop-orders", "raw"):
            store.create_topic(topic, partitions=1)
    started = RegistryAgent(root / "store", root / "agent.log")
    yield started
    started.stop()


def round_trip(
    agent: RegistryAgent,
    topic: str,
    serialize: Callable[[Any, Any], bytes],
    deserialize: Callable,
    values: list,
    start: int = 0,
) -> list:
    """Produce ``values`` to ``topic`` (one partition), then consume its records from offset ``start``
    through the last one produced, both through the agent."""
    producer = Producer({"bootstrap.servers": agent.bootstrap})
    offsets: list[int] = []
    for value in values:
        producer.produce(
            topic,
            value=serialize(value, SerializationContext(topic, MessageField.VALUE)),
            on_delivery=lambda error, message: offsets.append(-1 if error else message.offset()),
        )
    assert producer.flush(30) == 0
    assert -1 not in offsets
    consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, start)])
    got: list = []
    try:
        while len(got) < max(offsets) + 1 - start:
            message = consumer.poll(10)
            assert message is not None, f"only {len(got)} records came back"
            assert message.error() is None, message.error()
            got.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return got


def test_avro_records_round_trip_through_the_registry(agent) -> None:
    client = SchemaRegistryClient({"url": agent.url})
    v1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
    v2 = json.dumps(
        {
            "type": "record",
            "name": "User",
            "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": -1}],
        }
    )
    old = round_trip(agent, "users", AvroSerializer(client, v1), AvroDeserializer(client), [{"name": "ada"}])
    # A compatible second version; the reader schema v2 reads a v1 record with the default.
    both = round_trip(
        agent, "users", AvroSerializer(client, v2), AvroDeserializer(client, v2), [{"name": "bo", "age": 7}]
    )
    assert old == [{"name": "ada"}]
    assert both == [{"name": "ada", "age": -1}, {"name": "bo", "age": 7}]
    assert client.get_versions("users-value") == [1, 2]
    # An incompatible third version is refused by the serializer's registration (409).
    bad = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "long"}]})
    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(client, bad)({"name": 1}, SerializationContext("users", MessageField.VALUE))
    assert refused.value.error_code == 409


def test_json_schema_records_round_trip(agent) -> None:
    client = SchemaRegistryClient({"url": agent.url})
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
            "required": ["id"],
        }
    )
    values = [{"id": 1, "item": "tea"}, {"id": 2}]
    # The deserializer without a schema of its own validates with the writer's, fetched by id.
    got = round_trip(
        agent, "orders", JSONSerializer(schema, client), JSONDeserializer(None, schema_registry_client=client), values
    )
    assert got == values
    assert client.get_latest_version("orders-value").schema.schema_type == "JSON"


def _order_class() -> type:
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    message = fdp.message_type.add(name="Order")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    message.field.add(name="items", number=2, type=field.TYPE_STRING, label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_records_round_trip(agent) -> None:
    client = SchemaRegistryClient({"url": agent.url})
    order = _order_class()
    values = [order(id=1, items=["tea", "cake"]), order(id=2)]
    got = round_trip(
        agent,
        "shop-orders",
        ProtobufSerializer(order, client, {"use.deprecated.format": False}),
        ProtobufDeserializer(order, {"use.deprecated.format": False}, client),
        values,
    )
    assert got == values
    registered = client.get_latest_version("shop-orders-value")
    assert registered.schema.schema_type == "PROTOBUF"


def _read_all(store, topic: str) -> list:
    from lakelog.engine.topics import TopicPartition as TP

    consumer = store.consumer()
    consumer.assign([TP(topic, 0)])
    consumer.seek_to_beginning()
    records = []
    while len(records) < store.end_offsets(topic)[0]:
        records += consumer.poll(1000)
    consumer.close()
    return records


def test_lakelogs_own_consumer_hands_back_decoded_records(agent) -> None:
    """After the round trips above: every record decodes with the store's registry, without Spark;
    an Avro record written with v1 shows v2's new field with its default."""
    from lakelog.schemas.decoding import RecordDecodeError, RecordDecoder
    from lakelog.store import Store

    with Store.open(agent.store) as store:
        decoder = RecordDecoder(store)
        assert [decoder.value(r) for r in _read_all(store, "users")] == [
            {"name": "ada", "age": -1},
            {"name": "bo", "age": 7},
        ]
        assert [decoder.value(r) for r in _read_all(store, "orders")] == [{"id": 1, "item": "tea"}, {"id": 2}]
        assert [decoder.value(r) for r in _read_all(store, "shop-orders")] == [
            {"id": "1", "items": ["tea", "cake"]},  # int64 as a string: protobuf's JSON mapping
            {"id": "2"},
        ]
        producer = Producer({"bootstrap.servers": agent.bootstrap})
        producer.produce("raw", value=b"\x00\x00\x00\x03\xe7data")
        producer.produce("raw", value=b"plain")
        assert producer.flush(30) == 0
        unknown, plain = _read_all(store, "raw")
        with pytest.raises(RecordDecodeError, match=r"topic 'raw', partition 0, offset 0\).*schema id 999"):
            decoder.value(unknown)
        with pytest.raises(RecordDecodeError, match=r"offset 1\).*not in Confluent's wire format"):
            decoder.value(plain)
