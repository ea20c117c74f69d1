"""The producer against a real store (no Spark)."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import (
    InvalidConfigError,
    InvalidRecordError,
    ProducerClosedError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.produce.partitioner import partition_for_key
from lakelog.engine.topics import TopicPartition
from tests.rows import topic_rows


@pytest.fixture
def store(plain_store):
    return plain_store


def rows_by_offset(store, topic):
    return {(r.partition, r.offset): r for r in topic_rows(store, topic)}


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
    row = topic_rows(store, "t")[0]
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
    row = topic_rows(store, "t")[0]
    assert row.timestampType == 1 and int(row.timestamp.timestamp() * 1000) == md.timestamp


def test_keyless_records_spread_over_partitions(store):
    store.create_topic("t", partitions=3)
    with store.producer(**{"batch.num.messages": 5}) as producer:
        futures = [producer.send("t", f"{i}") for i in range(60)]
        partitions = {f.get().partition for f in futures}
    assert partitions == {0, 1, 2}


def test_batches_follow_batch_num_messages(store):
    store.create_topic("t")
    before = store.log.latest_version()
    with store.producer(**{"batch.num.messages": 10, "linger.ms": 60_000}) as producer:
        futures = [producer.send("t", str(i)) for i in range(30)]
        producer.flush()
    assert [f.get().offset for f in futures] == list(range(30))
    assert store.log.latest_version() - before == 3  # 3 full batches, no linger wait


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
    assert [bytes(r.value) for r in topic_rows(store, "t")] == [b"small", b"small too"]


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


def test_send_batch_places_columns_like_send_and_commits_them_whole(store):
    store.create_topic("t", partitions=4, config={"max.message.bytes": 100})
    keys = [f"user-{i % 7}" for i in range(40)]
    with store.producer(linger_ms=50) as producer:
        before = producer.send("t", "first", key="user-0")
        batch = producer.send_batch("t", [f"v{i}" for i in range(40)], keys=keys)
        after = producer.send("t", "last", key="user-0")
        placed = batch.get(timeout=60)
        pinned = producer.send_batch("t", pa.array([b"a", b"b"]), partition=3, timestamps=[5, 6]).get(timeout=60)
        too_big = producer.send_batch("t", [b"ok", b"x" * 101], partition=0)
        unknown = producer.send_batch("nope", [b"v"])
        producer.flush()
    assert list(placed.partitions) == [partition_for_key(k.encode(), 4) for k in keys]
    assert isinstance(too_big.exception(), RecordTooLargeError)
    assert isinstance(unknown.exception(), UnknownTopicOrPartitionError)
    rows = rows_by_offset(store, "t")
    for i, (p, o) in enumerate(zip(placed.partitions, placed.offsets, strict=True)):
        assert rows[(int(p), int(o))].value == f"v{i}".encode()
    zero = partition_for_key(b"user-0", 4)
    in_zero = [int(o) for p, o in zip(placed.partitions, placed.offsets, strict=True) if p == zero]
    # Send order within a partition across send, send_batch, send.
    assert before.get().offset < min(in_zero) and max(in_zero) < after.get().offset
    three = sum(1 for p in placed.partitions if p == 3) + (zero == 3) * 2
    assert [(int(p), int(o)) for p, o in zip(pinned.partitions, pinned.offsets, strict=True)] == [
        (3, three),
        (3, three + 1),
    ]
    assert [int(r.timestamp.timestamp() * 1000) for r in topic_rows(store, "t") if r.partition == 3][-2:] == [5, 6]
    assert b"x" * 101 not in {r.value for r in rows.values()} and b"ok" not in {r.value for r in rows.values()}
    with pytest.raises(InvalidRecordError, match="keys has 1 entries for 2 values"):
        store.producer().send_batch("t", [b"a", b"b"], keys=[b"k"])


def test_timestamps_outside_what_the_table_holds_are_refused_and_nothing_is_written(store):
    from datetime import UTC, datetime

    from lakelog.engine.records import MAX_TIMESTAMP_MS

    store.create_topic("t", partitions=1)
    version = store.log.latest_version()
    files = set(Path(store.uri).rglob("*.parquet"))
    with store.producer(linger_ms=0) as producer:
        for bad in (2**62, 2**63, 10**16, MAX_TIMESTAMP_MS + 1, -1, datetime(1969, 12, 31, tzinfo=UTC)):
            with pytest.raises(InvalidRecordError, match="9999-12-31"):
                producer.send("t", "x", timestamp=bad)
        with pytest.raises(InvalidRecordError, match="9999-12-31"):
            producer.send_batch("t", [b"a", b"b"], timestamps=[5, 2**62])
        assert store.log.latest_version() == version  # refused before anything was planned:
        assert set(Path(store.uri).rglob("*.parquet")) == files  # no orphan file either
        last = producer.send("t", "last instant", timestamp=MAX_TIMESTAMP_MS).get(timeout=60)
        first = producer.send_batch("t", [b"epoch"], timestamps=[0]).get(timeout=60)
    rows = topic_rows(store, "t")
    assert [r.value for r in rows] == [b"last instant", b"epoch"]
    assert rows[0].timestamp == datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert rows[1].timestamp == datetime(1970, 1, 1, tzinfo=UTC)
    assert (last.timestamp, int(first.offsets[0])) == (MAX_TIMESTAMP_MS, 1)


def _column_by_partition(store, topic, column):
    """``column`` of every record of ``topic``, per partition in offset order."""
    state = store.log.latest()
    reader = PartitionReader(store.uri)
    by_partition = {}
    for p in range(state.topics[topic].partitions):
        tp = TopicPartition(topic, p)
        by_partition[p] = reader.read(state.files_of(tp).all(), tp, 0).column(column).to_pylist()
    return by_partition


def test_keyed_records_are_hashed_per_batch_not_per_send(store, monkeypatch):
    # send() leaves a keyed record's partition to its batch: one murmur2 pass over the batch's
    # keys (partitions_for_keys), none in Python per record, and the partitions Kafka picks.
    import lakelog.engine.produce.partitioner as partitioner

    store.create_topic("t", partitions=5)
    keys = [f"user-{i}".encode() for i in range(200)]
    expected = [partition_for_key(k, 5) for k in keys]
    calls = []
    real = partitioner.murmur2
    monkeypatch.setattr(partitioner, "murmur2", lambda data: calls.append(data) or real(data))
    with store.producer(linger_ms=60_000) as producer:
        futures = [producer.send("t", b"v", key=k) for k in keys]
        producer.flush()
    assert [f.get().partition for f in futures] == expected
    assert calls == []


def test_a_record_whose_topic_is_gone_when_its_batch_is_placed_fails_alone(store):
    store.create_topic("t", partitions=2)
    store.create_topic("gone", partitions=2)
    with store.producer(linger_ms=60_000) as producer:
        keyed = producer.send("gone", "a", key="k")
        keyless = producer.send("gone", "b")
        pinned = producer.send("gone", "c", partition=1)
        ok = producer.send("t", "d", key="k")
        store.delete_topic("gone")
        producer._topics_read_at = 0  # the sender reads the topics again before it places the batch
        producer.flush()
    for future in (keyed, keyless, pinned):
        assert isinstance(future.exception(), UnknownTopicOrPartitionError)
        assert "'gone'" in str(future.exception())
    assert ok.get().partition == partition_for_key(b"k", 2)
    assert [bytes(r.value) for r in topic_rows(store, "t")] == [b"d"]


def test_sequences_count_per_partition_in_send_order_across_batches(store):
    store.create_topic("t", partitions=3)
    partitions = [0, 1, 0, 0, 2, 1, 0, 1, 1, 0, 2]
    with store.producer(**{"batch.num.messages": 4, "linger.ms": 60_000}) as producer:
        futures = [producer.send("t", f"{i}", partition=p) for i, p in enumerate(partitions)]
        producer.flush()
    assert [f.get().partition for f in futures] == partitions
    values = _column_by_partition(store, "t", "value")
    sequences = _column_by_partition(store, "t", "sequence")
    for p in range(3):
        sent = [f"{i}".encode() for i, q in enumerate(partitions) if q == p]
        assert values[p] == sent
        assert sequences[p] == list(range(len(sent)))


def test_a_record_without_timestamp_gets_the_whole_ms_of_its_send(store):
    store.create_topic("t")
    with store.producer(linger_ms=0) as producer:
        before = int(time.time() * 1000)
        future = producer.send("t", "x")
        after = int(time.time() * 1000)
        given = producer.send("t", "y", timestamp=1_700_000_000_123).get()
        md = future.get()
    assert type(md.timestamp) is int and before <= md.timestamp <= after
    assert given.timestamp == 1_700_000_000_123
    stamps = [int(r.timestamp.timestamp() * 1000) for r in topic_rows(store, "t")]
    assert stamps == [md.timestamp, 1_700_000_000_123]


def test_partitioner_ignore_keys_places_keyed_records_as_keyless(store):
    store.create_topic("t", partitions=4)
    with store.producer(**{"partitioner.ignore.keys": True, "linger.ms": 60_000}) as producer:
        futures = [producer.send("t", b"v", key=f"user-{i}".encode()) for i in range(40)]
        producer.flush()
    assert len({f.get().partition for f in futures}) == 1  # one sticky run, whatever the keys
    assert {bytes(r.key) for r in topic_rows(store, "t")} == {f"user-{i}".encode() for i in range(40)}


def test_partition_arguments_are_checked_by_type_at_send(store):
    import enum

    class Lane(enum.IntEnum):
        SECOND = 1

    store.create_topic("t", partitions=2)
    with store.producer(linger_ms=0) as producer:
        assert producer.send("t", "x", partition=Lane.SECOND).get().partition == 1
        for bad in (True, 1.0, "1"):
            with pytest.raises(UnknownTopicOrPartitionError, match="partition must be an int"):
                producer.send("t", "x", partition=bad)
        with pytest.raises(InvalidRecordError):
            producer.send("t", "x", key=5)
        with pytest.raises(InvalidRecordError):
            producer.send("t", "x", timestamp=1.5)
        with pytest.raises(InvalidRecordError):
            producer.send("t", "x", headers=[("h", 5)])


def test_send_yields_the_gil_to_a_committing_sender_every_1024_records(store, monkeypatch):
    # A loop of send() never gives the GIL up on its own, so a sender committing the batch before
    # would wait the switch interval after each of its GIL-free calls: send() yields once every
    # YIELD_EVERY records of a batch while a commit is in flight, and never when none is.
    import threading

    import lakelog.engine.produce.record_queue as queue_module

    store.create_topic("t", partitions=1)
    yields = []
    monkeypatch.setattr(queue_module, "_yield_gil", yields.append)
    every = queue_module.YIELD_EVERY
    with store.producer(linger_ms=60_000, batch_num_messages=3 * every) as producer:
        committing, release = threading.Event(), threading.Event()
        real_append = producer._writer.append

        def held_append(batch, policy, **kwargs):
            committing.set()
            release.wait(30)
            return real_append(batch, policy, **kwargs)

        monkeypatch.setattr(producer._writer, "append", held_append)
        first = [producer.send("t", b"v", partition=0) for _ in range(3 * every)]  # the last one seals
        assert committing.wait(30)
        assert yields == []  # nothing was in flight while they were sent
        during = [producer.send("t", b"v", partition=0) for _ in range(2 * every + 1)]
        assert yields == [0, 0, 0]  # records 0, 1024 and 2048 of the batch sent during the commit
        release.set()
        producer.flush()
    assert [f.get().offset for f in first + during] == list(range(5 * every + 1))


def test_send_is_the_compiled_path_and_stamps_a_record_with_the_wall_clock_in_whole_ms(store):
    # Producer.send is record_queue.pyx's, compiled by the install: a build that fell back to
    # anything else (or a Python send shadowing it) would fail here, not only run slower.
    import importlib.machinery

    from lakelog.engine.produce import record_queue
    from lakelog.engine.produce.producer import Producer

    assert record_queue.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert Producer.send is record_queue.SendPath.send
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        before = int(time.time() * 1000)
        md = producer.send("t", b"v", partition=0).get()
        after = int(time.time() * 1000)
    assert type(md.timestamp) is int and before <= md.timestamp <= after
    row = topic_rows(store, "t")[0]
    assert int(row.timestamp.timestamp() * 1000) == md.timestamp and row.timestampType == 0
