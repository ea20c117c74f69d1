"""Kafka's transactional producer through the agent: a committed transaction's records and
offsets land as one Delta commit, an aborted one never, and a new instance of the transactional
id fences the old one (librdkafka)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTP

from lakelog.engine.topics import TopicPartition
from lakelog.store import Store


def _producer(agent, transactional_id: str = "tx") -> Producer:
    producer = Producer({"bootstrap.servers": agent.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer


def test_committed_transactions_land_whole_and_aborted_ones_never(agent):
    producer = _producer(agent)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("t", f"kept-{i}".encode(), partition=i % 2)
    consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": "txg", "enable.auto.commit": False})
    producer.send_offsets_to_transaction([KafkaTP("t", 0, 7)], consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("t", f"dropped-{i}".encode(), partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    fresh = Store.open(agent.store, create=False)
    ends = fresh.log.latest()
    assert [ends.end_offset(TopicPartition("t", p)) for p in (0, 1)] == [5, 5]
    appends = [e for e in fresh.history_entries("t") if e.ranges]
    assert len(appends) == 1  # records and the group's offset in one Delta commit:
    by_topic: dict[str, int] = {}
    for topic, _, start, end in appends[0].ranges:
        by_topic[topic] = by_topic.get(topic, 0) + end - start
    assert by_topic == {"t": 10, "__consumer_offsets": 1}
    assert consumer.committed([KafkaTP("t", 0)], timeout=10)[0].offset == 7
    consumer.close()
    reader = Consumer(
        {
            "bootstrap.servers": agent.bootstrap,
            "group.id": "r",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([KafkaTP("t", 0, 0), KafkaTP("t", 1, 0)])
    values = []
    for _ in range(50):
        m = reader.poll(0.2)
        if m is not None and m.error() is None:
            values.append(m.value().decode())
        if len(values) == 10:
            break
    reader.close()
    assert sorted(values) == sorted(f"kept-{i}" for i in range(10))


def test_a_new_instance_fences_the_old_one(agent):
    old = _producer(agent)
    old.begin_transaction()
    old.produce("t", b"from-old", partition=0)
    old.flush(30)
    new = _producer(agent)
    with pytest.raises(KafkaException):
        old.commit_transaction(30)
    new.begin_transaction()
    new.produce("t", b"from-new", partition=0)
    new.commit_transaction(30)
    store = Store.open(agent.store, create=False)
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("t", 0)])
    assert [bytes(r.value) for r in consumer.poll(timeout_ms=500)] == [b"from-new"]
    consumer.close()
