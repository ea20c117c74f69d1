"""VACUUM beside busy writers: listing races are retried, VACUUM's commits go through the commit core and
one that keeps losing skips VACUUM (JVM-free)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from lakelog.compaction import maintain
from lakelog.engine.commit import RetryPolicy
from lakelog.engine.commit.delta_table import with_listing_retries
from lakelog.engine.commit.log_files import LogFiles
from lakelog.engine.errors import LogListingRaceError, RetriableError, StoreError
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

GAP = "Generic delta kernel error: Expected contiguous commit files, but found gap"


def _failing(errors: list[Exception], result: str = "done"):
    calls = []

    def action():
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return result

    return action, calls


def test_a_listing_race_is_tried_again_and_other_errors_are_not():
    action, calls = _failing([DeltaError(GAP), DeltaError("CRC file version 7 is newer than log segment version 6")])
    assert with_listing_retries(action) == "done" and len(calls) == 3
    action, calls = _failing([DeltaError("Truncated record at line 1")])
    with pytest.raises(DeltaError, match="Truncated"):
        with_listing_retries(action)
    assert len(calls) == 1
    # Tried for as long as the caller's timeout allows, then retriable: never a fatal StoreError.
    action, calls = _failing([DeltaError(GAP)] * 1000)
    with pytest.raises(LogListingRaceError, match="kept racing concurrent writers") as raised:
        with_listing_retries(action, timeout_ms=300)
    assert isinstance(raised.value, RetriableError) and not isinstance(raised.value, StoreError)
    assert 3 < len(calls) < 30


def _store_with_records(plain_store):
    plain_store.create_topic("t", partitions=1)
    with plain_store.producer() as producer:
        for i in range(3):
            producer.send("t", f"v{i}").get(timeout=30)
    return plain_store


def _data_files(store) -> set[str]:
    return {str(p) for p in Path(store.uri).rglob("*.parquet") if "_delta_log" not in p.parts}


def test_vacuum_whose_commit_keeps_losing_is_skipped_and_deletes_nothing(plain_store, monkeypatch):
    store = _store_with_records(plain_store)
    maintain(store, vacuum=False)  # OPTIMIZE: the three small files become unreferenced
    before = _data_files(store)
    rival = Store.open(store.uri)
    real_put = LogFiles.put_commit
    taken = []

    def put_commit(self, version, data, *rest):
        if b'"VACUUM START"' in data:
            # Another writer takes the version first, every time: a real append lands there.
            with rival.producer() as producer:
                producer.send("t", b"meanwhile").get(timeout=30)
            taken.append(version)
        return real_put(self, version, data, *rest)

    monkeypatch.setattr(LogFiles, "put_commit", put_commit)
    policy = RetryPolicy(retries=2, backoff_ms=1, backoff_max_ms=1, max_rebases=2)
    report = maintain(store, vacuum_retention_hours=0, policy=policy)
    assert report.vacuum_skipped and "lost to concurrent writers" in report.vacuum_skipped
    assert report.lines()[-1].startswith("vacuum: skipped: its commit lost")
    assert len(taken) == 3 and report.vacuumed_files == 0
    assert before < _data_files(store)  # nothing deleted without its START commit (the rival's 3 added)
    assert b'"VACUUM' not in b"".join(p.read_bytes() for p in Path(store.uri, "_delta_log").glob("*.json"))
    monkeypatch.setattr(LogFiles, "put_commit", real_put)
    again = maintain(store, optimize=False, vacuum_retention_hours=0)
    assert again.vacuum_skipped is None and again.vacuumed_files == 3
    assert store.end_offsets("t") == {0: 6}


def test_vacuum_commits_go_through_the_commit_core(plain_store):
    """VACUUM START and END are lakelog's commits (its tags, txnId, checksum), around the deletions."""
    store = _store_with_records(plain_store)
    maintain(store, vacuum=False)
    unreferenced = _data_files(store) - {str(Path(store.uri, unquote(f.path))) for f in store.log.snapshot().files}
    assert len(unreferenced) == 3
    report = maintain(store, vacuum_retention_hours=0)
    assert report.vacuumed_files == 3 and not any(Path(p).exists() for p in unreferenced)
    version = store.log.latest().version
    start, end = (store.log.read_commit(v).commit_info for v in (version - 1, version))
    assert (start.operation, end.operation) == ("VACUUM START", "VACUUM END")
    assert start.values["operationMetrics"]["numFilesToDelete"] == "3"
    assert end.values["operationMetrics"]["numDeletedFiles"] == "3"
    assert start.values["operationParameters"] == {"retentionCheckEnabled": False, "specifiedRetentionMillis": 0}
    for info in (start, end):
        assert info.tags["lakelog.client.id"] == "lakelog-maintain" and info.txn_id
    assert Path(store.uri, "_delta_log", f"{version:020d}.crc").exists()
    # Delta readers see them in the history, as Spark's VACUUM writes them.
    history = DeltaTable(store.uri).history(2)
    assert [h["operation"] for h in history] == ["VACUUM END", "VACUUM START"]
    # Nothing left to delete: no commit at all.
    assert maintain(store, optimize=False, vacuum_retention_hours=0).vacuumed_files == 0
    assert store.log.latest().version == version


def test_a_deletion_the_store_refuses_is_a_store_error_after_the_start_commit(plain_store, monkeypatch):
    store = _store_with_records(plain_store)
    maintain(store, vacuum=False)
    from fsspec.implementations.local import LocalFileSystem

    def refuse(self, path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(LocalFileSystem, "rm_file", refuse)
    with pytest.raises(StoreError, match=r"VACUUM could not delete .*\.parquet: .*Permission denied"):
        maintain(store, vacuum_retention_hours=0)
    assert store.end_offsets("t") == {0: 3}
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("t", 0)])
    assert consumer.poll_arrow(timeout_ms=5000).column("value").to_pylist() == [b"v0", b"v1", b"v2"]


def test_a_vacuum_failure_that_is_not_a_race_is_a_store_error(plain_store, monkeypatch):
    store = _store_with_records(plain_store)

    def vacuum(self, *args, **kwargs):
        raise DeltaError("Generic error: object store refused the listing")

    monkeypatch.setattr(DeltaTable, "vacuum", vacuum)
    with pytest.raises(StoreError, match=r"VACUUM of .* failed: Generic error: object store refused"):
        maintain(store)


def test_vacuum_never_deletes_outside_the_store(plain_store, monkeypatch, tmp_path):
    store = _store_with_records(plain_store)
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"not the store's")
    listed = ["../outside.parquet", str(outside), f"file://{outside}", "topic=t/../../outside.parquet"]
    monkeypatch.setattr(DeltaTable, "vacuum", lambda self, *args, **kwargs: list(listed))
    report = maintain(store, optimize=False, vacuum_retention_hours=0)
    assert report.vacuumed_files == 0 and outside.read_bytes() == b"not the store's"
    assert store.end_offsets("t") == {0: 3}
