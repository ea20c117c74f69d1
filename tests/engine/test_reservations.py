"""Offset reservations (engine.commit.reservations): a slow write claims its offsets once and
lands beside a busy producer without rewriting its files; readers wait at it; an abandoned
one is aborted and skipped. Real local stores and real commits; no Spark."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from lakelog.engine.admin.check import check_store, repair_store
from lakelog.engine.commit import Committer, RetryPolicy, TableLog
from lakelog.engine.commit.actions import Commit, Txn
from lakelog.engine.commit.conflicts import Resolution, append_verdict
from lakelog.engine.commit.markers import end_marker_id
from lakelog.engine.commit.reservations import expired, fill_verdict, holds, plan_reservations, release_verdict
from lakelog.engine.errors import InconsistentWriteError, ReservationLostError
from lakelog.engine.produce.placement import RECORD_SCHEMA, PlacedBatch, place_records
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
FAST = RetryPolicy(retries=50, backoff_ms=1, backoff_max_ms=5)


@pytest.fixture
def store(tmp_path) -> Store:
    store = Store.open(str(tmp_path / "store"))
    store.create_topic("t", partitions=2)
    return store


def records(values: list[str], partition: int) -> pa.Table:
    n = len(values)
    return pa.table(
        {
            "topic": ["t"] * n,
            "partition": pa.array([partition] * n, pa.int32()),
            "key": pa.nulls(n, pa.binary()),
            "value": [v.encode() for v in values],
            "headers": pa.nulls(n, RECORD_SCHEMA.field("headers").type),
            "timestamp_ms": pa.nulls(n, pa.int64()),
        },
        schema=RECORD_SCHEMA,
    )


class SlowBatch(PlacedBatch):
    """A placed batch whose files take ``delay_s`` to build (as a Spark job's do)."""

    def __init__(self, *args, delay_s: float = 0.0, fail: BaseException | None = None, started=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.delay_s = delay_s
        self.fail = fail
        self.builds = 0
        self.started = started

    def build(self, ends, topics, append_time_ms):
        self.builds += 1
        if self.started is not None:
            self.started.set()
        time.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        return super().build(ends, topics, append_time_ms)


def slow_batch(committer: Committer, values: list[str], partition: int, **kwargs) -> SlowBatch:
    placed = place_records(committer.latest(), [records(values, partition)])
    return SlowBatch(placed, None, operation="write", **kwargs)


def offsets_of(store: Store, tp: TopicPartition) -> dict[int, str]:
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([tp])
    found = {}
    while batch := consumer.poll(timeout_ms=200):
        found.update({r.offset: r.value.decode() for r in batch})
    consumer.close()
    return found


class Producing:
    """A producer committing one record at a time to ``tp`` as fast as it can, in a thread."""

    def __init__(self, store: Store, tp: TopicPartition) -> None:
        self.store, self.tp = store, tp
        self.acked: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.store.producer(linger_ms=0) as producer:
            i = 0
            while not self._stop.is_set():
                value = f"p{i}"
                md = producer.send("t", value.encode(), partition=self.tp.partition).get()
                self.acked[md.offset] = value
                i += 1

    def __enter__(self) -> Producing:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def test_a_slow_write_lands_beside_a_busy_producer_without_rewriting_its_files(store):
    committer = Committer(TableLog(store.uri), "writer")
    batch = slow_batch(committer, [f"w{i}" for i in range(500)], 0, delay_s=1.0)
    with Producing(store, T0) as producer:
        time.sleep(0.2)
        result = committer.append_reserved(batch, FAST)
        time.sleep(0.2)
    assert batch.builds == 1  # claimed once, written once
    assert producer.acked and result.version is not None
    got = offsets_of(store, T0)
    written = result.ranges[T0]
    assert [got[o] for o in range(written.start, written.end)] == [f"w{i}" for i in range(500)]
    for offset, value in producer.acked.items():  # every acknowledged send where it was told
        assert got[offset] == value
    assert sorted(got) == list(range(len(got)))  # dense: nothing skipped, nothing doubled
    assert any(o > written.end for o in producer.acked) and any(o < written.start for o in producer.acked)


def test_readers_wait_at_a_pending_reservation_and_producers_append_after_it(store):
    committer = Committer(TableLog(store.uri), "writer")
    with store.producer() as producer:
        producer.send("t", b"before", partition=0).get()
    started = threading.Event()
    batch = slow_batch(committer, ["w0", "w1", "w2"], 0, delay_s=1.5, started=started)
    thread = threading.Thread(target=committer.append_reserved, args=(batch, FAST))
    thread.start()
    started.wait(10)
    with store.producer() as producer:
        after = producer.send("t", b"after", partition=0).get()
    assert after.offset == 4  # after the reserved 1..3
    assert store.end_offsets("t")[0] == 1  # the last stable offset: readers end at the reservation
    assert offsets_of(store, T0) == {0: "before"}
    thread.join()
    assert store.end_offsets("t")[0] == 5
    assert offsets_of(store, T0) == {0: "before", 1: "w0", 2: "w1", 3: "w2", 4: "after"}


def test_a_failed_build_aborts_the_reservation_and_readers_skip_it(store):
    committer = Committer(TableLog(store.uri), "writer")
    batch = slow_batch(committer, ["w0", "w1"], 1, fail=RuntimeError("executor lost"))
    with pytest.raises(RuntimeError, match="executor lost"):
        committer.append_reserved(batch, FAST)
    state = committer.latest()
    assert state.pending_reservations(T1) == []
    with store.producer() as producer:
        md = producer.send("t", b"next", partition=1).get()
    assert md.offset == 2  # the aborted offsets are never given again
    assert offsets_of(store, T1) == {2: "next"}
    assert store.end_offsets("t")[1] == 3


def test_files_that_do_not_hold_the_reserved_counts_are_never_committed(store):
    committer = Committer(TableLog(store.uri), "writer")
    batch = slow_batch(committer, ["a", "b", "c"], 0)
    real_build = batch.build

    def short_build(ends, topics, append_time_ms):
        return real_build(ends, topics, append_time_ms).slice(0, 2)  # the input changed between count and write

    batch.build = short_build
    with pytest.raises(InconsistentWriteError, match="reserved"):
        committer.append_reserved(batch, FAST)
    assert committer.latest().pending_reservations(T0) == []
    assert offsets_of(store, T0) == {}


def test_an_abandoned_reservation_expires_and_its_fill_then_fails(store):
    committer = Committer(TableLog(store.uri), "writer")
    started = threading.Event()
    batch = slow_batch(committer, ["w0", "w1"], 0, delay_s=2.0, started=started)
    outcome: list[BaseException | object] = []

    def write() -> None:
        try:
            outcome.append(committer.append_reserved(batch, FAST, timeout_ms=300_000))
        except BaseException as exc:
            outcome.append(exc)

    # The writer "dies" from the others' point of view: its deadline is in the past for them.
    thread = threading.Thread(target=write)
    thread.start()
    started.wait(10)
    other = Committer(TableLog(store.uri), "other")
    assert other.abort_expired(FAST, now_ms=int(time.time() * 1000)) is None  # not expired yet
    assert other.abort_expired(FAST, now_ms=int(time.time() * 1000) + 400_000) is not None
    assert store.end_offsets("t")[0] == 2  # readers no longer wait at it
    thread.join()
    assert isinstance(outcome[0], ReservationLostError)
    assert offsets_of(store, T0) == {}
    with store.producer() as producer:
        assert producer.send("t", b"x", partition=0).get().offset == 2


def test_a_heartbeat_keeps_a_long_write_alive_past_its_timeout(store):
    committer = Committer(TableLog(store.uri), "writer")
    batch = slow_batch(committer, ["w0"], 0, delay_s=2.0)
    stop = threading.Event()
    aborts = []

    def sweeper() -> None:  # another client aborting whatever expired, as readers do
        other = Committer(TableLog(store.uri), "sweeper")
        while not stop.is_set():
            if other.abort_expired(FAST) is not None:
                aborts.append(1)
            time.sleep(0.05)

    thread = threading.Thread(target=sweeper)
    thread.start()
    try:
        result = committer.append_reserved(batch, FAST, timeout_ms=600)
    finally:
        stop.set()
        thread.join()
    assert not aborts and result.version is not None
    assert offsets_of(store, T0) == {0: "w0"}


def test_nothing_to_write_reserves_nothing(store):
    committer = Committer(TableLog(store.uri), "writer")
    version = committer.latest().version
    batch = slow_batch(committer, [], 0)
    assert committer.append_reserved(batch, FAST).version is None
    assert committer.latest().version == version


# -- the pure parts ---------------------------------------------------------------------


def test_plan_takes_free_slots_and_moves_the_end_markers(store):
    state = Committer(TableLog(store.uri), "w").latest()
    topic_id = state.topics["t"].topic_id
    reservations, actions = plan_reservations(state, {T0: 5, T1: 0}, {T0: 3, T1: 0}, until_ms=99, now_ms=1)
    assert [(r.tp, r.slot, r.first, r.end, r.until_ms) for r in reservations] == [(T0, 0, 5, 8, 99)]
    txns = {a.app_id: a.version for a in actions}
    assert txns[end_marker_id(topic_id, 0)] == 8
    assert txns[f"lakelog.rsv.{topic_id}.0"] == 1  # one slot now
    assert end_marker_id(topic_id, 1) not in txns


def test_conflict_rules_of_reservations(store):
    state = Committer(TableLog(store.uri), "w").latest()
    topic_id = state.topics["t"].topic_id
    (reservation,), actions = plan_reservations(state, {T0: 0}, {T0: 2}, until_ms=10, now_ms=1)
    reserve = Commit(tuple(actions))
    # A producer that planned from offset 0 must re-plan after a reservation took 0..1.
    markers = {end_marker_id(topic_id, 0): 0}
    assert append_verdict(reserve, {T0: 0}, [], markers).resolution is Resolution.REPLAN
    # ... but not one on another partition.
    assert append_verdict(reserve, {T1: 0}, [], {end_marker_id(topic_id, 1): 0}).resolution is Resolution.REBASE
    # A fill rebases over other appends, and re-plans after its reservation was resolved.
    other = Commit((Txn(end_marker_id(topic_id, 0), 7),))
    assert fill_verdict(other, [reservation], []).resolution is Resolution.REBASE
    resolved = Commit((Txn(reservation.first_id(), reservation.end),))
    assert fill_verdict(resolved, [reservation], []).resolution is Resolution.REPLAN
    # An abort re-plans after a heartbeat moved the deadline.
    beat = Commit((Txn(reservation.until_id(), 20),))
    assert release_verdict(beat, [reservation]).resolution is Resolution.REPLAN
    assert release_verdict(other, [reservation]).resolution is Resolution.REBASE


def test_expired_and_holds_read_the_state(store):
    committer = Committer(TableLog(store.uri), "w")
    started = threading.Event()
    batch = slow_batch(committer, ["a"], 0, delay_s=1.0, started=started)
    thread = threading.Thread(target=committer.append_reserved, args=(batch, FAST), kwargs={"timeout_ms": 50_000})
    thread.start()
    started.wait(10)
    state = Committer(TableLog(store.uri), "r").latest()
    (pending,) = state.pending_reservations(T0)
    assert holds(state, pending) and state.stable_end(T0) == 0 and state.end_offset(T0) == 1
    assert expired(state, pending.until_ms - 1) == [] and expired(state, pending.until_ms + 1) == [pending]
    thread.join()
    assert Committer(TableLog(store.uri), "r").latest().pending_reservations(T0) == []


RESERVING_WRITER = """
import sys, time
import pyarrow as pa
from lakelog.engine.commit import Committer, RetryPolicy, TableLog
from lakelog.engine.produce.placement import RECORD_SCHEMA, PlacedBatch, place_records

class Stuck(PlacedBatch):
    def build(self, ends, topics, append_time_ms):
        print("building", flush=True)
        time.sleep(600)

committer = Committer(TableLog(sys.argv[1]), "doomed")
n = 3
table = pa.table({"topic": ["t"] * n, "partition": pa.array([0] * n, pa.int32()), "key": pa.nulls(n, pa.binary()),
                  "value": [b"a", b"b", b"c"], "headers": pa.nulls(n, RECORD_SCHEMA.field("headers").type),
                  "timestamp_ms": pa.nulls(n, pa.int64())}, schema=RECORD_SCHEMA)
batch = Stuck(place_records(committer.latest(), [table]), None, operation="write")
committer.append_reserved(batch, RetryPolicy(retries=5), timeout_ms=int(sys.argv[2]))
"""


def test_check_reports_a_pending_reservation_and_repair_aborts_it_once_expired(store):
    import os
    import signal
    import subprocess
    import sys

    writer = subprocess.Popen(
        [sys.executable, "-c", RESERVING_WRITER, store.uri, "300000"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "building"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    (report,) = [p for p in check_store(store.context).partitions if p.tp == T0]
    assert report.violations == [] and report.pending == [(0, 3)]
    assert repair_store(store.context, check_store(store.context)) == []  # not expired: left alone
    later = Committer(TableLog(store.uri), "x").latest().pending_reservations(T0)[0].until_ms + 1
    import lakelog.engine.admin.check as log_check

    # time.time is patched for every thread: the context's own sweeper would see the deadline
    # pass too and could abort the reservation before repair does.
    store.context.log.on_expired_reservations(None)

    real_time = log_check.time.time
    log_check.time.time = lambda: later / 1000  # the deadline has passed
    try:
        done = repair_store(store.context, check_store(store.context))
    finally:
        log_check.time.time = real_time
    assert len(done) == 1 and "aborted the expired reservation of offsets 0..2" in done[0]
    (report,) = [p for p in check_store(store.context).partitions if p.tp == T0]
    assert report.violations == [] and report.aborted == [(0, 3)] and report.pending == []


def test_a_reservation_of_a_killed_writer_expires_and_consumers_move_past_it(store):
    import os
    import signal
    import subprocess
    import sys

    writer = subprocess.Popen(
        [sys.executable, "-c", RESERVING_WRITER, store.uri, "1500"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "building"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    with store.producer() as producer:
        after = producer.send("t", b"after", partition=0).get()
    assert after.offset == 3  # acknowledged past the dead writer's 0..2
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([T0])
    seen, deadline = [], time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        seen = consumer.poll(timeout_ms=200)
    consumer.close()
    assert [(r.offset, r.value) for r in seen] == [(3, b"after")]  # the aborted 0..2 are skipped
    assert store.log.latest().pending_reservations(T0) == []
    (report,) = [p for p in check_store(store.context).partitions if p.tp == T0]
    assert report.violations == []
    with store.producer() as producer:
        assert producer.send("t", b"next", partition=0).get().offset == 4


def test_append_or_reserve_commits_once_when_alone_and_reserves_after_a_lost_race(store):
    committer = Committer(TableLog(store.uri), "sink")
    alone = slow_batch(committer, ["a", "b"], 0)
    version = committer.latest().version
    result = committer.append_or_reserve(alone, FAST)
    assert result.version == version + 1 and alone.builds == 1  # one commit, no reservation

    rival = Committer(TableLog(store.uri), "rival")
    raced = slow_batch(committer, ["c", "d"], 0)
    real_build = raced.build

    def build_then_lose(ends, topics, append_time_ms):
        rows = real_build(ends, topics, append_time_ms)
        if raced.builds == 1:
            rival.append_reserved(slow_batch(rival, ["r"], 0), FAST)  # takes the offsets it planned
        return rows

    raced.build = build_then_lose
    result = committer.append_or_reserve(raced, FAST)
    assert raced.builds == 2  # the first files given up once, then written inside a reservation
    assert offsets_of(store, T0) == {0: "a", 1: "b", 2: "r", 3: "c", 4: "d"}
    assert [e.operation for e in store.history_entries()][-3:] == ["write", "reserve", "write"]  # rival, ours
