"""The consumer against a real store: polling, positions, commits, groups."""

from __future__ import annotations

import time

import pytest

from lakelog.engine.errors import (
    CommitFailedError,
    IllegalStateError,
    InvalidConfigError,
    InvalidOffsetError,
    NoOffsetForPartitionError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.groups import OffsetAndMetadata
from lakelog.engine.topics import TopicPartition

pytestmark = pytest.mark.spark

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
FAST = {"heartbeat_interval_ms": 300, "session_timeout_ms": 4000, "auto_offset_reset": "earliest"}


def fill(store, spark, partitions=3, per_partition=40):
    store.create_topic("t", partitions=partitions)
    with store.producer(linger_ms=5, batch_num_messages=25) as producer:
        for i in range(per_partition * partitions // 2):
            producer.send("t", f"p{i}", partition=i % partitions, headers=[("n", str(i).encode())])
    # Files written by Spark too: the consumer reads both kinds.
    rows = [(f"s{i}", i % partitions) for i in range(per_partition * partitions // 2)]
    store.write(spark.createDataFrame(rows, "value string, partition int"), topic="t")


def drain(consumer, want, timeout=60):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.poll(timeout_ms=200)
    return got


def test_poll_returns_each_partition_in_order_without_gaps(store, spark):
    fill(store, spark)
    with store.consumer(auto_offset_reset="earliest", max_poll_records=7) as consumer:
        consumer.assign([T0, T1, T2])
        first = consumer.poll()
        assert 0 < len(first) <= 7
        records = first + drain(consumer, 120 - len(first))
    assert len(records) == 120
    for tp in (T0, T1, T2):
        offsets = [r.offset for r in records if (r.topic, r.partition) == tp]
        assert offsets == list(range(40))
    produced = [r for r in records if r.value.startswith(b"p")]
    assert all(r.headers == [("n", r.value[1:])] for r in produced)
    assert all(isinstance(r.timestamp, int) and r.timestamp_type == 0 for r in records)


def test_positions_seek_and_reset_policies(store, spark):
    fill(store, spark)
    with store.consumer(auto_offset_reset="latest") as consumer:
        consumer.assign([T0])
        assert consumer.position(T0) == 40 and consumer.poll() == []
        consumer.seek(T0, 35)
        assert [r.offset for r in consumer.poll()] == [35, 36, 37, 38, 39]
        consumer.seek_to_beginning()
        assert consumer.poll(max_records=1)[0].offset == 0
        consumer.seek_to_end([T0])
        assert consumer.position(T0) == 40
        table = consumer.poll_arrow()
        assert table.num_rows == 0
        with pytest.raises(InvalidOffsetError):
            consumer.seek(T0, -1)
        with pytest.raises(IllegalStateError, match="not assigned"):
            consumer.seek(T1, 0)
    with store.consumer("g", auto_offset_reset="none") as strict:
        strict.assign([T0])
        with pytest.raises(NoOffsetForPartitionError, match=r"t-0|'t', partition=0"):
            strict.poll()


def test_commits_are_the_next_offset_and_a_new_consumer_resumes_there(store, spark):
    fill(store, spark)
    with store.consumer("g", auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([T0, T1])
        got = consumer.poll(max_records=10)
        consumer.commit()
        consumer.commit({T1: OffsetAndMetadata(3, "note")})
        positions = {tp: consumer.position(tp) for tp in (T0, T1)}
        committed = consumer.committed([T0, T1, T2])
    assert committed[T0].offset == positions[T0] and committed[T1].offset == 3 and committed[T1].metadata == "note"
    assert committed[T2] is None and len(got) == 10
    with store.consumer("g", auto_offset_reset="none") as again:
        again.assign([T1])
        assert again.poll(max_records=1)[0].offset == 3


def test_group_members_share_partitions_and_rebalance(store, spark):
    fill(store, spark, partitions=3, per_partition=4)
    a = store.consumer("grp", client_id="a", **FAST)
    b = store.consumer("grp", client_id="b", **FAST)
    try:
        a.subscribe(["t"])
        a.poll(timeout_ms=100)
        assert a.assignment() == {T0, T1, T2}
        stale = a.group_metadata()
        b.subscribe(["t"])
        b.poll(timeout_ms=100)
        assert not b.assignment()  # nothing until a has revoked (eager: everything)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (b.assignment() and len(a.assignment()) < 3):
            a.poll(timeout_ms=100)
            b.poll(timeout_ms=100)
        assert a.assignment() | b.assignment() == {T0, T1, T2}
        assert not a.assignment() & b.assignment() and b.assignment()
        assert a.group_metadata().generation == b.group_metadata().generation > stale.generation
        # A commit from the old generation of a partition that moved is refused and changes nothing.
        a.group_client._generation = stale.generation
        moved = next(iter(b.assignment()))
        with pytest.raises(CommitFailedError, match="generation"):
            a.commit({moved: 1})
        a.group_client._generation = b.group_metadata().generation
        # b stops heartbeating (a hung process): after its session a takes everything back.
        b.group_client._stop.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and a.assignment() != {T0, T1, T2}:
            a.poll(timeout_ms=200)
        assert a.assignment() == {T0, T1, T2}
        with pytest.raises(CommitFailedError, match="not in group"):
            b.commit({T0: 1})
    finally:
        a.close()
        b.close()
    # Both left on close: a consumer outside the group may now commit for it.
    with store.consumer("grp") as manual:
        manual.assign([T0])
        manual.commit({T0: 2})
        assert manual.committed([T0])[T0].offset == 2


def test_bad_consumer_input_is_refused_clearly(store, spark):
    store.create_topic("t")
    with pytest.raises(InvalidConfigError, match=r"auto.offset.reset"):
        store.consumer(auto_offset_reset="smallest")
    with pytest.raises(InvalidConfigError, match=r"no.such.key"):
        store.consumer(**{"no.such.key": 1})
    consumer = store.consumer()
    with pytest.raises(InvalidConfigError, match=r"group.id"):
        consumer.subscribe(["t"])
    with pytest.raises(UnknownTopicOrPartitionError, match=r"t-5|partition=5"):
        consumer.assign([("t", 5)])
    grouped = store.consumer("g")
    grouped.assign([("t", 0)])
    with pytest.raises(InvalidOffsetError, match="non-negative"):
        grouped.commit({("t", 0): -3})
    grouped.close()
    with pytest.raises(IllegalStateError, match="closed"):
        grouped.poll()
