"""DeleteRecords through the agent (confluent-kafka's ``AdminClient.delete_records``): each
partition's log start moves, Fetch and ListOffsets follow it, lakelog's own readers see the same
start, and a partition asked past its high watermark fails alone with OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient

from lakelog.store import Store


def test_delete_records_moves_the_log_start_seen_by_fetch_and_list_offsets(agent, plain_store: Store) -> None:
    with plain_store.producer(linger_ms=0) as producer:
        producer.send_batch("t", [f"a{i}".encode() for i in range(10)], partition=0).get()
        producer.send_batch("t", [f"b{i}".encode() for i in range(3)], partition=1).get()
    admin = AdminClient({"bootstrap.servers": agent.bootstrap})
    futures = admin.delete_records([KafkaTP("t", 0, 4), KafkaTP("t", 1, 7)])
    done = {(tp.topic, tp.partition): f for tp, f in futures.items()}
    assert done[("t", 0)].result(30).low_watermark == 4
    with pytest.raises(KafkaException) as failed:
        done[("t", 1)].result(30)
    assert failed.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    high = admin.delete_records([KafkaTP("t", 1, -1)])  # -1: the high watermark
    assert next(iter(high.values())).result(30).low_watermark == 3
    assert plain_store.beginning_offsets("t") == {0: 4, 1: 3}

    consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(KafkaTP("t", 0), timeout=30) == (4, 10)
        consumer.assign([KafkaTP("t", 0, OFFSET_BEGINNING)])
        seen = []
        while len(seen) < 6:
            message = consumer.poll(10)
            assert message is not None and message.error() is None, message and message.error()
            seen.append((message.offset(), message.value()))
        assert seen == [(i, f"a{i}".encode()) for i in range(4, 10)]
    finally:
        consumer.close()
    # A fetch below the start is out of range: auto.offset.reset earliest lands on the start.
    below = Consumer(
        {
            "bootstrap.servers": agent.bootstrap,
            "group.id": "below",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        below.assign([KafkaTP("t", 0, 1)])
        message = below.poll(15)
        assert message is not None and message.error() is None and message.offset() == 4
    finally:
        below.close()
