"""Local appenders of one table take turns (engine.storage.turns): an appender plans after the
put of the one holding the turn, so it never writes a file numbered from an end offset another
lakelog appender then moves; files it wrote before its turn are renumbered in it where the ends
moved meanwhile (or written again when they cannot be); a turn that cannot be had in time is gone
around, never waited on for good, and put-if-absent still decides."""

from __future__ import annotations

import os
import threading
import time

import pytest
from deltalake import DeltaTable

from lakelog.engine.commit import Committer, TableLog
from lakelog.engine.commit import committer as committer_module
from lakelog.engine.commit.data_files import DataFileWriter
from lakelog.engine.storage import object_store
from lakelog.engine.storage.turns import TURN_FILE, poll_interval, take_turn
from lakelog.store import Store
from tests.engine.test_commit_loop import FAST, T0, append, batch, check_store, data_files


def test_a_turn_is_exclusive_until_released_and_a_waiter_gives_up_after_its_wait(tmp_path):
    held = take_turn(str(tmp_path), 1.0)
    assert held.held
    began = time.monotonic()
    refused = take_turn(str(tmp_path), 0.05)
    assert not refused.held and time.monotonic() - began >= 0.05
    held.release()
    held.release()  # a second release is a no-op
    again = take_turn(str(tmp_path), 0.0)
    assert again.held
    again.release()


def test_a_waiter_tries_more_often_the_longer_it_has_waited():
    waits = [poll_interval(s) for s in (0.0, 0.005, 0.02, 0.1, 10.0)]
    assert waits == sorted(waits, reverse=True) and waits[0] > waits[-1] > 0


def test_a_turn_whose_lock_file_cannot_be_opened_is_not_held(tmp_path):
    assert not take_turn(str(tmp_path / "missing"), 1.0).held


def test_the_put_hands_over_once_the_commit_file_is_in_place_before_the_directory_sync(tmp_path, monkeypatch):
    events: list[str] = []
    real_sync = object_store.sync_directory

    def sync_directory(path: str) -> None:
        events.append("sync-dir")
        real_sync(path)

    monkeypatch.setattr(object_store, "sync_directory", sync_directory)
    assert object_store.put_if_absent(
        str(tmp_path), "00000000000000000000.json", b"{}\n", linked=lambda: events.append("linked")
    )
    assert (tmp_path / "00000000000000000000.json").exists()
    assert events == ["linked", "sync-dir"]
    events.clear()
    assert not object_store.put_if_absent(
        str(tmp_path), "00000000000000000000.json", b"{}\n", linked=lambda: events.append("linked")
    )
    assert "linked" not in events  # a lost put hands nothing over


def test_an_appender_waits_for_the_turn_of_one_in_its_put_and_neither_writes_a_file_twice(tmp_path, monkeypatch):
    uri = str(tmp_path / "store")
    Store.open(uri).create_topic("t", partitions=1)
    slow, other = Committer(TableLog(uri), "slow"), Committer(TableLog(uri), "other")
    in_put = threading.Event()
    real_put = slow.log.files.put_commit

    def slow_put(*args: object) -> bool:
        in_put.set()
        time.sleep(0.3)  # long enough for the other appender to plan and put, were it not waiting
        return real_put(*args)

    slow.log.files.put_commit = slow_put  # type: ignore[method-assign]
    writes: list[str] = []
    real_write = DataFileWriter.write

    def counting_write(self, table, **kwargs):
        writes.append(threading.current_thread().name)
        return real_write(self, table, **kwargs)

    monkeypatch.setattr(DataFileWriter, "write", counting_write)
    results = {}
    first = threading.Thread(target=lambda: results.update(slow=append(slow, T0, ["a"])), name="slow")
    first.start()
    assert in_put.wait(5)
    results["other"] = append(other, T0, ["b"])
    first.join(5)
    assert results["slow"].attempts == 1 and results["other"].attempts == 1
    assert results["slow"].ranges[T0].start == 0 and results["other"].ranges[T0].start == 1
    assert len(writes) == 2  # each file written once: nobody re-planned
    assert check_store(uri)[T0] == ["a", "b"]


def test_an_offset_reservation_waits_for_the_turn_as_an_append_does(tmp_path):
    # A producer of the table holds the turn from its plan to its put; a reservation that did not
    # wait for it could plan in between and lose, again and again beside a busy producer.
    uri = str(tmp_path / "store")
    store = Store.open(uri)
    store.create_topic("t", partitions=1)
    before = store.log.latest_version()
    held = take_turn(os.path.join(uri, "_delta_log"), 1.0)
    assert held.held
    results = {}
    reserving = threading.Thread(
        target=lambda: results.update(r=Committer(TableLog(uri), "w").append_reserved(batch(T0, ["a", "b"]), FAST))
    )
    reserving.start()
    time.sleep(0.4)  # well within the turn's wait (TURN_WAIT_MAX_S)
    during = TableLog(uri).latest().version
    held.release()
    reserving.join(10)
    assert during == before  # nothing was committed while the turn was held
    assert results["r"].attempts == 1 and results["r"].ranges[T0].start == 0
    assert check_store(uri)[T0] == ["a", "b"]


def test_an_append_goes_around_a_turn_held_too_long_and_put_if_absent_still_decides(tmp_path, monkeypatch):
    uri = str(tmp_path / "store")
    Store.open(uri).create_topic("t", partitions=1)
    monkeypatch.setattr(committer_module, "TURN_WAIT_MAX_S", 0.05)
    stuck = take_turn(os.path.join(uri, "_delta_log"), 1.0)
    assert stuck.held
    try:
        first = append(Committer(TableLog(uri), "p"), T0, ["a"])
        second = append(Committer(TableLog(uri), "q"), T0, ["b"])
    finally:
        stuck.release()
    assert (first.ranges[T0].start, second.ranges[T0].start) == (0, 1)
    assert check_store(uri)[T0] == ["a", "b"]


def test_a_lock_file_another_user_created_is_locked_through_a_read_only_descriptor(tmp_path, monkeypatch):
    (tmp_path / TURN_FILE).touch()
    real_open = os.open

    def open_as_another_user(path, flags, *args):
        if flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", open_as_another_user)
    first = take_turn(str(tmp_path), 0.0)
    assert first.held
    assert not take_turn(str(tmp_path), 0.0).held
    first.release()


def _raced_before_the_turn(monkeypatch, rival) -> list[str]:
    """Run ``rival()`` once, just before the next append takes its turn (after it wrote its files
    ahead); returns the first offsets of the data files written (DataFileWriter.write of rows, or
    write_records from a batch's columns), in order."""
    writes: list[str] = []
    real_write, real_write_records = DataFileWriter.write, DataFileWriter.write_records
    real_take = committer_module.take_turn

    def recording_write(self, table, **kwargs):
        writes.append(int(table.column("offset")[0].as_py()))
        return real_write(self, table, **kwargs)

    def recording_write_records(self, tp, first_offset, *columns):
        written = real_write_records(self, tp, first_offset, *columns)
        if written is not None:  # else the rows are written (recorded above)
            writes.append(first_offset)
        return written

    def take_turn_after_the_rival(*args, **kwargs):
        if not getattr(take_turn_after_the_rival, "raced", False):
            take_turn_after_the_rival.raced = True  # type: ignore[attr-defined]
            rival()
        return real_take(*args, **kwargs)

    monkeypatch.setattr(DataFileWriter, "write", recording_write)
    monkeypatch.setattr(DataFileWriter, "write_records", recording_write_records)
    monkeypatch.setattr(committer_module, "take_turn", take_turn_after_the_rival)
    return writes


def _unreferenced_files(uri: str) -> set[str]:
    state = TableLog(uri).latest()
    return data_files(uri) - {f.path for files in state.partitions.values() for f in files.all()}


def test_files_written_before_the_turn_are_renumbered_in_it_when_another_appender_moved_the_end(tmp_path, monkeypatch):
    uri = str(tmp_path / "store")
    Store.open(uri).create_topic("t", partitions=1)
    ours, rival = Committer(TableLog(uri), "ours"), Committer(TableLog(uri), "rival")
    append(ours, T0, ["a"])  # ours knows the table now: its next append writes its files ahead
    writes = _raced_before_the_turn(monkeypatch, lambda: append(rival, T0, ["r1", "r2"]))
    sent = batch(T0, ["b", "c"])

    result = ours.append(sent, FAST)

    assert result.attempts == 1 and result.ranges[T0].start == 3
    assert writes == [1, 1]  # ours ahead of its turn from end 1, the rival's: ours not written again
    sent.complete()
    assert [sent.records.metadata(i).offset for i in range(2)] == [3, 4]  # what the records learn
    assert check_store(uri)[T0] == ["a", "r1", "r2", "b", "c"]
    assert _unreferenced_files(uri) == set()
    table = DeltaTable(uri).to_pyarrow_table()  # another Delta reader sees the renumbered file so
    rows = sorted(zip(table.column("offset").to_pylist(), table.column("value").to_pylist(), strict=True))
    assert rows == [(0, b"a"), (1, b"r1"), (2, b"r2"), (3, b"b"), (4, b"c")]


def test_files_written_ahead_for_a_topic_that_changed_before_the_turn_are_deleted_and_written_again(
    tmp_path, monkeypatch
):
    uri = str(tmp_path / "store")
    store = Store.open(uri)
    store.create_topic("t", partitions=1)
    ours = Committer(TableLog(uri), "ours")
    append(ours, T0, ["a"])
    writes = _raced_before_the_turn(
        monkeypatch, lambda: Store.open(uri).alter_topic_config("t", {"retention.ms": "3600000"})
    )

    result = append(ours, T0, ["b"])

    assert result.attempts == 1 and result.ranges[T0].start == 1
    assert writes == [1, 1]  # ahead, then again in the turn for the topic as it is now
    assert check_store(uri)[T0] == ["a", "b"]
    assert _unreferenced_files(uri) == set()  # the file written ahead was deleted


def test_files_written_ahead_that_cannot_be_renumbered_to_the_new_end_are_written_again(tmp_path, monkeypatch):
    uri = str(tmp_path / "store")
    Store.open(uri).create_topic("t", partitions=1)
    ours, rival = Committer(TableLog(uri), "ours"), Committer(TableLog(uri), "rival")
    append(ours, T0, ["a"])
    # From 1 to 71: the file's first offset would take two bytes where it has one.
    writes = _raced_before_the_turn(monkeypatch, lambda: append(rival, T0, [f"r{i}" for i in range(70)]))

    result = append(ours, T0, ["b"])

    assert result.attempts == 1 and result.ranges[T0].start == 71
    assert writes == [1, 1, 71]  # ahead, the rival's, then ours again in the turn
    assert check_store(uri)[T0][-2:] == ["r69", "b"]
    assert _unreferenced_files(uri) == set()


@pytest.mark.spark
def test_delta_spark_reads_and_optimizes_a_file_renumbered_in_place(spark, tmp_path, monkeypatch):
    uri = str(tmp_path / "store")
    Store.open(uri).create_topic("t", partitions=1)
    ours, rival = Committer(TableLog(uri), "ours"), Committer(TableLog(uri), "rival")
    append(ours, T0, ["a"])
    writes = _raced_before_the_turn(monkeypatch, lambda: append(rival, T0, ["r1", "r2"]))
    append(ours, T0, ["b", "c"])
    assert writes == [1, 1]  # ours was renumbered from 1 to 3
    expected = [(0, b"a"), (1, b"r1"), (2, b"r2"), (3, b"b"), (4, b"c")]
    rows = spark.read.format("delta").load(uri).where("offset >= 3").select("offset", "value").collect()
    assert sorted((r.offset, bytes(r.value)) for r in rows) == expected[3:]  # a filter on the offsets too
    spark.sql(f"OPTIMIZE delta.`{uri}`").collect()
    rows = spark.read.format("delta").load(uri).select("offset", "value").collect()
    assert sorted((r.offset, bytes(r.value)) for r in rows) == expected
    assert check_store(uri)[T0] == ["a", "r1", "r2", "b", "c"]
