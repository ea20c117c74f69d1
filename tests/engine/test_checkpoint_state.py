"""A store opens from its newest checkpoint without listing its log or building every file.

Real stores with real Delta commits and delta-rs checkpoints; the cold open runs in a fresh
process. The state read from the checkpoint's typed columns is the state delta-rs' snapshot
gives (files, offsets, markers, metadata, checksum); the lazily built files are what eager
building gives for any layout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from lakelog.engine.commit import RetryPolicy, checkpoint_state, follower, wait_for_checkpoints
from lakelog.engine.commit.checkpoint_state import interval_ms, state_from_checkpoint, state_from_commits
from lakelog.engine.commit.file_runs import FileColumns, IntColumn, Run
from lakelog.engine.commit.follower import TableLog, load_state
from lakelog.engine.commit.log_files import LogFiles, checksum_name, commit_name, listing_problems, txn_entries
from lakelog.engine.commit.state_snapshot import SNAPSHOT_NAME, flat_columns, write_snapshot
from lakelog.engine.errors import CorruptLogError
from lakelog.engine.offsets import FileStats
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

ROOT = Path(__file__).resolve().parents[2]
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _grow(store: Store, versions: int, partitions: int = 1) -> None:
    committer = store.context.committer("test-checkpoint-state")
    i = 0
    while store.log.latest_version() < versions:
        records = RecordBatch()
        records.add(TopicPartition("t", i % partitions), None, b"r", None, int(time.time() * 1000), 1, 0)
        committer.append(ProducerBatch(records, 1), RetryPolicy())
        i += 1


def _assert_same(a, b) -> None:
    assert a.version == b.version
    assert set(a.partitions) == set(b.partitions)
    for tp in b.partitions:
        fa, fb = a.files_of(tp), b.files_of(tp)
        assert list(fa.ordered) == list(fb.ordered), tp
        assert list(fa.reach) == list(fb.reach) and fa.other == fb.other, tp
        assert (fa.end, fa.start) == (fb.end, fb.start), tp
        assert a.committed_end(tp) == b.committed_end(tp) and a.bounds(tp) == b.bounds(tp), tp
    assert a.ends == b.ends and a.unknown_ends == b.unknown_ends
    assert a.metadata == b.metadata and a.protocol == b.protocol

    def checksum(state) -> dict | None:  # a derived .crc gets a txnId of its own
        return None if state.checksum is None else {k: v for k, v in state.checksum.items() if k != "txnId"}

    assert checksum(a) == checksum(b)


@pytest.mark.parametrize("snapshot", [True, False], ids=["state-snapshot", "checkpoint"])
def test_the_checkpoints_state_is_delta_rs_snapshots_state(tmp_path, snapshot):
    """Read from the checkpoint's state snapshot or from the checkpoint itself."""
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=2)
    _grow(store, 104, partitions=2)  # a checkpoint at 100 with typed statistics
    assert wait_for_checkpoints(60)
    files = LogFiles(store.uri)
    if not snapshot:
        (tmp_path / "store" / "_delta_log" / SNAPSHOT_NAME).unlink()
    state = state_from_checkpoint(files)
    assert state is not None and state.version == 100
    _assert_same(state, load_state(store.uri, files, 100))
    # Followed to the newest commit, it is the newest snapshot.
    _assert_same(TableLog(store.uri).latest(), load_state(store.uri, files))


def _checkpointed_store(path: Path) -> tuple[Store, LogFiles, list[list[str]]]:
    """A store with a checkpoint at 100, its LogFiles, and the column lists its checkpoint
    reads ask for (recorded from now on). Its state snapshot is removed: the tests using it
    are about reading the checkpoint (tests/engine/test_state_snapshot.py: the snapshot)."""
    store = Store.open(path)
    store.create_topic("t", partitions=2)
    _grow(store, 104, partitions=2)
    assert wait_for_checkpoints(60)
    (path / "_delta_log" / SNAPSHOT_NAME).unlink()
    files = LogFiles(store.uri)
    asked: list[list[str]] = []
    real = files.read_checkpoint
    files.read_checkpoint = lambda version, columns: asked.append(list(columns)) or real(version, columns)
    return store, files, asked


def test_the_checkpoints_metadata_and_protocol_are_read_from_its_checksum(tmp_path):
    """The .crc of the checkpoint's version holds its metaData and protocol actions: the
    checkpoint's own two columns of them are not decoded, and the state is delta-rs'."""
    store, files, asked = _checkpointed_store(tmp_path / "store")
    state = state_from_checkpoint(files)
    assert state is not None and state.checksum is not None
    assert asked and not any({"metaData", "protocol"} & set(columns) for columns in asked)
    _assert_same(state, load_state(store.uri, LogFiles(store.uri), 100))


@pytest.mark.parametrize("damage", ["counts", "no-metadata", "unparseable-metadata"])
def test_a_checksum_not_trusted_leaves_metadata_and_protocol_to_the_checkpoint(tmp_path, damage, caplog):
    """A .crc whose file count disagrees with the checkpoint's files (its metadata then not
    trusted either), one without metadata, or one whose metadata does not parse: the
    checkpoint's own columns give metadata and protocol, as delta-rs' snapshot has them."""
    store, files, asked = _checkpointed_store(tmp_path / "store")
    crc = tmp_path / "store" / "_delta_log" / checksum_name(100)
    body = json.loads(crc.read_text())
    if damage == "counts":
        body["numFiles"] += 1
        body["metadata"]["configuration"]["lakelog.topic.ghost"] = body["metadata"]["configuration"]["lakelog.topic.t"]
    elif damage == "no-metadata":
        del body["metadata"]
    else:
        body["metadata"]["configuration"] = [["lakelog.topic.ghost", "{}"]]
    crc.write_text(json.dumps(body))
    with caplog.at_level("WARNING"):
        state = state_from_checkpoint(files)
    assert state is not None
    assert ("disagrees with the log" in caplog.text) == (damage != "no-metadata")
    assert any({"metaData", "protocol"} <= set(columns) for columns in asked)
    assert "ghost" not in state.topics
    # A checksum with metadata that is not an object disagrees with the log; one without any still agrees.
    assert (state.checksum is None) == (damage != "no-metadata")
    snapshot = load_state(store.uri, LogFiles(store.uri), 100)
    assert state.metadata == snapshot.metadata and state.protocol == snapshot.protocol
    assert [f.path for f in state.files_of(T0).ordered] == [f.path for f in snapshot.files_of(T0).ordered]


def test_a_checkpoint_without_typed_statistics_is_read_by_delta_rs(tmp_path):
    """A table whose checkpoints carry only JSON statistics (written without
    delta.checkpoint.writeStatsAsStruct) is loaded by delta-rs as before."""
    root = tmp_path / "plain"
    rows = pa.table(
        {
            "topic": ["t", "t"],
            "partition": pa.array([0, 0], pa.int32()),
            "offset": pa.array([0, 1], pa.int64()),
        }
    )
    write_deltalake(str(root), rows, partition_by=["topic", "partition"])
    write_deltalake(str(root), rows, mode="append")
    DeltaTable(str(root)).create_checkpoint()
    files = LogFiles(str(root))
    assert files.last_checkpoint() == 1
    assert state_from_checkpoint(files) is None
    latest = TableLog(str(root)).latest()
    assert latest.version == 1 and len(latest.files_of(T0)) == 2


def test_a_missing_checkpoint_falls_back_to_delta_rs(tmp_path):
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    _grow(store, 52)
    assert wait_for_checkpoints(60)
    (tmp_path / "store" / "_delta_log" / f"{50:020d}.checkpoint.parquet").unlink()
    assert state_from_checkpoint(LogFiles(store.uri)) is None
    assert TableLog(store.uri).latest().version == 52  # delta-rs past the stale hint (one warning)


def _young_store(path: Path) -> Store:
    """A store without a checkpoint: topics created and deleted, records in two partitions,
    DeleteRecords (a remove and a log start), a second producer's records."""
    store = Store.open(path)
    store.create_topic("t", partitions=2)
    store.create_topic("gone", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(6):
            producer.send("t", f"r{i}".encode(), partition=i % 2).get()
        producer.send("gone", b"x").get()
    store.delete_topic("gone")
    store.delete_records({("t", 0): 2})
    with store.producer(linger_ms=0) as producer:
        producer.send("t", b"late", partition=1).get()
    return store


def test_a_young_tables_state_replayed_from_its_commits_is_delta_rs_snapshots_state(tmp_path):
    """Without a checkpoint, the state is read from the commit files (no delta-rs): files,
    offsets, log starts, end markers, metadata, checksum and app versions as delta-rs' snapshot
    of the same version gives them."""
    store = _young_store(tmp_path / "store")
    files = LogFiles(store.uri)
    assert files.last_checkpoint() is None and not files.listing().checkpoints
    state = state_from_commits(files)
    assert state is not None and state.version == store.log.latest_version()
    snapshot = load_state(store.uri, files)
    _assert_same(state, snapshot)
    assert state.checksum is not None  # the newest .crc agreed and is carried
    apps = {a for v in range(state.version + 1) for a in files.read_commit(v).txns}
    assert apps and {a: state.app_version(a) for a in apps} == {a: snapshot.app_version(a) for a in apps}
    assert state.end_offset(T0) == 3 and state.bounds(T0) == snapshot.bounds(T0)


def test_a_young_store_opens_without_delta_rs(tmp_path, monkeypatch):
    store = _young_store(tmp_path / "store")

    def refuse(*args, **kwargs):
        raise AssertionError("a young table was loaded with delta-rs")

    monkeypatch.setattr(follower, "load_state", refuse)
    _assert_same(TableLog(store.uri).latest(), store.log.latest())


def test_what_a_commit_replay_leaves_to_delta_rs(tmp_path, monkeypatch):
    """A log with a checkpoint, a missing commit, an orphan checksum or more commits than the
    replay limit is not replayed here (delta-rs loads it and names what is wrong)."""
    store = _young_store(tmp_path / "store")
    files = LogFiles(store.uri)
    log_dir = tmp_path / "store" / "_delta_log"
    newest = store.log.latest_version()
    assert state_from_commits(files) is not None
    monkeypatch.setattr(checkpoint_state, "_REPLAY_LIMIT", newest)
    assert state_from_commits(files) is None
    monkeypatch.setattr(checkpoint_state, "_REPLAY_LIMIT", newest + 1)
    assert state_from_commits(files) is not None

    (log_dir / checksum_name(newest + 1)).write_text((log_dir / checksum_name(newest)).read_text())
    assert state_from_commits(files) is None  # an orphan .crc: delta-kernel refuses the log
    (log_dir / checksum_name(newest + 1)).unlink()

    moved = log_dir / commit_name(newest - 1)
    moved.rename(tmp_path / "aside.json")
    assert state_from_commits(files) is None  # a commit missing before the newest
    (tmp_path / "aside.json").rename(moved)

    DeltaTable(store.uri).create_checkpoint()
    assert state_from_commits(files) is None


def test_a_damaged_commit_of_a_young_table_is_named(tmp_path):
    store = _young_store(tmp_path / "store")
    damaged = tmp_path / "store" / "_delta_log" / commit_name(store.log.latest_version() - 1)
    damaged.write_bytes(b"")
    with pytest.raises(CorruptLogError, match=damaged.name):
        state_from_commits(LogFiles(store.uri))


COLD_OPEN = """
import json, sys
from lakelog.engine.commit import follower
from lakelog.engine.commit.file_runs import FileColumns

def refuse(*args, **kwargs):
    raise AssertionError("the cold open loaded a delta-rs snapshot (a listing of the whole log)")

follower.load_state = refuse
built = []
real_file = FileColumns.file
FileColumns.file = lambda self, row, tp: built.append(row) or real_file(self, row, tp)

from lakelog.store import Store
store = Store.open(sys.argv[1], create=False)
end = store.end_offsets("t")[0]
consumer = store.consumer(enable_auto_commit=False)
consumer.assign([("t", 0)])
consumer.seek(("t", 0), end - 1)
records = consumer.poll(timeout_ms=10_000)
consumer.close(autocommit=False)
print(json.dumps({"end": end, "values": [r.value.decode() for r in records], "built": len(built)}))
"""


def test_a_cold_open_reads_the_checkpoint_and_builds_only_the_files_it_reads(tmp_path):
    """In a fresh process: Store.open, end offsets and a poll of the newest record of a log of
    ~250 one-record files start from the checkpoint (no delta-rs snapshot, which lists every
    file of _delta_log) and build a handful of the files, not one per version."""
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    created = store.log.latest_version()
    _grow(store, 253)
    assert wait_for_checkpoints(60)
    assert LogFiles(store.uri).last_checkpoint() == 250
    done = subprocess.run(
        [sys.executable, "-c", COLD_OPEN, str(tmp_path / "store")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["end"] == 253 - created and found["values"] == ["r"]
    assert found["built"] <= 5, found


def _file(tp: TopicPartition | None, path: str, records: int | None, lo: int | None, hi: int | None) -> dict:
    return {"tp": tp, "path": path, "records": records, "lo": lo, "hi": hi}


LAYOUT = [
    _file(T0, "b", 10, 10, 19),
    _file(T0, "a", 10, 0, 9),
    _file(T0, "c", 10, 0, 9),  # the same range as "a": ordered by path
    _file(T0, "merged", 30, 0, 29),  # OPTIMIZE's merge beside its inputs
    _file(T0, "nostats", None, None, None),
    _file(T0, "empty", 0, 5, 5),
    _file(T1, "x", 3, 100, 102),
    _file(T1, "y", 1, 50, 50),  # out of order
    _file(None, "foreign", 1, 0, 0),  # no topic partition: left out
    _file(TopicPartition("u", 0), "other-topic", 2, 0, 1),  # not a topic of the store
]


def _columns(layout: list[dict], looked: list[int]) -> FileColumns:
    names = sorted({f["tp"].topic for f in layout if f["tp"]})

    class Counted:
        def __getitem__(self, row: int) -> int:
            looked.append(row)
            return 1000 + row

    return FileColumns(
        [f["path"] for f in layout],
        names,
        np.array([names.index(f["tp"].topic) if f["tp"] else -1 for f in layout], dtype=np.int64),
        IntColumn.of([f["tp"].partition if f["tp"] else None for f in layout]),
        IntColumn.of([f["records"] for f in layout]),
        IntColumn.of([f["lo"] for f in layout]),
        IntColumn.of([f["hi"] for f in layout]),
        {"size": Counted()},
    )


def _stats(layout: list[dict]) -> list[FileStats]:
    return [
        FileStats(f["path"], f["tp"], f["records"], f["lo"], f["hi"], True, size=1000 + row)
        for row, f in enumerate(layout)
        if f["tp"] is not None
    ]


@pytest.mark.parametrize("order", ["as-listed", "reversed", "shuffled", "by-offset", "newest-first"])
def test_files_from_columns_in_any_row_order_are_the_files_built_eagerly(tmp_path, order):
    """Files built lazily from columns are the files built eagerly, whatever the order of the
    rows (delta-rs writes a partition's newest file first): partitions, the files' order,
    reach, files without statistics and ends."""
    from lakelog.engine.commit.state import TableState

    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=2)
    metadata, protocol = store.log.latest().metadata, store.log.latest().protocol
    runs = [_file(TopicPartition("t", i % 2), f"r{i:03d}", 1, i // 2, i // 2) for i in range(40)]
    layout = LAYOUT + runs
    if order == "reversed":
        layout = layout[::-1]
    elif order == "shuffled":
        layout = [layout[i] for i in np.random.default_rng(3).permutation(len(layout))]
    elif order in ("by-offset", "newest-first"):
        layout = sorted(runs, key=lambda f: (f["tp"].partition, f["lo"]), reverse=order == "newest-first")
    eager = TableState.build(1, protocol, metadata, _stats(layout))
    lazy = TableState.from_columns(1, protocol, metadata, _columns(layout, []))
    assert set(lazy.partitions) == set(eager.partitions)
    for tp in eager.partitions:
        assert list(lazy.files_of(tp).ordered) == list(eager.files_of(tp).ordered), tp
        assert list(lazy.files_of(tp).reach) == list(eager.files_of(tp).reach)
        assert lazy.files_of(tp).other == eager.files_of(tp).other
    assert lazy.ends == eager.ends and lazy.ends[T0] == 1 + max(f["hi"] for f in layout if f["tp"] == T0 and f["hi"])
    if order in ("as-listed", "reversed", "shuffled"):  # equal ranges by path, a merge by its range
        assert [f.path for f in lazy.files_of(T0).ordered if f.path[0] != "r"] == ["a", "c", "merged", "b"]


def test_a_seek_builds_only_the_files_it_may_read_and_an_append_builds_none():
    from lakelog.engine.commit.state import PartitionFiles

    n = 10_000
    layout = [_file(T0, f"f{i:05d}", 1, i, i) for i in range(n)]
    looked: list[int] = []
    files = PartitionFiles.of_rows(_columns(layout, looked), np.arange(n), T0)
    assert [f.min_offset for f in files.covering(n - 2)] == [n - 2, n - 1]
    assert sorted(set(looked)) == [n - 2, n - 1]
    appended = files.changed([FileStats("new", T0, 1, n, n, True)], set())
    assert isinstance(appended.ordered, Run) and len(appended.ordered) == n + 1 and appended.reach[-1] == n
    assert sorted(set(looked)) == [n - 2, n - 1]  # only the file it was appended after (already built)
    assert appended.covering(n)[0].path == "new"


def test_a_run_is_a_sequence_that_appends_without_copying_what_was_there():
    run = Run([tuple(range(5))])
    for i in range(5, 2000):
        run = run.extended([i])
    assert list(run) == list(range(2000)) and run == tuple(range(2000)) and len(run) == 2000
    assert run[-1] == 1999 and run[1234] == 1234 and run[3:6] == [3, 4, 5]
    with pytest.raises(IndexError):
        run[2000]


@pytest.mark.parametrize(
    "text, ms",
    [
        ("interval 7 days", 7 * 86_400_000),
        ("7 days", 7 * 86_400_000),
        ("interval 2 hours 30 minutes", 9_000_000),
        ("interval 1 week", 604_800_000),
        ("interval 1 month", None),
        ("interval 5 microseconds", None),
        ("interval", None),
        ("seven days", None),
    ],
)
def test_interval_ms(text, ms):
    assert interval_ms(text) == ms


@pytest.mark.spark
@pytest.mark.parametrize(
    ("versions", "checkpoint"), [(55, 50), (105, 100)], ids=["by-delta-rs", "made-from-the-one-before"]
)
def test_spark_reads_a_store_from_its_checkpoint_with_typed_statistics(spark, tmp_path, versions, checkpoint):
    """Delta Spark starts from the checkpoint with stats_parsed and partitionValues_parsed --
    delta-rs' (the first), or one made from the one before it (engine.commit.checkpoint_extension)
    -- prunes files by the typed offset statistics and reads every record."""
    store = Store.open(tmp_path / "store", spark=spark)
    store.create_topic("t", partitions=2)
    created = store.log.latest_version()
    _grow(store, versions, partitions=2)
    assert wait_for_checkpoints(60) and LogFiles(store.uri).last_checkpoint() == checkpoint
    jvm = spark.sparkContext._jvm
    none = jvm.scala.Option.empty()
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, store.uri)
    snapshot = delta_log.getSnapshotAt(versions, none, none, False)
    assert snapshot.version() == versions and snapshot.logSegment().checkpointProvider().version() == checkpoint
    frame = spark.read.format("delta").load(store.uri)
    assert frame.count() == versions - created
    assert frame.where("partition = 1 AND offset = 3").count() == 1


# -- the state snapshot beside a checkpoint (engine.commit.state_snapshot) -------------------------


def _snapshotted_store(path: Path, versions: int = 104) -> tuple[Store, LogFiles, list[list[str]]]:
    """A store with idempotent producers' app transactions, a log start and two partitions,
    checkpointed at 50 and 100; its LogFiles; the checkpoint reads asked for from now on."""
    store = Store.open(path)
    store.create_topic("t", partitions=2)
    with store.producer(linger_ms=0) as producer:
        for i in range(6):
            producer.send("t", f"r{i}".encode(), partition=i % 2).get()
    store.delete_records({("t", 0): 2})
    _grow(store, versions, partitions=2)
    assert wait_for_checkpoints(60)
    files = LogFiles(store.uri)
    asked: list[list[str]] = []
    real = files.read_checkpoint
    files.read_checkpoint = lambda version, columns: asked.append(list(columns)) or real(version, columns)
    return store, files, asked


def _app_ids(files: LogFiles, version: int) -> set[str]:
    return {a for v in range(version + 1) if (c := files.read_commit(v)) is not None for a in c.txns}


def test_a_checkpoints_state_snapshot_is_read_instead_of_it(tmp_path):
    """Writing a checkpoint writes its rows as a mapped Arrow file beside it; a state read then
    decodes no checkpoint column, and is what delta-rs' snapshot and the checkpoint itself give
    (files, offsets, log start, markers, metadata, checksum, app versions)."""
    store, files, asked = _snapshotted_store(tmp_path / "store")
    log_dir = tmp_path / "store" / "_delta_log"
    assert [p.name for p in log_dir.glob(".lakelog-state*")] == [SNAPSHOT_NAME]  # one, no temporary left
    state = state_from_checkpoint(files)
    assert state is not None and state.version == 100 and asked == []
    _assert_same(state, load_state(store.uri, files, 100))
    (log_dir / SNAPSHOT_NAME).unlink()
    from_checkpoint = state_from_checkpoint(files)
    assert asked and from_checkpoint is not None
    _assert_same(state, from_checkpoint)
    apps = _app_ids(files, 100)
    assert any(a.startswith("lakelog-producer-") for a in apps)
    assert {a: state.app_version(a) for a in apps} == {a: from_checkpoint.app_version(a) for a in apps}
    assert state.committed_start(T0) == 2


def _other_versions_snapshot(path: Path, log_dir: Path) -> None:
    """The snapshot of the checkpoint at 100 put back after one at 150 replaced it."""
    aside = path / "aside.arrow"
    (log_dir / SNAPSHOT_NAME).rename(aside)
    store = Store.open(path / "store")
    _grow(store, 152, partitions=2)
    assert wait_for_checkpoints(60) and LogFiles(store.uri).last_checkpoint() == 150
    aside.replace(log_dir / SNAPSHOT_NAME)


@pytest.mark.parametrize(
    "case", ["another-checkpoints", "checkpoint-rewritten", "truncated", "garbage", "crc-disagrees"]
)
def test_a_snapshot_not_made_from_the_checkpoint_as_it_is_is_not_used(tmp_path, case, caplog):
    """A snapshot of an older checkpoint, of a checkpoint file rewritten since (another
    modification time), a damaged one, or one whose rows disagree with the version's .crc:
    the checkpoint is read instead, and the state is delta-rs'."""
    store, files, asked = _snapshotted_store(tmp_path / "store")
    log_dir = tmp_path / "store" / "_delta_log"
    snapshot = log_dir / SNAPSHOT_NAME
    if case == "another-checkpoints":
        _other_versions_snapshot(tmp_path, log_dir)
    elif case == "checkpoint-rewritten":
        checkpoint = log_dir / f"{100:020d}.checkpoint.parquet"
        stat = checkpoint.stat()
        os.utime(checkpoint, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    elif case == "truncated":
        snapshot.write_bytes(snapshot.read_bytes()[: snapshot.stat().st_size // 2])
    elif case == "garbage":
        snapshot.write_bytes(b"ARROW1" + bytes(range(256)) * 8)
    else:  # the checkpoint's own rows but one: the version's .crc counts one file more
        checkpoint = files.read_checkpoint(100, checkpoint_state.STATE_COLUMNS)
        adds = checkpoint.column("add").combine_chunks()
        live = flat_columns(adds).filter(pc.is_valid(adds))
        write_snapshot(
            str(log_dir), 100, live.slice(1), txn_entries(checkpoint), str(log_dir / f"{100:020d}.checkpoint.parquet")
        )
        asked.clear()
    with caplog.at_level("WARNING"):
        state = state_from_checkpoint(files)
    assert state is not None and asked  # the checkpoint was read
    assert "disagrees" not in caplog.text  # the .crc agrees with the checkpoint: nothing to report
    _assert_same(state, load_state(store.uri, LogFiles(store.uri), state.version))


def test_delta_readers_and_the_listing_ignore_the_snapshot(tmp_path):
    """delta-rs loads the table with the snapshot in _delta_log, and lakelog's listing of the log
    sees no fault (its name is none of the protocol's)."""
    store, files, _ = _snapshotted_store(tmp_path / "store")
    assert (tmp_path / "store" / "_delta_log" / SNAPSHOT_NAME).exists()
    table = DeltaTable(store.uri)
    assert table.version() == store.log.latest_version()
    assert len(table.file_uris()) == len(store.log.latest().files)
    assert listing_problems(files.listing(), files.last_checkpoint()) == []
