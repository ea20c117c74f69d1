"""VACUUM beside busy writers: listing races are retried, a lost VACUUM commit skips VACUUM (JVM-free)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError

from lakelog.compaction import maintain
from lakelog.engine.commit.delta_table import LISTING_ATTEMPTS, with_listing_retries
from lakelog.engine.errors import StoreError

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
    action, calls = _failing([DeltaError(GAP)] * LISTING_ATTEMPTS)
    with pytest.raises(DeltaError, match="found gap"):
        with_listing_retries(action)
    assert len(calls) == LISTING_ATTEMPTS


def _store_with_records(plain_store):
    plain_store.create_topic("t", partitions=1)
    with plain_store.producer() as producer:
        for i in range(3):
            producer.send("t", f"v{i}").get(timeout=30)
    return plain_store


def test_vacuum_whose_commit_keeps_losing_is_skipped_and_said_so(plain_store, monkeypatch):
    store = _store_with_records(plain_store)
    real = DeltaTable.vacuum
    races = [DeltaError(GAP)]

    def vacuum(self, *args, **kwargs):
        if races:
            raise races.pop(0)  # the first listing raced a writer: tried again
        raise CommitFailedError("Failed to commit transaction: 15")

    monkeypatch.setattr(DeltaTable, "vacuum", vacuum)
    report = maintain(store)
    assert report.vacuum_skipped and "lost to concurrent writers" in report.vacuum_skipped
    assert report.lines()[-1].startswith("vacuum: skipped: its commit lost")
    assert store.end_offsets("t") == {0: 3}
    monkeypatch.setattr(DeltaTable, "vacuum", real)
    assert maintain(store).vacuum_skipped is None


def test_a_vacuum_failure_that_is_not_a_race_is_a_store_error(plain_store, monkeypatch):
    store = _store_with_records(plain_store)

    def vacuum(self, *args, **kwargs):
        raise DeltaError("Generic error: object store refused the listing")

    monkeypatch.setattr(DeltaTable, "vacuum", vacuum)
    with pytest.raises(StoreError, match=r"VACUUM of .* failed: Generic error: object store refused"):
        maintain(store)
