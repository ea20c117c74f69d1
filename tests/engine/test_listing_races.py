"""delta-kernel's listing races are transient conflicts: retried within the client's own timeout,
retriable when it runs out, never a fatal StoreError (no Spark).

A local ``readdir`` racing a writer can miss a commit file created meanwhile while it returns
one created later (the newer commit, or the ``.crc`` written after it); delta-kernel then
refuses the listing ("Expected contiguous commit files, but found gap", "CRC file version N
is newer than log segment version N-1"). The tests below lay out exactly what such a listing
sees on the real file system -- a commit file not there yet while a later file is -- and
let the commit appear 300 ms later (longer than the ~150 ms of retries that used to end in
a StoreError, shorter than a fault must last to be named as damage); the last one races a
real producer against loaders.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from lakelog.engine.commit import Committer, RetryPolicy, TableLog
from lakelog.engine.commit import delta_table as delta_table_module
from lakelog.engine.commit.follower import load_state
from lakelog.engine.commit.log_files import LogFiles
from lakelog.engine.errors import LogListingRaceError, RetriableError, StoreError
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from tests.engine.test_commit_loop import batch

TP = TopicPartition("t", 0)
APPEARS_AFTER_S = 0.3


def _store(root: Path) -> Store:
    store = Store.open(root)
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(4):
            producer.send("t", f"v{i}", partition=0).get()
    return store


def _commit(root: Path, version: int) -> Path:
    return root / "_delta_log" / f"{version:020d}.json"


class LateCommit:
    """Commit file ``version`` is not there (as a racing listing misses it) until ``after_s``."""

    def __init__(self, root: Path, version: int, after_s: float | None = APPEARS_AFTER_S) -> None:
        self.path = _commit(root, version)
        self.aside = self.path.with_name(f".aside-{version}")
        os.rename(self.path, self.aside)
        self.timer = None if after_s is None else threading.Timer(after_s, self.appear)
        if self.timer is not None:
            self.timer.start()

    def appear(self) -> None:
        if self.aside.exists():
            os.rename(self.aside, self.path)

    def __enter__(self) -> LateCommit:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.appear()


@pytest.fixture
def races(monkeypatch) -> list[str]:
    """The listing races delta-kernel reported (observed, not injected)."""
    seen: list[str] = []
    real = delta_table_module.is_transient_listing_error

    def observe(exc: BaseException) -> bool:
        transient = real(exc)
        if transient:
            seen.append(str(exc).splitlines()[0])
        return transient

    monkeypatch.setattr(delta_table_module, "is_transient_listing_error", observe)
    return seen


@pytest.mark.parametrize("missing", ["a middle commit (found gap)", "the newest commit (CRC newer than segment)"])
def test_a_load_that_races_a_commit_lists_again_until_it_sees_it(tmp_path, races, missing):
    root = tmp_path / "store"
    store = _store(root)
    newest = store.log.latest().version
    version = newest - 1 if missing.startswith("a middle") else newest
    with LateCommit(root, version):
        state = load_state(store.uri, LogFiles(store.uri))
    assert state.version == newest and state.end_offset(TP) == 4
    assert races and any(("found gap" if version < newest else "newer than log segment") in r for r in races)


def test_a_send_that_loads_the_table_during_a_race_lands_within_its_delivery_timeout(tmp_path, races):
    root = tmp_path / "store"
    store = _store(root)
    newest = store.log.latest().version
    committer = Committer(TableLog(store.uri), "fresh-process")  # its first append loads a snapshot
    with LateCommit(root, newest):
        result = committer.append(batch(TP, ["after"]), RetryPolicy(timeout_ms=10_000))
    assert result.version == newest + 1 and result.ranges[TP].start == 4
    assert races


def test_when_the_timeout_runs_out_the_race_is_retriable_not_a_store_error(tmp_path, races):
    root = tmp_path / "store"
    store = _store(root)
    newest = store.log.latest().version
    committer = Committer(TableLog(store.uri), "fresh-process")
    with LateCommit(root, newest, after_s=None):
        started = time.monotonic()
        with pytest.raises(LogListingRaceError) as raised:
            committer.append(batch(TP, ["late"]), RetryPolicy(timeout_ms=300))
        assert time.monotonic() - started < 0.9  # bounded by the append's own timeout
        with pytest.raises(LogListingRaceError):
            TableLog(store.uri).latest(timeout_ms=200)
    assert isinstance(raised.value, RetriableError) and not isinstance(raised.value, StoreError)
    assert Store.open(root, create=False).end_offsets("t") == {0: 4}  # nothing was committed


def test_loaders_racing_a_real_producer_never_fail(tmp_path, races):
    """Fresh loads (what every new process and a maintenance run does) beside a producer committing
    as fast as it can, until delta-kernel reported a few races (about 1 load in 150 here) or 20 s."""
    root = tmp_path / "store"
    store = _store(root)
    stop = threading.Event()
    acked: list[int] = []

    def produce() -> None:
        with store.producer(linger_ms=0) as producer:
            while not stop.is_set():
                acked.append(producer.send("t", b"x", partition=0).get().offset)

    writer = threading.Thread(target=produce)
    writer.start()
    loads = 0
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(races) < 3:
            state = load_state(store.uri, LogFiles(store.uri))
            assert state.end_offset(TP) >= 4
            loads += 1
    finally:
        stop.set()
        writer.join()
    assert acked == list(range(4, 4 + len(acked)))
    assert Store.open(root, create=False).end_offsets("t") == {0: 4 + len(acked)}
    print(f"{loads} loads, {len(races)} listing races retried")
