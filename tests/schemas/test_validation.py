"""Broker-side schema validation through ``lakelog serve``: a topic with
``confluent.value.schema.validation=true`` takes records framed with a schema id registered under
``<topic>-value`` and refuses others with INVALID_RECORD, committing none of them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lakelog.schemas.schemas_topic import RegistryState, SchemaVersion, schema_record
from lakelog.schemas.validation import schema_id_of, unregistered
from lakelog.store import Store
from tests.schemas.conftest import RegistryAgent

USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})


def framed(schema_id: int, body: bytes = b"\x06ada") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def test_the_decision() -> None:
    state = RegistryState()
    state.fold([(0, *schema_record(SchemaVersion("t-value", 1, 4, '"string"')))])
    state.fold([(1, *schema_record(SchemaVersion("other-value", 1, 5, '"int"')))])
    assert schema_id_of(framed(4)) == 4 and schema_id_of(b"\x01\x00\x00\x00\x04") is None
    assert unregistered(state, "t-value", [framed(4), None, framed(4, b"")]) is None
    assert "not framed" in unregistered(state, "t-value", [framed(4), b"plain"])
    assert "schema id 5" in unregistered(state, "t-value", [framed(5)])
    assert "schema id 9" in unregistered(state, "t-value", [framed(9)])


@pytest.fixture(scope="module")
def agent(tmp_path_factory) -> Iterator[RegistryAgent]:
    root = tmp_path_factory.mktemp("validation")
    with Store.open(root / "store") as store:
        store.create_topic("checked", partitions=1, config={"confluent.value.schema.validation": "true"})
        store.create_topic("open", partitions=1)
    started = RegistryAgent(root / "store", root / "agent.log")
    yield started
    started.stop()


def produce(agent: RegistryAgent, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    producer = Producer({"bootstrap.servers": agent.bootstrap, "linger.ms": 20})
    errors: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda error, _message: errors.append(error))
    assert producer.flush(30) == 0
    return errors


def test_a_validating_topic_takes_registered_ids_and_refuses_the_rest(agent) -> None:
    client = SchemaRegistryClient({"url": agent.url})
    good = AvroSerializer(client, USER)({"name": "ada"}, SerializationContext("checked", MessageField.VALUE))
    other = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "n", "type": "int"}]})
    other_id = client.register_schema("elsewhere-value", Schema(other, "AVRO"))
    assert produce(agent, "checked", [good, good]) == [None, None]
    for bad in ([framed(other_id)], [framed(999)], [b"not avro"], [good, framed(999)]):
        errors = produce(agent, "checked", bad)
        assert {e.code() if e else None for e in errors} == {KafkaError.INVALID_RECORD}, errors
    assert produce(agent, "open", [b"not avro", framed(999)]) == [None, None]
    with Store.open(agent.store) as store:
        assert store.end_offsets("checked") == {0: 2}  # nothing of a refused request was committed


def test_a_topic_created_elsewhere_is_validated_from_its_first_record(agent) -> None:
    with Store.open(agent.store) as store:
        store.create_topic("late", partitions=1, config={"confluent.value.schema.validation": "true"})
    errors = produce(agent, "late", [framed(999)])
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_RECORD]
    with Store.open(agent.store) as store:
        assert store.end_offsets("late") == {0: 0}
