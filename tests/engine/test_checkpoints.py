"""Checkpoints keep up with the log: only the newest version asked for is written, paced by
the time the last one took, and a process exiting waits for the one being written.

On real stores with real Delta commits and checkpoints (delta-rs), plus the checkpoint
thread alone with a write that records what it was asked for.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakelog.engine.commit import RetryPolicy, checkpoints, wait_for_checkpoints
from lakelog.engine.commit.checkpoints import Checkpointer, pause_after
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

TP = TopicPartition("t", 0)


def _grow(store: Store, versions: int) -> None:
    """One-record commits until the log holds ``versions`` versions."""
    committer = store.context.committer("test-checkpoints")
    while store.log.latest_version() < versions:
        records = RecordBatch()
        records.add(TP, None, b"r", None, int(time.time() * 1000), 1, 0)
        committer.append(ProducerBatch(records, 1), RetryPolicy())


def _checkpoints_on_disk(root: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (root / "_delta_log").glob("*.checkpoint.parquet"))


def test_a_checkpoint_asked_for_while_one_is_written_replaces_the_older_ones_waiting(tmp_path, monkeypatch):
    """Versions 100, 150 and 200 are asked for while 50 is written: 200 covers them (Delta
    protocol, "Checkpoints": the complete replay up to the version), so it is the only one
    written after 50. Writing each in turn fell behind for good at 20,000 versions."""
    root = tmp_path / "store"
    store = Store.open(root)
    store.create_topic("t", partitions=1)
    created = store.log.latest_version()  # each version after it is one record
    started, release, written = threading.Event(), threading.Event(), []
    real = checkpoints.write_checkpoint

    def slow_first(uri: str, version: int) -> None:
        if not written:
            started.set()
            assert release.wait(60)
        real(uri, version)
        written.append(version)

    monkeypatch.setattr(checkpoints, "write_checkpoint", slow_first)
    _grow(store, 50)
    assert started.wait(30)
    _grow(store, 205)
    release.set()
    assert wait_for_checkpoints(60)
    assert written == [50, 200]
    assert _checkpoints_on_disk(root) == [50, 200]
    # A plain Delta reader starts from the newest checkpoint and sees every record.
    table = DeltaTable(str(root))
    assert table.version() == 205
    assert sum(table.get_add_actions(flatten=True).column("num_records").to_pylist()) == 205 - created
    assert Store.open(root, create=False).end_offsets("t")[0] == 205 - created


def test_pause_after_a_checkpoint_keeps_checkpoints_to_their_share_of_the_time():
    assert pause_after(2.0, 0.5) == pytest.approx(2.0)
    assert pause_after(1.0, 0.25) == pytest.approx(3.0)
    assert pause_after(0.0) == 0.0
    assert pause_after(-1.0) == 0.0  # a clock step back never makes a negative pause


def test_the_next_checkpoint_of_a_table_starts_after_its_pause_and_another_table_does_not_wait():
    starts: list[tuple[str, int, float]] = []

    def write(uri: str, version: int) -> None:
        starts.append((uri, version, time.monotonic()))
        time.sleep(0.3)

    checkpointer = Checkpointer(write, share=0.5)
    checkpointer.request("a", 50)
    while not starts:
        time.sleep(0.01)
    checkpointer.request("a", 100)
    checkpointer.request("b", 50)
    deadline = time.monotonic() + 10
    while len(starts) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [(u, v) for u, v, _ in starts] == [("a", 50), ("b", 50), ("a", 100)]
    first_end = starts[0][2] + 0.3
    # "a" 100 waited its pause after "a" 50 (0.3 s written, share 0.5 -> 0.3 s); "b" did not wait for "a".
    assert starts[2][2] >= first_end + 0.3 - 0.01
    assert starts[1][2] < starts[2][2]
    checkpointer.close()


@pytest.mark.skipif(sys.platform != "linux", reason="a per-thread nice value is Linux's")
def test_checkpoints_are_written_at_a_lower_cpu_priority_than_the_process_commits_at():
    priorities: list[int] = []

    def write(uri: str, version: int) -> None:
        priorities.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    checkpointer = Checkpointer(write)
    checkpointer.request("a", 50)
    assert checkpointer.wait(10)
    checkpointer.close()
    assert priorities == [min(19, own + checkpoints.NICE_INCREMENT)] and priorities[0] > own
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # only the checkpoint thread's


def test_waiting_for_checkpoints_skips_the_pause():
    written: list[int] = []

    def write(uri: str, version: int) -> None:
        written.append(version)
        time.sleep(0.2)

    checkpointer = Checkpointer(write, share=0.01)  # a pause of ~20 s after each checkpoint
    checkpointer.request("a", 50)
    assert checkpointer.wait(10)
    checkpointer.request("a", 100)
    started = time.monotonic()
    assert checkpointer.wait(10)
    assert written == [50, 100] and time.monotonic() - started < 5
    checkpointer.close()


def test_close_waits_for_the_checkpoint_being_written_and_drops_those_waiting():
    release, written = threading.Event(), []

    def write(uri: str, version: int) -> None:
        if version == 50:
            assert release.wait(30)
        written.append(version)

    checkpointer = Checkpointer(write)
    checkpointer.request("a", 50)
    while checkpointer.pending():
        time.sleep(0.01)
    checkpointer.request("a", 100)
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    assert checkpointer.close(timeout=30)
    assert written == [50] and 0.4 < time.monotonic() - started < 20
    checkpointer.request("a", 150)  # exiting: taken by the next process's commits
    time.sleep(0.1)
    assert written == [50] and not checkpointer.pending()


def test_close_gives_up_at_its_bound_and_names_the_checkpoint(caplog):
    release = threading.Event()
    checkpointer = Checkpointer(lambda uri, version: release.wait(30))
    checkpointer.request("/some/store", 50)
    while checkpointer.pending():
        time.sleep(0.01)
    with caplog.at_level(logging.WARNING, logger=checkpoints.__name__):
        started = time.monotonic()
        assert not checkpointer.close(timeout=0.3)
    assert time.monotonic() - started < 5
    assert "/some/store at version 50 is still being written" in caplog.text
    release.set()


def test_a_version_the_tables_newest_checkpoint_covers_is_not_written_again(tmp_path):
    """Another process's checkpoint of version 100 (here the store's own checkpoint thread)
    covers 50 and 100 asked for by this one: neither is written again."""
    root = tmp_path / "store"
    store = Store.open(root)
    store.create_topic("t", partitions=1)
    _grow(store, 105)
    assert wait_for_checkpoints(60)
    assert _checkpoints_on_disk(root)[-1] == 100
    written: list[int] = []
    checkpointer = Checkpointer(lambda uri, version: written.append(version))
    checkpointer.request(str(root), 50)
    checkpointer.request(str(root), 100)
    assert checkpointer.wait(10)
    checkpointer.close()
    assert written == [] and _checkpoints_on_disk(root)[-1] == 100


def test_a_checkpoint_another_process_wrote_a_moment_ago_defers_the_next_to_its_pause():
    """The pause is the table's: this process's checkpoint took 0.2 s (share 0.5 -> a pause of
    0.2 s); another process wrote one of the table just now, so the next waits 0.2 s after it
    although this process's own pause is long over. Without it, it starts at once."""
    newest: list[tuple[int, float] | None] = [None]
    starts: list[tuple[int, float]] = []

    def write(uri: str, version: int) -> None:
        starts.append((version, time.monotonic()))
        time.sleep(0.2)
        newest[0] = (version, time.time())

    checkpointer = Checkpointer(write, share=0.5, newest=lambda uri: newest[0])
    checkpointer.request("a", 50)
    assert checkpointer.wait(10)
    time.sleep(0.4)  # past this process's own pause
    asked = time.monotonic()
    checkpointer.request("a", 100)  # nobody else wrote one since: at once
    deadline = time.monotonic() + 10
    while len(starts) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert starts[1][0] == 100 and starts[1][1] - asked < 0.15
    time.sleep(0.6)
    newest[0], other = (150, time.time()), time.monotonic()  # another process's, just now
    checkpointer.request("a", 200)
    while len(starts) < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert starts[2][0] == 200 and starts[2][1] >= other + 0.2 - 0.02
    checkpointer.close()
