"""A checkpoint made from the one before it and the commits since (engine.commit.checkpoint_extension)
is the checkpoint delta-rs writes of the same log, delta-rs reads it (Delta Spark too:
test_checkpoint_state), and anything but adds and txns since leaves the checkpoint to delta-rs."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakelog.engine.commit import RetryPolicy, checkpoint_extension, checkpoints, wait_for_checkpoints
from lakelog.engine.commit.actions import Commit, Metadata, RemoveFile
from lakelog.engine.commit.log_files import HINT, LogFiles, checkpoint_name, commit_name
from lakelog.engine.errors import CorruptLogError
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store


def _grow(store: Store, versions: int, partitions: int = 2) -> None:
    committer = store.context.committer("test-checkpoint-extension")
    i = 0
    while store.log.latest_version() < versions:
        records = RecordBatch()
        records.add(TopicPartition("t", i % partitions), None, b"r%d" % i, None, int(time.time() * 1000), 1, 0)
        committer.append(ProducerBatch(records, 1), RetryPolicy())
        i += 1


def _writer(path: Path) -> str:
    return pq.ParquetFile(path).metadata.created_by


def _actions(path: Path) -> tuple[int, dict, dict, list, list]:
    rows = pq.read_table(path).to_pylist()
    adds = {r["add"]["path"]: r["add"] for r in rows if r["add"]}
    txns = {r["txn"]["appId"]: r["txn"] for r in rows if r["txn"]}
    return (
        len(rows),
        adds,
        txns,
        [r["metaData"] for r in rows if r["metaData"]],
        [r["protocol"] for r in rows if r["protocol"]],
    )


def _delta_rs_checkpoint(log_dir: Path, version: int, base: int, copy: Path) -> tuple[Path, Path]:
    """delta-rs' own checkpoint of ``version``, from the same log in ``copy`` starting at the
    checkpoint of ``base``: the copy and that checkpoint."""
    shutil.copytree(log_dir, copy / "_delta_log")
    (copy / "_delta_log" / checkpoint_name(version)).unlink()
    (copy / "_delta_log" / HINT).write_text(json.dumps({"version": base, "size": 1}))
    DeltaTable(str(copy), version=version).create_checkpoint()
    theirs = copy / "_delta_log" / checkpoint_name(version)
    assert _writer(theirs).startswith("parquet-rs")
    return copy, theirs


@pytest.fixture
def grown(tmp_path):
    """A store of two partitions checkpointed at 50 (by delta-rs: nothing before it) and at 100
    (made from the one at 50), five commits past it."""
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=2)
    _grow(store, 105)
    assert wait_for_checkpoints(60)
    return store


def test_a_checkpoint_made_from_the_one_before_is_the_one_delta_rs_writes(grown, tmp_path):
    log_dir = Path(grown.uri) / "_delta_log"
    assert LogFiles(grown.uri).last_checkpoint() == 100
    assert _writer(log_dir / checkpoint_name(50)).startswith("parquet-rs")
    assert _writer(log_dir / checkpoint_name(100)).startswith("parquet-cpp-arrow")
    copy, theirs = _delta_rs_checkpoint(log_dir, 100, 50, tmp_path / "copy")
    ours = _actions(log_dir / checkpoint_name(100))
    assert ours == _actions(theirs)
    assert len(ours[1]) == 100 - 1  # every append since the topic was created, typed statistics included
    hint = json.loads((log_dir / HINT).read_text())
    assert hint["version"] == 100 and hint["size"] == ours[0] and hint["numOfAddFiles"] == len(ours[1])
    assert hint["sizeInBytes"] == (log_dir / checkpoint_name(100)).stat().st_size
    # delta-rs starts from it and sees the files it sees from the copy's.
    assert sorted(DeltaTable(grown.uri, version=105).file_uris()) == sorted(
        u.replace(str(copy), grown.uri) for u in DeltaTable(str(copy), version=105).file_uris()
    )
    assert not [p for p in log_dir.iterdir() if p.name.endswith(".tmp")]


def test_only_adds_and_txns_since_the_previous_checkpoint_extend_it(grown):
    files = LogFiles(grown.uri)
    previous = files.read_checkpoint(100, None)
    commits = [files.read_commit(v) for v in range(101, 106)]
    extended = checkpoint_extension.extend(previous, commits)
    assert extended is not None and extended.num_rows == previous.num_rows + 5
    add = commits[0].adds[0]
    remove = RemoveFile(add.path, 1, True)
    metadata = next(a for a in files.read_commit(0).actions if isinstance(a, Metadata))
    deletion_vector = dataclasses.replace(add, deletion_vector={"storageType": "u", "pathOrInlineDv": "x"})
    for other in (remove, metadata, deletion_vector):
        assert checkpoint_extension.extend(previous, [*commits, Commit((other,))]) is None, other
    # A previous checkpoint with a tombstone, or an add field this does not fill: left to delta-rs.
    with_remove = previous.set_column(
        previous.schema.get_field_index("remove"),
        "remove",
        pa.array(
            [{"path": "x", "dataChange": True}] + [None] * (previous.num_rows - 1), previous.schema.field("remove").type
        ),
    )
    assert checkpoint_extension.extend(with_remove, commits) is None
    add_type = previous.schema.field("add").type
    unknown = pa.struct([*add_type, pa.field("somethingNew", pa.string())])
    assert checkpoint_extension.extend(previous.cast(previous.schema.set(0, pa.field("add", unknown))), commits) is None


def test_a_damaged_commit_since_the_previous_checkpoint_gets_no_checkpoint(grown):
    log_dir = Path(grown.uri) / "_delta_log"
    (log_dir / commit_name(103)).write_bytes(b"")
    with pytest.raises(CorruptLogError, match=commit_name(103)):
        checkpoints.write_checkpoint(grown.uri, 105)
    assert not (log_dir / checkpoint_name(105)).exists()
    assert LogFiles(grown.uri).last_checkpoint() == 100


def test_a_made_checkpoint_that_reads_back_wrong_is_removed_and_left_to_delta_rs(grown, monkeypatch, caplog):
    real = checkpoint_extension.extend

    def dropping_a_file(previous, commits):
        table = real(previous, commits)
        return table.slice(1)  # the first row: an add

    monkeypatch.setattr(checkpoints, "extend", dropping_a_file)
    with caplog.at_level(logging.WARNING, logger=checkpoints.__name__):
        checkpoints.write_checkpoint(grown.uri, 105)
    assert "made from the previous one disagreed with the log (1 file(s)" in caplog.text
    log_dir = Path(grown.uri) / "_delta_log"
    assert _writer(log_dir / checkpoint_name(105)).startswith("parquet-rs")
    assert LogFiles(grown.uri).last_checkpoint() == 105


def test_making_a_checkpoint_so_imports_no_pandas(tmp_path):
    """Client processes write checkpoints too (engine.arrow_columns: pyarrow's Python
    converter imports pandas)."""
    script = f"""
import sys, time
from lakelog.engine.commit import RetryPolicy, checkpoints
from lakelog.engine.commit.log_files import LogFiles
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

store = Store.open({str(tmp_path / "store")!r})
store.create_topic("t", partitions=2)
committer = store.context.committer("test")
for i in range(60):
    records = RecordBatch()
    records.add(TopicPartition("t", i % 2), None, b"r", None, int(time.time() * 1000), 1, 0)
    committer.append(ProducerBatch(records, 1), RetryPolicy())
checkpoints.wait_for_checkpoints(60)
assert LogFiles(store.uri).last_checkpoint() == 50
assert "pandas" not in sys.modules  # (delta-rs wrote that one)
checkpoints.write_checkpoint(store.uri, store.log.latest_version())
assert LogFiles(store.uri).last_checkpoint() == store.log.latest_version()
assert "pandas" not in sys.modules, "making a checkpoint imported pandas"
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_a_value_the_extension_cannot_read_leaves_the_checkpoint_to_delta_rs(grown, monkeypatch, caplog):
    def unreadable(previous, commits):
        raise ValueError("Invalid isoformat string: 'yesterday'")

    monkeypatch.setattr(checkpoints, "extend", unreadable)
    with caplog.at_level(logging.WARNING, logger=checkpoints.__name__):
        checkpoints.write_checkpoint(grown.uri, 105)
    assert "left to delta-rs: Invalid isoformat" in caplog.text
    assert _writer(Path(grown.uri) / "_delta_log" / checkpoint_name(105)).startswith("parquet-rs")
    assert LogFiles(grown.uri).last_checkpoint() == 105


def test_the_next_checkpoint_is_made_from_the_one_made_before_without_reading_it(grown, tmp_path, monkeypatch):
    """The checkpoint thread keeps the checkpoint it made last; the next one is made from it
    unless its file changed since (another process's, or a table made anew at the same path)."""
    log_dir = Path(grown.uri) / "_delta_log"
    read: list[tuple[int, object]] = []
    real = LogFiles.read_checkpoint

    def recorded(self, version, columns):
        read.append((version, columns))
        return real(self, version, columns)

    monkeypatch.setattr(LogFiles, "read_checkpoint", recorded)
    checkpoints.write_checkpoint(grown.uri, 105)
    assert (100, None) not in read  # made from the one kept, not the file
    assert read == [(105, checkpoints.STATE_COLUMNS)]  # the check of the new one still reads it back
    _grow(grown, 150)
    assert wait_for_checkpoints(60) and LogFiles(grown.uri).last_checkpoint() == 150
    assert (105, None) not in read
    _, theirs = _delta_rs_checkpoint(log_dir, 150, 105, tmp_path / "copy")
    assert _actions(log_dir / checkpoint_name(150)) == _actions(theirs)
    # A checkpoint file replaced since it was made (another writer's copy of it): read again.
    ours = log_dir / checkpoint_name(150)
    shutil.copy(ours, tmp_path / "replacement")
    shutil.move(tmp_path / "replacement", ours)
    read.clear()
    _grow(grown, 155)
    checkpoints.write_checkpoint(grown.uri, 155)
    assert (150, None) in read
    assert _writer(log_dir / checkpoint_name(155)).startswith("parquet-cpp-arrow")


def test_the_hint_is_never_moved_back_and_only_local_stores_get_made_checkpoints(grown):
    files = LogFiles(grown.uri)
    assert files.last_checkpoint() == 100
    assert not files.write_checkpoint_hint(50, 1, 1, 1)
    assert files.last_checkpoint() == 100
    remote = LogFiles("memory://store")
    with pytest.raises(ValueError, match="local store"):
        remote.write_checkpoint(1, pa.table({"a": [1]}))
    with pytest.raises(ValueError, match="local store"):
        remote.write_checkpoint_hint(1, 1, 1, 1)


def test_only_the_newest_made_checkpoints_of_a_few_tables_are_kept(grown, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "_made", {})
    monkeypatch.setattr(checkpoints, "_MAX_KEPT", 1)
    checkpoints.write_checkpoint(grown.uri, 105)
    assert list(checkpoints._made) == [LogFiles(grown.uri).log_dir]
    other = Store.open(tmp_path / "other")
    other.create_topic("t", partitions=1)
    _grow(other, 55, partitions=1)
    assert wait_for_checkpoints(60)
    checkpoints.write_checkpoint(other.uri, 55)
    assert list(checkpoints._made) == [LogFiles(other.uri).log_dir]
