"""Kafka's idempotent producer through the endpoint: a retried batch is acknowledged with its
original offsets and committed once, a gap in sequences is refused (no sockets for the handler
cases; a real librdkafka producer with enable.idempotence for the end-to-end one)."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from deltalake import DeltaTable
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from lakelog.engine.commit import AppTransaction
from lakelog.engine.produce.placement import PlacedBatch, place_partition_records
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.idempotence import Sequence, SequenceClaim, app_id, next_sequences, sequence_verdict
from lakelog.kafka_endpoint.messages import Request, build
from lakelog.kafka_endpoint.produce import PRODUCE, RETRY_POLICY
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


WRAP = 2**31  # Kafka's sequences go on at 0 after 2**31 - 1 (DefaultRecordBatch.incrementSequence)


def test_sequence_verdicts_across_the_wrap():
    assert sequence_verdict(WRAP - 2, WRAP - 2, 5) is Sequence.NEXT  # a batch straddling the wrap
    assert next_sequences([_claim(WRAP - 2, 5)], {"a": WRAP - 2}) == {"a": 3}
    assert sequence_verdict(3, 3, 1) is Sequence.NEXT  # the batch after it
    assert sequence_verdict(3, WRAP - 2, 5) is Sequence.DUPLICATE  # the straddling one again
    assert sequence_verdict(3, WRAP - 10, 8) is Sequence.DUPLICATE  # one before it
    assert sequence_verdict(3, WRAP - 2, 6) is Sequence.OUT_OF_ORDER  # overlaps the next sequence
    assert sequence_verdict(WRAP - 2, 1, 1) is Sequence.OUT_OF_ORDER  # a gap across the wrap
    assert sequence_verdict(WRAP + 3, 3, 1) is Sequence.NEXT  # a next sequence written unwrapped
    # Half the sequence space behind or more is a gap, not a duplicate.
    assert sequence_verdict(0, WRAP // 2, 1) is Sequence.OUT_OF_ORDER
    assert sequence_verdict(0, WRAP // 2 + 1, 1) is Sequence.DUPLICATE


def _claim(base_sequence: int, count: int) -> SequenceClaim:
    return SequenceClaim("a", 7, 0, base_sequence, count)


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
        pid = _init_producer_id(endpoint)
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


def test_a_producer_whose_sequences_wrap_keeps_every_batch_and_answers_retries(plain_store):
    plain_store.create_topic("t", partitions=1)
    tp = TopicPartition("t", 0)
    endpoint = Endpoint(plain_store, "127.0.0.1", 9092)
    try:
        pid = _init_producer_id(endpoint)
        # The producer has sent 2**31 - 2 records to the partition (their next sequence, set as
        # its batches set it), one of them still in the table.
        state = plain_store.log.latest()
        seed = place_partition_records(state, "t", 0, [None], [b"seed"], None, [1_700_000_000_000])
        claim = AppTransaction(app_id(pid, state.topics["t"].topic_id, 0), WRAP - 2, replan=True)
        plain_store.context.committer("seed").append(PlacedBatch(seed, claim), RETRY_POLICY)

        straddling = _records(pid, WRAP - 2, [b"a", b"b", b"c", b"d", b"e"])  # sequences 2**31 - 2, -1, 0, 1, 2
        assert _produce(endpoint, straddling) == (ErrorCode.none, 1)
        assert _produce(endpoint, _records(pid, 3, [b"f"])) == (ErrorCode.none, 6)
        assert _produce(endpoint, straddling) == (ErrorCode.none, 1)  # a retry: its offsets, nothing new
        assert _produce(endpoint, _records(pid, 3, [b"f"])) == (ErrorCode.none, 6)
        assert _produce(endpoint, _records(pid, 5, [b"x"]))[0] == ErrorCode.out_of_order_sequence_number
        assert _produce(endpoint, _records(pid, 4, [b"g"])) == (ErrorCode.none, 7)
    finally:
        endpoint.close()
    assert plain_store.log.latest().end_offset(tp) == 8
    rows = DeltaTable(plain_store.log.uri).to_pyarrow_table().sort_by("offset")  # as the producer numbered them
    assert rows.column("sequence").to_pylist()[1:] == [WRAP - 2, WRAP - 1, 0, 1, 2, 3, 4]
    assert rows.column("value").to_pylist() == [b"seed", b"a", b"b", b"c", b"d", b"e", b"f", b"g"]


def _init_producer_id(endpoint: Endpoint) -> int:
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
    assert init.error_code == ErrorCode.none and init.producer_id > 0 and init.producer_epoch == 0
    return int(init.producer_id)


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
