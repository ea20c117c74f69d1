"""The agent's transactional producers (TxnProxy, in-process, no JVM): a transactional produce
request's records join the open transaction in order, on their partition, and the topic is
looked up once per request rather than once per record (each look reads the log: Kafka
Streams' exactly_once_v2 sends thousands of records a second through here)."""

from __future__ import annotations

import time

import pytest

from lakelog.engine.context import StoreContext
from lakelog.engine.errors import InvalidTxnStateError, UnknownTopicOrPartitionError
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.record_batches import ProducedBatch
from lakelog.kafka_endpoint.txn_proxy import TxnProxy


def _batch(proxy: TxnProxy, base_sequence: int, values: list[bytes]) -> ProducedBatch:
    now = int(time.time() * 1000)
    return ProducedBatch(
        producer_id=proxy.producer_id,
        producer_epoch=proxy.epoch,
        base_sequence=base_sequence,
        transactional=True,
        keys=[b"k" + v for v in values],
        values=values,
        headers=[None] * len(values),
        timestamps=[now] * len(values),
    )


def test_a_requests_records_join_the_transaction_in_order_with_one_look_at_the_topics(plain_store, monkeypatch):
    plain_store.create_topic("t", partitions=2)
    proxy = TxnProxy(plain_store, "tx")
    looks: list[str] = []
    latest_topics = StoreContext.latest_topics

    def counted(context: StoreContext):
        looks.append("latest_topics")
        return latest_topics(context)

    monkeypatch.setattr(StoreContext, "latest_topics", counted)
    values = [f"v{i}".encode() for i in range(100)]
    proxy.send("t", 1, [_batch(proxy, 0, values[:60]), _batch(proxy, 60, values[60:])])
    assert looks == ["latest_topics"]
    proxy.send("t", 1, [_batch(proxy, 60, values[60:])])  # a retried request: added once
    proxy.end(commit=True)
    monkeypatch.undo()

    assert plain_store.end_offsets("t") == {0: 0, 1: 100}
    with plain_store.consumer() as consumer:
        consumer.assign([TopicPartition("t", 1)])
        consumer.seek_to_beginning()
        read: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(read) < 100 and time.monotonic() < deadline:
            read += [(bytes(r.key), bytes(r.value)) for r in consumer.poll(timeout_ms=500)]
    assert read == [(b"k" + v, v) for v in values]


def test_a_transaction_whose_sequences_wrap_keeps_every_batch_and_adds_a_retry_once(plain_store):
    plain_store.create_topic("t", partitions=1)
    proxy = TxnProxy(plain_store, "tx")
    wrap = 2**31  # Kafka's producer numbers on from 0 after 2**31 - 1
    proxy.send("t", 0, [_batch(proxy, wrap - 2, [b"a", b"b", b"c"])])  # 2**31 - 2, 2**31 - 1, 0
    proxy.send("t", 0, [_batch(proxy, 1, [b"d"])])
    proxy.send("t", 0, [_batch(proxy, wrap - 2, [b"a", b"b", b"c"]), _batch(proxy, 1, [b"d"])])  # retried
    proxy.send("t", 0, [_batch(proxy, 2, [b"e"])])
    proxy.end(commit=True)

    assert plain_store.end_offsets("t") == {0: 5}
    with plain_store.consumer() as consumer:
        consumer.assign([TopicPartition("t", 0)])
        consumer.seek_to_beginning()
        assert [bytes(r.value) for r in consumer.poll(timeout_ms=2_000)] == [b"a", b"b", b"c", b"d", b"e"]


def test_records_for_a_partition_that_does_not_exist_fail_the_request_and_nothing_lands(plain_store):
    plain_store.create_topic("t", partitions=1)
    proxy = TxnProxy(plain_store, "tx")
    with pytest.raises(UnknownTopicOrPartitionError, match="partition 3 of topic 't' does not exist"):
        proxy.send("t", 3, [_batch(proxy, 0, [b"a", b"b"])])
    with pytest.raises(InvalidTxnStateError):
        proxy.end(commit=True)
    assert plain_store.end_offsets("t") == {0: 0}
