"""Maintenance on a real store: Delta commits, Parquet files, live writers racing it."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from lakelog.cli import main as cli_main
from lakelog.compaction import maintain
from lakelog.compaction.files import partition_logs
from lakelog.compaction.plan import optimize_bins
from lakelog.compaction.rewrite import OptimizeTask, run_optimize
from lakelog.compaction.step import MaintenanceStep, commit_step
from lakelog.engine.commit import Committer, RetryPolicy, TableLog
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import (
    InvalidConfigError,
    MaintenanceConflictError,
    OffsetOutOfRangeError,
    StoreError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.topics import OFFSETS_TOPIC, TopicPartition
from tests.compaction.produce import commit

pytestmark = pytest.mark.spark

NOW = int(time.time() * 1000)


@pytest.fixture(autouse=True)
def now_at_the_test():
    """NOW is each test's own start: maintenance compares ``now_ms`` with commits' wall-clock
    times, and a test may run long after this module was imported (pytest-xdist workers)."""
    global NOW
    NOW = int(time.time() * 1000)


def log_rows(store, topic: str, partition: int) -> list[dict]:
    """Every column of a partition's records, in offset order (read without Spark)."""
    tp = TopicPartition(topic, partition)
    files = TableLog(store.uri).latest().files_of(tp).all()
    return PartitionReader(store.uri).read(files, tp, 0).to_pylist()


def live_files(store, topic: str) -> dict[int, int]:
    state = TableLog(store.uri).latest()
    return {tp.partition: len(p.files) for tp, p in partition_logs(state, {topic}).items()}


def commit_actions(store, version: int) -> list[dict]:
    commit = TableLog(store.uri).read_commit(version)
    return [json.loads(json.dumps(a.to_json())) for a in (commit.actions if commit else ())]


def test_optimize_merges_small_files_keeping_records_offsets_and_order(spark, store):
    store.create_topic("t", partitions=2)
    writer = Committer(store.log, "w")
    for i in range(12):
        rows = [(f"k{j}".encode(), f"v{i}.{j}".encode(), NOW - 1000 * (12 - i)) for j in range(3)]
        commit(writer, "t", i % 2, rows, headers=[("h", f"{i}".encode()), ("n", None)])
    # Files written by Spark (store.write) store timestamps differently; they merge all the same.
    store.write(
        spark.createDataFrame([(b"k", b"spark", 0), (b"k", b"spark", 1)], "key binary, value binary, partition int"),
        "t",
    )
    before = {p: log_rows(store, "t", p) for p in (0, 1)}
    ends, starts = store.end_offsets("t"), store.beginning_offsets("t")
    assert live_files(store, "t") == {0: 7, 1: 7}

    report = maintain(store, topics=["t"], vacuum=False)  # a Store: rewrites run as Spark tasks

    (topic,) = report.topics
    assert (topic.files_before, topic.files_after) == (14, 2)
    assert topic.records_removed_by_compaction == topic.records_removed_by_retention == 0
    assert live_files(store, "t") == {0: 1, 1: 1}
    assert {p: log_rows(store, "t", p) for p in (0, 1)} == before  # every column, same offsets, same order
    assert (store.end_offsets("t"), store.beginning_offsets("t")) == (ends, starts)
    actions = commit_actions(store, topic.versions[0])
    assert actions[0]["commitInfo"]["operation"] == "OPTIMIZE"
    changes = [a.get("add") or a.get("remove") for a in actions[1:]]
    assert len(changes) == 16 and not any(c["dataChange"] for c in changes)
    # Offsets keep pruning: each new file covers one contiguous range, and appends go on from the end.
    with store.producer(linger_ms=0) as producer:
        assert producer.send("t", "after", partition=0).get().offset == ends[0]
    assert [r.offset for r in store.read("t").where("partition = 0").orderBy("offset").collect()] == list(
        range(ends[0] + 1)
    )


def test_log_compaction_keeps_the_latest_value_per_key_and_the_active_file(spark, store):
    store.create_topic("c", partitions=1, config={"cleanup.policy": "compact", "delete.retention.ms": 0})
    writer = Committer(store.log, "w")
    for i in range(6):
        rows = [(b"a", f"a{i}".encode(), NOW), (b"b", None if i == 4 else f"b{i}".encode(), NOW)]
        commit(writer, "c", 0, rows)
    report = maintain(store.uri, topics=["c"], optimize=False, vacuum=False, now_ms=NOW + 600_000)
    kept = [(r["offset"], r["key"], r["value"]) for r in log_rows(store, "c", 0)]
    # Files [0,1] [2,3] ... [10,11]; the last is active and untouched. The five cleanable
    # files become one file that starts with their first record; b0..b3 are superseded by
    # b's tombstone (offset 9), which is past delete.retention.ms=0 with no older b left.
    assert kept == [(0, b"a", b"a0"), (8, b"a", b"a4"), (10, b"a", b"a5"), (11, b"b", b"b5")]
    assert live_files(store, "c") == {0: 2}
    assert report.topics[0].records_removed_by_compaction == 8
    assert store.beginning_offsets("c") == {0: 0} and store.end_offsets("c") == {0: 12}
    actions = commit_actions(store, report.topics[0].versions[0])
    assert actions[0]["commitInfo"]["tags"]["lakelog.operation"] == "compact"


def test_retention_moves_the_log_start_and_consumers_follow_auto_offset_reset(spark, store):
    store.create_topic("r", partitions=1, config={"retention.ms": 60_000})
    writer = Committer(store.log, "w")
    for i in range(5):
        old = NOW - 3_600_000 if i < 3 else NOW
        commit(writer, "r", 0, [(None, f"v{i}.{j}".encode(), old) for j in range(2)])
    tp = TopicPartition("r", 0)
    earliest = store.consumer(auto_offset_reset="earliest")
    strict = store.consumer(auto_offset_reset="none")
    for consumer in (earliest, strict):
        consumer.assign([tp])
        consumer.seek(tp, 2)

    report = maintain(store, topics=["r"], optimize=False, vacuum=False, now_ms=NOW)

    (topic,) = report.topics
    assert topic.records_removed_by_retention == 6
    assert topic.log_start_after == {0: 6} and store.beginning_offsets("r") == {0: 6}
    assert store.end_offsets("r") == {0: 10}
    assert [r.offset for r in earliest.poll(1000)] == [6, 7, 8, 9]
    with pytest.raises(OffsetOutOfRangeError, match="position 2 of r-0 is outside its log"):
        strict.poll(1000)
    earliest.close()
    strict.close()


def test_retention_bytes_keeps_at_least_the_limit_per_partition(spark, store):
    store.create_topic("s", partitions=1)
    writer = Committer(store.log, "w")
    for _ in range(6):
        commit(writer, "s", 0, [(None, b"x" * 500, NOW)])
    sizes = [f.size for f in partition_logs(store.log.latest(), {"s"})[TopicPartition("s", 0)].files]
    store.alter_topic_config("s", {"retention.bytes": sum(sizes[3:])})
    maintain(store.uri, topics=["s"], optimize=False, vacuum=False)
    assert store.beginning_offsets("s") == {0: 3}


def test_dry_run_changes_nothing_and_tells_what_the_run_does(spark, store):
    store.create_topic("c", partitions=1, config={"cleanup.policy": "compact,delete", "retention.ms": 60_000})
    writer = Committer(store.log, "w")
    for i in range(8):
        commit(writer, "c", 0, [(b"k", f"{i}".encode(), NOW - 3_600_000 if i < 2 else NOW)] * 3)
    reader = TableLog(store.uri)
    version = reader.latest_version()
    files = sorted(os.listdir(os.path.join(store.uri, "topic=c", "partition=0")))

    planned = maintain(store.uri, dry_run=True, now_ms=NOW, vacuum_retention_hours=0).topics
    assert reader.latest_version() == version
    assert sorted(os.listdir(os.path.join(store.uri, "topic=c", "partition=0"))) == files

    done = maintain(store.uri, now_ms=NOW, vacuum_retention_hours=0).topics
    by_name = {t.topic: t for t in done}
    for plan in planned:
        real = by_name[plan.topic]
        assert plan.records_removed_by_retention == real.records_removed_by_retention
        assert plan.records_removed_by_compaction == real.records_removed_by_compaction
        assert plan.log_start_after == real.log_start_after
        assert plan.files_after == real.files_after
    c = by_name["c"]
    assert c.records_removed_by_retention == 6 and c.log_start_after == {0: 6}
    assert c.records_removed_by_compaction == 13  # 5 cleanable files -> one: its first record and the latest
    assert c.files_after == 1
    # VACUUM with 0 h deleted every file the log no longer references.
    assert len(os.listdir(os.path.join(store.uri, "topic=c", "partition=0"))) == 1


def test_consumer_offsets_topic_is_compacted_and_committed_offsets_survive(spark, store):
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(3):
            producer.send("t", f"v{i}", partition=0)
    tp = TopicPartition("t", 0)
    consumer = store.consumer("g", enable_auto_commit=False)
    consumer.assign([tp])
    for offset in range(1, 6):
        consumer.commit({tp: offset})
    consumer.close(autocommit=False)
    rows_before = sum(len(log_rows(store, OFFSETS_TOPIC, p)) for p in range(50))
    report = maintain(store.uri, topics=[OFFSETS_TOPIC], vacuum=False)
    (topic,) = report.topics
    assert topic.cleanup_policy == ("compact",)
    assert topic.records_removed_by_compaction >= 1
    assert sum(len(log_rows(store, OFFSETS_TOPIC, p)) for p in range(50)) < rows_before
    consumer = store.consumer("g")
    assert consumer.committed([tp])[tp].offset == 5
    consumer.close(autocommit=False)


def test_a_concurrent_maintenance_commit_loses_cleanly_and_appends_are_rebased_over(spark, store):
    store.create_topic("t", partitions=1)
    writer = Committer(store.log, "w")
    for i in range(4):
        commit(writer, "t", 0, [(None, f"v{i}".encode(), NOW)])
    reader = TableLog(store.uri)
    state = reader.latest()
    version = state.version
    meta = store.describe_topic("t")
    files = partition_logs(state, {"t"})[TopicPartition("t", 0)].files
    (bin_,) = optimize_bins(files, 1 << 20)

    def step() -> MaintenanceStep:
        result = run_optimize(OptimizeTask(store.uri, TopicPartition("t", 0), (tuple(bin_),)))
        return MaintenanceStep("optimize", "t", meta.topic_id, result.removed, result.added)

    first, second = step(), step()
    commit(writer, "t", 0, [(None, b"appended meanwhile", NOW)])  # an append is rebased over
    policy = RetryPolicy(retries=5, backoff_ms=1)
    landed = commit_step(Committer(reader, "m1"), first, version, policy=policy)
    assert landed == version + 2
    loser_files = [os.path.join(store.uri, f.stats.path) for f in second.added]
    with pytest.raises(MaintenanceConflictError, match=r"lost to a concurrent commit: it removed"):
        commit_step(Committer(TableLog(store.uri), "m2"), second, version, policy=policy)
    assert reader.latest_version() == landed
    assert not any(os.path.exists(p) for p in loser_files)  # the loser's files are gone again
    assert [bytes(r["value"]) for r in log_rows(store, "t", 0)] == [b"v0", b"v1", b"v2", b"v3", b"appended meanwhile"]


def test_maintenance_beside_live_producers_loses_and_duplicates_nothing(spark, store):
    store.create_topic("t", partitions=2, config={"segment.bytes": 1 << 20})
    store.create_topic("c", partitions=1, config={"cleanup.policy": "compact"})
    stop = threading.Event()
    errors: list[BaseException] = []
    sent: dict[str, list[str]] = {"direct": [], "producer": [], "keyed": []}

    def direct() -> None:
        writer = Committer(TableLog(store.uri), "direct")
        i = 0
        while not stop.is_set():
            values = [f"d{i}.{j}" for j in range(3)]
            commit(writer, "t", i % 2, [(None, v.encode(), NOW) for v in values])
            sent["direct"] += values
            commit(writer, "c", 0, [(f"k{i % 4}".encode(), f"c{i}".encode(), NOW)])
            sent["keyed"].append(f"c{i}")
            i += 1
            time.sleep(0.005)  # a steady stream, not a flood of thousands of one-record files

    def producer() -> None:
        with store.producer(linger_ms=0) as producer:
            i = 0
            while not stop.is_set():
                producer.send("t", f"j{i}", partition=i % 2).get()
                sent["producer"].append(f"j{i}")
                i += 1
                time.sleep(0.005)

    def guarded(fn):
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(fn)) for fn in (direct, producer)]
    for t in threads:
        t.start()
    reports = []
    try:
        time.sleep(3)
        for _ in range(3):
            reports.append(maintain(store.uri, topics=["t", "c"], vacuum=False))
            time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert sum(len(r.topics[0].versions) for r in reports) >= 1  # OPTIMIZE did land beside them
    for p in (0, 1):
        rows = log_rows(store, "t", p)
        assert [r["offset"] for r in rows] == list(range(len(rows)))  # dense, nothing lost or doubled
    values = [bytes(r["value"]).decode() for p in (0, 1) for r in log_rows(store, "t", p)]
    assert sorted(values) == sorted(sent["direct"] + sent["producer"])
    for p in (0, 1):  # each producer's records keep their order within a partition
        seen = [bytes(r["value"]).decode() for r in log_rows(store, "t", p)]
        produced = [v for v in seen if v.startswith("j")]
        assert produced == sorted(produced, key=lambda v: int(v[1:]))
    compacted = {bytes(r["key"]): bytes(r["value"]).decode() for r in log_rows(store, "c", 0)}
    latest = {f"k{i % 4}".encode(): v for i, v in enumerate(sent["keyed"])}
    assert compacted == latest


def test_bad_input_is_refused_and_changes_nothing(spark, store, tmp_path):
    store.create_topic("t", partitions=1)
    version = TableLog(store.uri).latest_version()
    with pytest.raises(UnknownTopicOrPartitionError, match="'nope'"):
        maintain(store.uri, topics=["nope"])
    with pytest.raises(InvalidConfigError, match="vacuum retention"):
        maintain(store.uri, vacuum_retention_hours=-1)
    with pytest.raises(InvalidConfigError, match="whole number of hours"):
        maintain(store.uri, vacuum_retention_hours=0.05)  # delta-rs would make it 0: delete everything now
    with pytest.raises(StoreError, match="no Delta table"):
        maintain(str(tmp_path / "empty"))
    assert TableLog(store.uri).latest_version() == version


def test_cli_maintain_prints_a_summary_per_topic(spark, store, capsys):
    store.create_topic("t", partitions=1)
    writer = Committer(store.log, "w")
    for i in range(3):
        commit(writer, "t", 0, [(None, f"v{i}".encode(), NOW)])
    assert cli_main(["--store", store.uri, "maintain", "--topic", "t", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert "dry run: nothing was changed" in out.out
    assert "t [delete]: files 3 -> 1" in out.out
    assert "OPTIMIZE merges 3 file(s)" in out.err  # progress goes to stderr
    assert cli_main(["--store", store.uri, "maintain", "--topic", "t", "--no-vacuum"]) == 0
    assert "t [delete]: files 3 -> 1" in capsys.readouterr().out
    assert live_files(store, "t") == {0: 1}
    assert cli_main(["--store", store.uri, "maintain", "--topic", "missing"]) == 6
