"""DeleteRecords (Kafka's ``Admin.deleteRecords``) on a store: the log start moves forward,
durably, for every reader; never back; -1 is the high watermark; past it is OffsetOutOfRange;
files wholly below the start go in the same commit; maintenance keeps the start; racing
producers and other deletions never lose a record above the start. No JVM: real Delta commits."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from lakelog.compaction import maintain
from lakelog.engine.admin.check import check_store
from lakelog.engine.admin.delete_records import files_below
from lakelog.engine.commit.actions import Commit, Txn
from lakelog.engine.commit.conflicts import Resolution, maintenance_verdict
from lakelog.engine.commit.markers import start_marker_id
from lakelog.engine.errors import (
    InvalidOffsetError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.offsets import FileStats
from lakelog.engine.topics import OFFSETS_TOPIC, TopicPartition
from lakelog.store import Store

TP = TopicPartition("t", 0)


def _store(tmp_path: Path, batches: list[int], partitions: int = 1, **config: object) -> Store:
    """A store whose topic ``t`` partition 0 holds one file per batch of ``batches`` records."""
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=partitions, config=config or None)
    n = 0
    for size in batches:
        with store.producer(linger_ms=0) as producer:
            producer.send_batch("t", [f"v{n + i}".encode() for i in range(size)], partition=0).get()
        n += size
    return store


def _read_all(store: Store, tp: TopicPartition = TP, **config: object) -> list[int]:
    consumer = store.consumer(**{"auto.offset.reset": "earliest", "client.id": "reader", **config})
    consumer.assign([tp])
    seen: list[int] = []
    idle = 0
    while idle < 3:
        batch = consumer.poll(timeout_ms=50)
        idle = 0 if batch else idle + 1
        seen += [r.offset for r in batch]
    consumer.close()
    return seen


def test_delete_records_moves_the_log_start_for_every_reader_and_lasts(tmp_path: Path) -> None:
    store = _store(tmp_path, [4, 3, 3])  # files 0..3, 4..6, 7..9
    assert store.delete_records({TP: 5}) == {TP: 5}
    assert store.beginning_offsets("t") == {0: 5}
    assert store.end_offsets("t") == {0: 10}
    state = store.log.latest()
    assert [(f.min_offset, f.max_offset) for f in state.files_of(TP).ordered] == [(4, 6), (7, 9)]
    assert state.committed_start(TP) == 5
    assert _read_all(store) == [5, 6, 7, 8, 9]
    reopened = Store.open(tmp_path / "store")  # the start is in the Delta log, not in memory
    assert reopened.beginning_offsets("t") == {0: 5}
    assert _read_all(reopened) == [5, 6, 7, 8, 9]
    report = check_store(reopened.context)
    assert not report.violations, report.violations
    entry = reopened.history_entries("t")[-1]
    assert entry.operation == "delete_records"
    assert [(c.action, c.start_offset, c.end_offset) for c in entry.changes] == [("removed", 0, 4)]


def test_a_consumer_below_the_new_start_follows_auto_offset_reset(tmp_path: Path) -> None:
    store = _store(tmp_path, [10])
    consumer = store.consumer("g", **{"auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TP])
    consumer.seek(TP, 2)
    consumer.commit({TP: 2})
    consumer.close()
    store.delete_records({TP: 6})
    again = store.consumer("g", **{"auto.offset.reset": "earliest", "enable.auto.commit": False})
    again.assign([TP])
    records = again.poll(timeout_ms=1000)
    assert [r.offset for r in records] == [6, 7, 8, 9]
    again.seek_to_beginning()
    assert again.position(TP) == 6
    again.close()


def test_minus_one_is_the_high_watermark_and_past_it_is_out_of_range(tmp_path: Path) -> None:
    store = _store(tmp_path, [3, 3])
    version = store.log.latest().version
    with pytest.raises(OffsetOutOfRangeError, match=r"high watermark 6"):
        store.delete_records({TP: 7})
    with pytest.raises(OffsetOutOfRangeError):
        store.delete_records({TP: -2})
    assert store.log.latest().version == version  # nothing committed
    assert store.delete_records({("t", 0): -1}) == {TP: 6}
    assert store.beginning_offsets("t") == {0: 6}
    assert _read_all(store) == []
    # The newest file stays (it holds the end offset); appends go on after it.
    assert [(f.min_offset, f.max_offset) for f in store.log.latest().files_of(TP).ordered] == [(3, 5)]
    with store.producer(linger_ms=0) as producer:
        assert producer.send("t", b"after", partition=0).get().offset == 6
    assert _read_all(store) == [6]


def test_the_start_never_moves_back_and_asking_again_commits_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, [5, 5])
    assert store.delete_records({TP: 7}) == {TP: 7}
    version = store.log.latest().version
    assert store.delete_records({TP: 7}) == {TP: 7}
    assert store.delete_records({TP: 3}) == {TP: 7}
    assert store.delete_records({TP: 0}) == {TP: 7}
    assert store.log.latest().version == version
    assert store.beginning_offsets("t") == {0: 7}


def test_bad_requests_name_what_is_wrong_and_commit_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, [5], partitions=2)
    store.context.ensure_offsets_topic()
    version = store.log.latest().version
    with pytest.raises(UnknownTopicOrPartitionError, match="partition 2 of topic 't'"):
        store.delete_records({TP: 2, TopicPartition("t", 2): 0})
    with pytest.raises(UnknownTopicOrPartitionError, match="'nope'"):
        store.delete_records({TopicPartition("nope", 0): 0})
    with pytest.raises(InvalidTopicError, match="internal"):
        store.delete_records({TopicPartition(OFFSETS_TOPIC, 0): 0})
    with pytest.raises(InvalidOffsetError, match="must be an int"):
        store.delete_records({TP: "3"})  # type: ignore[dict-item]
    with pytest.raises(InvalidOffsetError, match="TopicPartition"):
        store.delete_records({"t": 3})
    assert store.log.latest().version == version
    assert store.beginning_offsets("t") == {0: 0, 1: 0}


def test_maintenance_keeps_the_start(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1, config={"retention.ms": 3_600_000, "cleanup.policy": "compact,delete"})
    with store.producer(linger_ms=0) as producer:
        for i in range(6):  # one file per record: keys repeat, the first three are past retention
            stamp = now - 10 * 3_600_000 if i < 3 else now
            producer.send("t", f"v{i}".encode(), key=f"k{i % 2}".encode(), partition=0, timestamp=stamp).get()
    with store.producer(linger_ms=0) as producer:
        keys = [f"k{i % 2}".encode() for i in range(6)]
        producer.send_batch("t", [f"w{i}".encode() for i in range(6)], keys=keys, partition=0).get()
    assert store.delete_records({TP: 8}) == {TP: 8}  # inside the newest file (6..11)
    maintain(store, topics=["t"], vacuum=False, now_ms=now)
    assert store.beginning_offsets("t") == {0: 8}
    assert store.log.latest().committed_start(TP) == 8
    assert _read_all(store) == [8, 9, 10, 11]
    assert not check_store(store.context).violations


def test_deletions_racing_producers_and_each_other_never_move_the_start_back(tmp_path: Path) -> None:
    _store(tmp_path, [1])
    stop = threading.Event()
    acknowledged: list[int] = []
    seen_starts: list[int] = []
    errors: list[BaseException] = []

    producing = threading.Event()

    def produce() -> None:
        try:
            with Store.open(tmp_path / "store").producer(linger_ms=0) as producer:
                while not stop.is_set():
                    acknowledged.append(producer.send("t", b"x", partition=0).get(30).offset)
                    producing.set()
        except BaseException as exc:
            errors.append(exc)
        finally:
            producing.set()

    def delete(offset_of: object) -> None:
        other = Store.open(tmp_path / "store")
        try:
            for _ in range(8):
                end = other.end_offsets("t")[0]
                offset = -1 if offset_of == "hw" else max(0, end - 3)
                start = other.delete_records({TP: offset})[TP]
                seen_starts.append(start)
                assert other.beginning_offsets("t")[0] >= start
        except BaseException as exc:
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    # The deletions race a producer that is already acknowledging: on a busy machine opening
    # the producer's store can take longer than all sixteen deletions.
    assert producing.wait(60)
    deleters = [threading.Thread(target=delete, args=(kind,)) for kind in ("hw", "behind")]
    for t in deleters:
        t.start()
    for t in deleters:
        t.join(120)
    stop.set()
    producer.join(60)
    assert not errors, errors
    final = Store.open(tmp_path / "store")
    start = final.beginning_offsets("t")[0]
    assert start == max(seen_starts)
    end = final.end_offsets("t")[0]
    assert _read_all(final) == list(range(start, end))  # nothing above the start lost
    assert end == max(acknowledged) + 1
    assert not check_store(final.context).violations
    # Each commit moved it forward: the markers in history never go down.
    marks = [
        json.loads(entry.details or "{}")["log_start_offsets"]["0"]
        for entry in final.history_entries("t")
        if entry.operation == "delete_records"
    ]
    assert marks == sorted(marks)


def test_a_maintenance_step_loses_to_a_winner_that_moved_its_start_further() -> None:
    marker = start_marker_id("id", 0)
    winner = Commit([Txn(marker, 9, 0)])
    assert maintenance_verdict(winner, set(), "t", "id", {marker: 5}).resolution is Resolution.CONFLICT
    assert maintenance_verdict(winner, set(), "t", "id", {marker: 9}).resolution is Resolution.REBASE
    assert maintenance_verdict(winner, set(), "t", "id", {marker: 12}).resolution is Resolution.REBASE
    assert maintenance_verdict(winner, set(), "t", "id").resolution is Resolution.REBASE


def test_files_below_keep_the_newest_file() -> None:
    files = tuple(FileStats(f"f{a}", TP, b - a + 1, a, b) for a, b in [(0, 3), (4, 6), (7, 9)])
    assert [f.path for f in files_below(files, 5)] == ["f0"]
    assert [f.path for f in files_below(files, 10)] == ["f0", "f4"]
    assert files_below((), 3) == []


def test_maintain_removes_the_files_a_deletion_left_wholly_below_the_start(tmp_path: Path) -> None:
    store = _store(tmp_path, [3, 3])  # files 0..2, 3..5
    assert store.delete_records({TP: -1}) == {TP: 6}  # the newest file (3..5) stays: it holds the end
    with store.producer(linger_ms=0) as producer:
        producer.send_batch("t", [b"a", b"b"], partition=0).get()  # 6..7: now 3..5 is left behind
    report = maintain(store, topics=["t"], vacuum=False)
    assert report.topics[0].files_deleted_by_retention == 1
    assert report.topics[0].records_removed_by_retention == 0  # they were deleted already
    state = store.log.latest()
    assert [(f.min_offset, f.max_offset) for f in state.files_of(TP).ordered] == [(6, 7)]
    assert store.beginning_offsets("t") == {0: 6} and state.committed_start(TP) == 6
    assert _read_all(store) == [6, 7]
    assert not check_store(store.context).violations
