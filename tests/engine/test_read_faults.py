"""Faults under readers become named errors: a truncated commit file (CorruptLogError naming it), a
missing data file (DataLossError naming it, on every poll until repaired; never a silent skip or a
stuck consumer), a data file that is not Parquet (CorruptLogError); local data files are read
as Arrow's own files (no abort at exit from a reading thread holding a Python buffer)."""

from __future__ import annotations

import re

import pytest

from lakelog.cli import main
from lakelog.engine.errors import CorruptLogError, DataLossError
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

TP = TopicPartition("t", 0)


def _store(tmp_path):
    root = tmp_path / "store"
    store = Store.open(root)
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(5):
            producer.send("t", f"v{i}", partition=0).get()
    return store, root


def _file_at(store, offset: int) -> str:
    return next(f.path for f in store.log.latest().files if f.tp == TP and f.min_offset == offset)


def _consumer(store):
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TP])
    return consumer


def test_a_truncated_commit_file_is_named(tmp_path):
    _, root = _store(tmp_path)
    newest = sorted((root / "_delta_log").glob("*.json"))[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    with pytest.raises(CorruptLogError, match=newest.name):
        Store.open(root, create=False)
    assert main(["--store", str(root), "offsets", "t"]) == 1


def test_a_follower_names_a_truncated_commit_it_has_not_read_yet(tmp_path):
    store, root = _store(tmp_path)
    consumer = _consumer(store)
    assert [r.offset for r in consumer.poll(timeout_ms=100)] == [0, 1, 2, 3, 4]
    with Store.open(root, create=False).producer(linger_ms=0) as other:  # another process's commit
        other.send("t", "v5", partition=0).get()
    newest = sorted((root / "_delta_log").glob("*.json"))[-1]
    newest.write_bytes(newest.read_bytes()[:10])
    for _ in range(2):
        with pytest.raises(CorruptLogError, match=newest.name):
            consumer.poll(timeout_ms=100)
    consumer.close()


def test_a_missing_data_file_fails_every_poll_by_name_until_repaired(tmp_path):
    store, root = _store(tmp_path)
    path = _file_at(store, 2)
    (root / path).unlink()
    consumer = _consumer(store)
    named = re.escape(f"data file {path} (t-0 offsets 2..2) is missing")
    for _ in range(2):  # not stuck, not silent: each poll says why
        with pytest.raises(DataLossError, match=named):
            consumer.poll(timeout_ms=100)
    assert main(["--store", str(root), "check", "--repair", "--drop-missing-files"]) == 0
    got = []
    for _ in range(5):
        got += [r.offset for r in consumer.poll(timeout_ms=100)]
    assert got == [0, 1, 3, 4]
    consumer.close()


def test_a_data_file_that_is_not_parquet_is_named(tmp_path):
    store, root = _store(tmp_path)
    path = _file_at(store, 3)
    (root / path).write_bytes(b"garbage")
    consumer = _consumer(store)
    named = re.escape(f"data file {path} (t-0 offsets 3..3) cannot be read as the log's Parquet")
    with pytest.raises(CorruptLogError, match=named):
        consumer.poll(timeout_ms=100)
    consumer.close()


@pytest.mark.spark
def test_a_spark_read_names_a_missing_file_before_any_job(tmp_path, spark):
    root = tmp_path / "store"
    store = Store.open(root, spark=spark)
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(3):
            producer.send("t", f"v{i}", partition=0).get()
    path = _file_at(store, 1)
    (root / path).unlink()
    with pytest.raises(DataLossError, match="is missing from the store"):
        store.read("t")
    assert store.read("t", starting_offsets={"t": {"0": 2}}).count() == 1  # ranges without it still read


def test_loading_a_state_whose_listing_raced_a_writer_lists_again(tmp_path, monkeypatch):
    import deltalake
    from deltalake.exceptions import DeltaError

    from lakelog.engine.commit.follower import load_state
    from lakelog.engine.commit.log_files import LogFiles

    store, _ = _store(tmp_path)
    real, calls = deltalake.DeltaTable, []

    def racing(*args, **kwargs):
        calls.append(1)
        if len(calls) < 3:
            raise DeltaError("Generic delta kernel error: Expected contiguous commit files, but found gap")
        return real(*args, **kwargs)

    monkeypatch.setattr(deltalake, "DeltaTable", racing)
    assert load_state(store.uri, LogFiles(store.uri)).version == store.log.latest().version
    assert len(calls) == 3


def test_local_data_files_are_read_as_arrows_own_files(tmp_path, monkeypatch):
    # The pages Arrow reads from a Python file object are Python buffers; a decoding thread of
    # Arrow's pool may drop the last of them after the read returned, and if the interpreter is
    # finalizing by then the process aborts (exit -6, "terminate called without an active
    # exception": ~1 in 10 scripts that polled once and exited, on a busy machine). So a local
    # data file is never opened through Python.
    import builtins

    store, _ = _store(tmp_path)
    real_open, opened = builtins.open, []

    def recording(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", recording)
    assert [r.offset for r in _consumer(store).poll(timeout_ms=5000)] == [0, 1, 2, 3, 4]
    assert not [path for path in opened if path.endswith(".parquet")], opened
