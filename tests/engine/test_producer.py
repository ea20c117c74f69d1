"""The producer against a real store."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from engine.errors import (
    InvalidConfigError,
    InvalidRecordError,
    ProducerClosedError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from engine.partitioner import partition_for_key

pytestmark = pytest.mark.spark


def rows_by_offset(store, topic):
    return {(r.partition, r.offset): r for r in store.read(topic).collect()}


def test_keyed_records_land_where_kafka_puts_them_with_dense_offsets(store):
    store.create_topic("orders", partitions=4)
    keys = [f"user-{i % 7}".encode() for i in range(60)]
    with store.producer(linger_ms=20) as producer:
        futures = [producer.send("orders", f"v{i}", key=k) for i, k in enumerate(keys)]
        acks = [f.get(timeout=60) for f in futures]
    for key, md in zip(keys, acks, strict=True):
        assert md.topic == "orders"
        assert md.partition == partition_for_key(key, 4)
    by_partition = defaultdict(list)
    for i, md in enumerate(acks):
        by_partition[md.partition].append((md.offset, i))
    for entries in by_partition.values():
        # dense from 0, in send order
        assert [o for o, _ in entries] == list(range(len(entries)))
        assert [i for _, i in entries] == sorted(i for _, i in entries)
    rows = rows_by_offset(store, "orders")
    assert len(rows) == 60
    for i, md in enumerate(acks):
        row = rows[(md.partition, md.offset)]
        assert bytes(row.value) == f"v{i}".encode() and bytes(row.key) == keys[i]
    assert store.end_offsets("orders") == {p: len(by_partition[p]) for p in range(4)}


def test_explicit_partition_headers_timestamps_and_tombstones(store):
    store.create_topic("t", partitions=3)
    with store.producer() as producer:
        md = producer.send("t", None, key="k", partition=2, headers=[("h", b"1"), ("h", None)], timestamp=1234).get()
    assert (md.partition, md.offset, md.timestamp) == (2, 0, 1234)
    row = store.read("t").first()
    assert row.value is None and bytes(row.key) == b"k"
    assert [(h.key, h.value and bytes(h.value)) for h in row.headers] == [("h", b"1"), ("h", None)]
    assert row.timestampType == 0
    assert int(row.timestamp.timestamp() * 1000) == 1234


def test_log_append_time_topics_stamp_records_at_commit(store):
    store.create_topic("t", config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with store.producer() as producer:
        md = producer.send("t", "x", timestamp=5).get()
    assert md.timestamp >= before
    row = store.read("t").first()
    assert row.timestampType == 1 and int(row.timestamp.timestamp() * 1000) == md.timestamp


def test_keyless_records_spread_over_partitions(store):
    store.create_topic("t", partitions=3)
    with store.producer(**{"batch.num.messages": 5}) as producer:
        futures = [producer.send("t", f"{i}") for i in range(60)]
        partitions = {f.get().partition for f in futures}
    assert partitions == {0, 1, 2}


def test_batches_follow_batch_num_messages(store):
    store.create_topic("t")
    before = store.reader.latest_version()
    with store.producer(**{"batch.num.messages": 10, "linger.ms": 60_000}) as producer:
        futures = [producer.send("t", str(i)) for i in range(30)]
        producer.flush()
    assert [f.get().offset for f in futures] == list(range(30))
    assert store.reader.latest_version() - before == 3  # 3 full batches, no linger wait


def test_bad_records_fail_alone_and_do_not_block_their_batch(store):
    store.create_topic("t", partitions=2, config={"max.message.bytes": 100})
    with store.producer(linger_ms=50) as producer:
        ok1 = producer.send("t", "small", partition=0)
        big = producer.send("t", b"x" * 101, partition=0)
        unknown = producer.send("missing", "v")
        wrong = producer.send("t", "v", partition=5)
        ok2 = producer.send("t", "small too", partition=0)
        producer.flush()
    assert isinstance(big.exception(), RecordTooLargeError)
    assert "max.message.bytes=100" in str(big.exception())
    assert isinstance(unknown.exception(), UnknownTopicOrPartitionError)
    assert isinstance(wrong.exception(), UnknownTopicOrPartitionError)
    assert (ok1.get().offset, ok2.get().offset) == (0, 1)
    assert [bytes(r.value) for r in store.read("t").orderBy("offset").collect()] == [b"small", b"small too"]


def test_argument_errors_raise_and_closed_producers_refuse(store):
    store.create_topic("t")
    producer = store.producer()
    with pytest.raises(InvalidRecordError):
        producer.send("t", 12)
    producer.close()
    producer.close()
    with pytest.raises(ProducerClosedError):
        producer.send("t", "x")
    with pytest.raises(InvalidConfigError, match=r"unknown producer config key 'bootstrap\.servers'"):
        store.producer(**{"bootstrap.servers": "x:9092"})
    with pytest.raises(InvalidConfigError, match="acks"):
        store.producer(acks="0")


def test_callbacks_and_partitions_for(store):
    store.create_topic("t", partitions=2)
    seen = []
    with store.producer() as producer:
        assert producer.partitions_for("t") == [0, 1]
        producer.send("t", "a", partition=1).add_callback(seen.append)
        errors = []
        producer.send("nope", "a").add_errback(errors.append)
        producer.flush()
    assert seen[0].partition == 1 and isinstance(errors[0], UnknownTopicOrPartitionError)


def test_a_producer_sees_topics_created_after_it_started(store):
    with store.producer() as producer:
        store.create_topic("late", partitions=2)
        md = producer.send("late", "v", key="k").get()
    assert md.partition == partition_for_key(b"k", 2)


def test_records_in_flight_when_partitions_grow_keep_their_partition(store):
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        first = producer.send("t", "a", key="k").get()
        store.create_partitions("t", 8)
        producer._topics_read_at = 0  # force a metadata refresh, as metadata.max.age.ms would
        later = producer.send("t", "b", key="k").get()
    assert first.partition == 0
    assert later.partition == partition_for_key(b"k", 8)
    assert store.end_offsets("t")[later.partition] >= 1
