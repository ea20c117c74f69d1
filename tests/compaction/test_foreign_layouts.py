"""Layouts a foreign Delta writer may leave (a plain OPTIMIZE binning by size, split files,
rows out of order): readers never skip, repeat or renumber a record, and maintenance
rewrites such a partition in offset order before applying its own rules. No JVM."""

from __future__ import annotations

import itertools
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog.compaction import maintain
from lakelog.compaction.files import LiveFile, partition_logs
from lakelog.compaction.plan import overlapping_runs
from lakelog.compaction.step import MaintenanceStep, commit_step
from lakelog.engine.commit import Committer, RetryPolicy
from lakelog.engine.commit.data_files import DataFile, DataFileWriter
from lakelog.engine.commit.partition_reader import PartitionReader, with_partition_columns
from lakelog.engine.consume.consumer import Consumer
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from tests.compaction.produce import commit

TP = TopicPartition("t", 0)
POLICY = RetryPolicy(retries=10, backoff_ms=5)
NOW = int(time.time() * 1000)


def fill(store: Store, sizes: list[int], timestamps: list[int] | None = None) -> list[bytes]:
    """One append per size (one file each); returns every value by offset."""
    writer = Committer(store.log, "producer")
    values: list[bytes] = []
    for i, n in enumerate(sizes):
        ts = timestamps[i] if timestamps else NOW + i
        batch = [(f"k{len(values) + j}".encode(), f"v{len(values) + j}".encode(), ts) for j in range(n)]
        commit(writer, TP.topic, TP.partition, batch)
        values += [v for _, v, _ in batch]
    return values


def live(store: Store) -> list[LiveFile]:
    return list(partition_logs(store.log.latest(), {TP.topic})[TP].files)


def foreign_rewrite(store: Store, chosen: list[LiveFile], cuts: list[int], shuffle: random.Random) -> None:
    """What a plain Delta OPTIMIZE (or any rewriting Delta writer) may do: read ``chosen`` files
    whatever their offsets, mix their rows, write them back as ``len(cuts) + 1`` files in one
    commit with ``dataChange=false``."""
    reader, writer = PartitionReader(store.uri), DataFileWriter(store.uri)
    rows = pa.concat_tables([reader.read_file(f.path) for f in chosen])
    order = list(range(rows.num_rows))
    shuffle.shuffle(order)
    rows = rows.take(pa.array(order))
    added = []
    edges = [0, *sorted(c % max(rows.num_rows, 1) for c in cuts), rows.num_rows]
    for lo, hi in itertools.pairwise(edges):
        if hi > lo:
            added += writer.write(with_partition_columns(TP, rows.slice(lo, hi - lo)), data_change=False)
    state = store.log.latest()
    step = MaintenanceStep("optimize", TP.topic, state.topics[TP.topic].topic_id, chosen, added)
    commit_step(Committer(store.log, "foreign-optimize"), step, state.version, policy=POLICY)


def read_all(store: Store, start: int, max_records: int | None) -> list[int]:
    """A consumer's loop: fetch from the position, move past the last offset returned."""
    reader = PartitionReader(store.uri)
    files = store.log.latest().files_of(TP)
    end = files.reach[-1] + 1 if files.reach else 0
    seen: list[int] = []
    position = start
    while position < end:
        got = reader.read(files, TP, position, max_records=max_records).column("offset").to_pylist()
        assert got, f"a fetch at {position} returned nothing before the end {end}"
        assert got == sorted(got) and got[0] >= position
        seen += got
        position = got[-1] + 1
    return seen


# Appends of these sizes, then foreign rewrites (files picked by index, cut points), then a shuffle seed.
LAYOUTS = {
    "sizes": st.lists(st.integers(1, 12), min_size=2, max_size=10),
    "rewrites": st.lists(
        st.tuples(
            st.lists(st.integers(0, 30), min_size=1, max_size=5, unique=True), st.lists(st.integers(0, 99), max_size=3)
        ),
        max_size=4,
    ),
    "seed": st.integers(0, 2**16),
}


@settings(max_examples=40, suppress_health_check=list(HealthCheck))
@given(**LAYOUTS)
def test_any_foreign_rewrite_leaves_every_record_readable_once_in_order(sizes, rewrites, seed):
    check_layouts(sizes, rewrites, seed)


@settings(max_examples=25, suppress_health_check=list(HealthCheck))
@given(**LAYOUTS)
def test_small_fetches_read_a_row_group_at_a_time_and_skip_nothing(sizes, rewrites, seed):
    """Row groups of 3 rows: a fetch reads row groups one by one, also when a rewrite left
    them unsorted and overlapping inside a file."""
    from lakelog.engine.commit import data_files

    real = data_files.ROW_GROUP_ROWS
    data_files.ROW_GROUP_ROWS = 3
    try:
        check_layouts(sizes, rewrites, seed)
    finally:
        data_files.ROW_GROUP_ROWS = real


def check_layouts(sizes, rewrites, seed):
    shuffle = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "store")
        store.create_topic("t", partitions=1)
        values = fill(store, sizes)
        for picks, cuts in rewrites:
            files = live(store)
            chosen = list({files[i % len(files)].path: files[i % len(files)] for i in picks}.values())
            foreign_rewrite(store, chosen, cuts, shuffle)
        everything = list(range(len(values)))
        for max_records in (1, 7, None):
            for start in {0, len(values) // 2, len(values) - 1}:
                assert read_all(store, start, max_records) == everything[start:]
        # Maintenance sorts whatever overlaps, then its own rules see disjoint ranges.
        maintain(store, topics=["t"], vacuum=False)
        assert overlapping_runs(live(store)) == []
        rows = PartitionReader(store.uri).read(store.log.latest().files_of(TP), TP, 0)
        assert rows.column("value").to_pylist() == values
        assert read_all(store, 0, 1) == everything


def test_a_small_fetch_consumer_after_a_plain_optimize_skips_nothing(plain_store):
    plain_store.create_topic("t", partitions=1)
    values = fill(plain_store, [10, 10, 10, 10])
    files = live(plain_store)
    # Bin by size, not by offset: [0..9] + [20..29] in one file, [10..19] and [30..39] alone.
    foreign_rewrite(plain_store, [files[0], files[2]], [], random.Random(3))
    assert overlapping_runs(live(plain_store))
    consumer = Consumer(
        plain_store.context,
        {"group.id": "g", "fetch.min.records": 1, "max.poll.records": 3, "auto.offset.reset": "earliest"},
    )
    consumer.assign([TP])
    got: list[bytes] = []
    for _ in range(100):
        got += [r.value for r in consumer.poll(timeout_ms=0)]
        if len(got) >= len(values):
            break
    consumer.close()
    assert got == values


def test_maintenance_sorts_an_overlapping_partition_then_applies_retention_in_the_same_run(plain_store):
    now = 10_000_000
    plain_store.create_topic("t", partitions=1, config={"retention.ms": "1000"})
    # Six files: four long expired, the last two fresh.
    values = fill(plain_store, [5] * 6, timestamps=[1_000, 2_000, 3_000, 4_000, now, now])
    files = live(plain_store)
    foreign_rewrite(plain_store, [files[0], files[2]], [], random.Random(1))  # offsets 0-4 and 10-14 in one file
    version_before = plain_store.log.latest().version

    report = maintain(plain_store, topics=["t"], vacuum=False, now_ms=now)

    (topic,) = report.topics
    assert overlapping_runs(live(plain_store)) == []
    history = [plain_store.log.read_commit(v).commit_info.operation for v in topic.versions]
    assert history[:2] == ["OPTIMIZE", "DELETE"]  # sorted first, then retention, in one run
    assert all(v > version_before for v in topic.versions)
    # Retention drops whole files from the oldest end, as Kafka drops segments: the
    # sorted file (0-14) and the next old one (15-19) go, the fresh ones stay.
    assert plain_store.beginning_offsets("t") == {0: 20}
    rows = PartitionReader(plain_store.uri).read(plain_store.log.latest().files_of(TP), TP, 0)
    assert rows.column("offset").to_pylist() == list(range(20, 30))
    assert rows.column("value").to_pylist() == values[20:]


def test_a_dry_run_reports_the_sort_and_changes_nothing(plain_store):
    plain_store.create_topic("t", partitions=1)
    fill(plain_store, [3, 3, 3])
    files = live(plain_store)
    foreign_rewrite(plain_store, [files[0], files[2]], [], random.Random(2))
    version = plain_store.log.latest().version
    report = maintain(plain_store, topics=["t"], vacuum=False, dry_run=True)
    assert plain_store.log.latest().version == version
    assert report.topics[0].files_optimized >= 1


@pytest.mark.parametrize("max_records", [1, 7])
def test_a_fetch_never_stalls_when_a_merged_file_reaches_past_the_next_one(plain_store, max_records):
    plain_store.create_topic("t", partitions=1)
    fill(plain_store, [10, 10, 10])
    files = live(plain_store)
    # One file holds 0-9 and 20-29; a fetch from 10 reads it first and finds only 20-29 there,
    # past the next file's first offset: it must read on, not return nothing.
    foreign_rewrite(plain_store, [files[0], files[2]], [], random.Random(5))
    assert read_all(plain_store, 10, max_records) == list(range(10, 30))


def test_delta_rs_optimize_and_z_order_beside_a_small_fetch_consumer(plain_store):
    from deltalake import DeltaTable

    plain_store.create_topic("t", partitions=1)
    values = fill(plain_store, [70, 30, 90, 10, 50, 80, 20, 60])
    consumer = Consumer(
        plain_store.context, {"fetch.min.records": 1, "max.poll.records": 2, "auto.offset.reset": "earliest"}
    )
    consumer.assign([TP])
    got = [r.value for _ in range(40) for r in consumer.poll(timeout_ms=0)]
    table = DeltaTable(plain_store.uri)
    table.optimize.compact(target_size=3_000)  # bins neighbours: disjoint ranges
    got += [r.value for _ in range(30) for r in consumer.poll(timeout_ms=0)]
    # Z-ordering by key orders rows by a column other than offset (delta-rs writes one file here).
    DeltaTable(plain_store.uri).optimize.z_order(["key"])
    (zordered,) = live(plain_store)
    raw = PartitionReader(plain_store.uri).read_file(zordered.path, ["offset"]).column("offset").to_pylist()
    assert raw != sorted(raw)
    for _ in range(1000):
        got += [r.value for r in consumer.poll(timeout_ms=0)]
    consumer.close()
    assert got == values
    maintain(plain_store, topics=["t"], vacuum=False)
    assert overlapping_runs(live(plain_store)) == []
    assert read_all(plain_store, 0, 1) == list(range(len(values)))


def test_a_file_without_statistics_still_gives_the_right_bounds_and_records(plain_store):
    # Some Delta writers collect no statistics (delta.dataSkippingNumIndexedCols=0): the bounds
    # then come from the offsets themselves, and maintenance leaves the partition alone.
    plain_store.create_topic("t", partitions=1)
    values = fill(plain_store, [4, 4, 4])
    files = live(plain_store)
    rows = PartitionReader(plain_store.uri).read_file(files[0].path)
    (written,) = DataFileWriter(plain_store.uri).write(with_partition_columns(TP, rows), data_change=False)
    bare = replace(written.add, stats=None)
    stripped = DataFile(bare, bare.file_stats(), written.full_path)
    state = plain_store.log.latest()
    step = MaintenanceStep("optimize", TP.topic, state.topics[TP.topic].topic_id, [files[0]], [stripped])
    commit_step(Committer(plain_store.log, "foreign-optimize"), step, state.version, policy=POLICY)
    assert plain_store.log.latest().bounds(TP) is None  # statistics cannot say

    assert (plain_store.beginning_offsets("t"), plain_store.end_offsets("t")) == ({0: 0}, {0: 12})
    consumer = Consumer(
        plain_store.context, {"fetch.min.records": 1, "max.poll.records": 5, "auto.offset.reset": "earliest"}
    )
    consumer.assign([TP])
    got = [r.value for _ in range(20) for r in consumer.poll(timeout_ms=0)]
    consumer.close()
    assert got == values
    report = maintain(plain_store, topics=["t"], vacuum=False)
    assert any("without offset statistics" in s for s in report.topics[0].skipped)
