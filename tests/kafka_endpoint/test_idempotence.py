"""Kafka's idempotent producer through the endpoint: a retried batch is acknowledged with its
original offsets and committed once, a gap in sequences is refused (no sockets for the handler
cases; a real librdkafka producer with enable.idempotence for the end-to-end one)."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.idempotence import Sequence, sequence_verdict
from lakelog.kafka_endpoint.messages import Request, build
from lakelog.kafka_endpoint.produce import PRODUCE
from lakelog.kafka_endpoint.transactions import INIT_PRODUCER_ID
from lakelog.store import Store


def test_sequence_verdicts():
    assert sequence_verdict(-1, 0, 3) is Sequence.NEXT
    assert sequence_verdict(3, 3, 2) is Sequence.NEXT
    assert sequence_verdict(5, 3, 2) is Sequence.DUPLICATE
    assert sequence_verdict(5, 0, 3) is Sequence.DUPLICATE
    assert sequence_verdict(5, 4, 2) is Sequence.OUT_OF_ORDER  # overlaps the end
    assert sequence_verdict(5, 7, 1) is Sequence.OUT_OF_ORDER  # a batch is missing
    assert sequence_verdict(-1, 1, 1) is Sequence.OUT_OF_ORDER


def _records(producer_id: int, base_sequence: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, producer_id, 0, base_sequence, 2**20)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000 + i, None, value, [])
    return bytes(builder.build())


def _produce(endpoint: Endpoint, records: bytes, partition: int = 0):
    body = build(
        load_request_schema(PRODUCE, 9),
        transactional_id=None,
        acks=-1,
        timeout=30_000,
        topic_data=[{"name": "t", "partition_data": [{"index": partition, "records": records}]}],
    )
    response = endpoint.handle(Request(PRODUCE, 9, 1, "test", body))
    (answer,) = response.responses[0].partition_responses
    return answer.error_code, answer.base_offset


def test_a_retried_batch_is_acknowledged_with_its_offsets_and_committed_once(plain_store):
    plain_store.create_topic("t", partitions=1)
    endpoint = Endpoint(plain_store, "127.0.0.1", 9092)
    try:
        init = endpoint.handle(
            Request(
                INIT_PRODUCER_ID,
                4,
                1,
                "test",
                build(
                    load_request_schema(INIT_PRODUCER_ID, 4),
                    transactional_id=None,
                    transaction_timeout=60_000,
                    producer_id=-1,
                    producer_epoch=-1,
                ),
            )
        )
        pid = int(init.producer_id)
        assert init.error_code == ErrorCode.none and pid > 0 and init.producer_epoch == 0
        first = _records(pid, 0, [b"a", b"b", b"c"])
        assert _produce(endpoint, first) == (ErrorCode.none, 0)
        assert _produce(endpoint, first) == (ErrorCode.none, 0)  # the retry: same offsets, nothing new
        assert _produce(endpoint, _records(pid, 5, [b"x"]))[0] == ErrorCode.out_of_order_sequence_number
        assert _produce(endpoint, _records(pid, 3, [b"d"])) == (ErrorCode.none, 3)
        assert _produce(endpoint, first) == (ErrorCode.none, 0)
        other = _records(pid + 1, 0, [b"e"])  # another producer's sequences are its own
        assert _produce(endpoint, other) == (ErrorCode.none, 4)
    finally:
        endpoint.close()
    assert plain_store.log.latest().end_offset(TopicPartition("t", 0)) == 5
    consumer = plain_store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("t", 0)])
    assert [bytes(r.value) for r in consumer.poll(timeout_ms=500)] == [b"a", b"b", b"c", b"d", b"e"]
    consumer.close()


@pytest.mark.parametrize("acks", ["all"])
def test_librdkafka_with_idempotence_produces_every_record_once(agent, acks):
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": agent.bootstrap, "enable.idempotence": True, "acks": acks, "linger.ms": 2}
    )
    acked = []
    for i in range(200):
        producer.produce(
            "t",
            f"v{i}".encode(),
            key=f"k{i % 7}".encode(),
            on_delivery=lambda e, m: acked.append((e, m.partition(), m.offset())),
        )
    assert producer.flush(60) == 0
    assert all(e is None for e, _, _ in acked) and len(acked) == 200
    store = Store.open(agent.store, create=False)
    ends = store.log.latest()
    assert sum(ends.end_offset(TopicPartition("t", p)) for p in (0, 1)) == 200
    assert sorted((p, o) for _, p, o in acked) == sorted(
        (p, o) for p in (0, 1) for o in range(ends.end_offset(TopicPartition("t", p)))
    )
