"""Produce requests of many connections and partitions become one Delta commit (server-side linger).

A broker appends each request to its log segments; a commit per request would make the
store's commit rate grow with the number of clients. Requests hand their records (one
table per partition, already checked against the topics) to :class:`ProduceLinger`; its
thread takes whatever arrived within ``linger_ms`` of the first one's arrival, or until the
group holds ``group_bytes`` of records and then what is queued (requests that queued up while
the previous commit was in flight have waited that long already: they and everything queued
behind them go at once, :func:`linger_deadline`), places it all in one
:class:`kafka_endpoint.idempotence.ProduceGroup` and commits it through the commit core, then
hands each request its records' offsets. Idempotent producers' batches join the same groups,
their sequences checked in the order they were submitted. If the group is refused (a topic
changed in between, a batch out of sequence or sent twice), each request's records are
committed on their own, so one bad request fails only itself.

Two threads make a pipeline: one gathers the next group and writes its Parquet files while the
other puts the commit before it (:class:`WrittenAhead`), so a commit's cost is the larger of the
two halves, not their sum. The files are written unsynced: the group's commit syncs them together
with its commit file, before that appears (:meth:`engine.commit.log_files.LogFiles.put_commit`),
so the next group's writing never waits for the disk and no commit references a file that is not
durable. The files are numbered from the ends the commit in
flight leaves; when the group's own attempt starts from other ends (the one before failed,
another agent appended) they are renumbered in place (:meth:`DataFileWriter.renumber`), and
only when that cannot be (a topic changed, a file that cannot be) deleted and written again, as
without the pipeline. Sequences are still checked, and acknowledgements still sent, only in the commit
attempt itself, after the commit before it landed.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lakelog.engine.commit import Committer, RetryPolicy
from lakelog.engine.commit.data_files import DataFile, DataFileWriter, FilesAhead
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import FatalError
from lakelog.engine.produce.placement import PlacedRecords, join_placed, place_records
from lakelog.engine.topics import TopicMetadata, TopicPartition
from lakelog.kafka_endpoint.idempotence import ProduceGroup, SequenceClaim

log = logging.getLogger(__name__)

# A group holding this many bytes of records lingers no longer (it still takes what is
# queued), as a Kafka producer sends a batch once it reached batch.size. Sized for the Java
# producer's defaults (16 KiB batches, five requests in flight on a connection, each answered at
# its group's commit): four such requests (~60 KiB of 100-byte records) stay under it, so the
# fifth joins them and the connection's whole window commits at once, instead of the fifth
# waiting alone for a commit of its own behind them. Measured with Kafka's ProducerPerformance
# in alternating runs: 64 KiB 76.9k vs 48 KiB 73.1k rec/s on average (six of seven pairs
# faster); the sessions before, 24 / 40 / 48 KiB: 52k / 61k / 64k. A client with fewer
# requests in flight seals its group at the linger deadline (linger_deadline).
GROUP_BYTES = 64 * 1024


@dataclass(frozen=True)
class Committed:
    """Where one request's records landed: record i at ``offsets[i]`` of its partition."""

    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)


class ProduceLinger:
    """Commits record tables (RECORD_SCHEMA, one partition each) in groups. Thread-safe."""

    def __init__(
        self,
        writer: Committer,
        policy: RetryPolicy,
        linger_ms: float = 5.0,
        observe: Callable[[float, int, int], None] | None = None,
        group_bytes: int = GROUP_BYTES,
        write_thread_start: Callable[[], None] | None = None,
    ) -> None:
        """``observe(seconds, attempts, requests)`` is told of every commit (metrics). A group
        is sealed at the end of its linger or once it holds ``group_bytes`` of records.
        ``write_thread_start()`` runs first in the thread that seals groups and writes their files
        (it must not raise)."""
        self._writer, self._policy, self._linger_s = writer, policy, linger_ms / 1000
        self._write_thread_start = write_thread_start
        self._group_bytes = group_bytes
        self._observe = observe
        # queue.SimpleQueue: put is one C call (queue.Queue's takes a Condition in Python, on the
        # event loop once per request).
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._files = DataFileWriter(writer.uri)
        # One group at a time waits here, written ahead, for the commit before it to land.
        self._next: queue.Queue[tuple[list[_Item], WrittenAhead | None] | None] = queue.Queue(maxsize=1)
        self._gatherer = threading.Thread(target=self._gather, name="lakelog-serve-group-write", daemon=True)
        self._thread = threading.Thread(target=self._run, name="lakelog-serve-group-commit", daemon=True)
        self._gatherer.start()
        self._thread.start()

    def submit(self, records: pa.Table | PlacedRecords, claim: SequenceClaim | None = None) -> Future:
        """A future of :class:`Committed` (or the error that refused the records). ``records``:
        a table of RECORD_SCHEMA rows, placed when its group is, or records placed already
        (:func:`place_records`, :func:`place_partition_records`: a caller that checked them
        so), kept as they are; each commit attempt still checks them against the topics it
        sees. ``claim``: the records are an idempotent producer's batch, committed at most
        once and after the same producer's batches submitted before it
        (DuplicateSequenceError, OutOfOrderSequenceError otherwise)."""
        future: Future = Future()
        if isinstance(records, pa.Table):
            rows, size = records.num_rows, records.nbytes
        else:
            rows, size = len(records), int(records.sizes.sum())
        self._queue.put(_Item(records, rows, claim, future, time.monotonic(), size))
        return future

    def close(self) -> None:
        """Commit what was submitted, then stop."""
        self._queue.put(None)
        self._gatherer.join()
        self._thread.join()

    def _gather(self) -> None:
        """Seal groups and write each one's files while the commit before it is in flight."""
        if self._write_thread_start is not None:
            self._write_thread_start()
        previous: WrittenAhead | None = None
        stopping = False
        while not stopping:
            if previous is not None:
                # Sealed only once the one before is numbered: what arrives until then joins
                # this group rather than a third one waiting behind it.
                previous.numbered.wait()
            first = self._queue.get()
            if first is None:
                break
            group = [first]
            deadline = linger_deadline(first.arrived, self._linger_s)
            size = first.size
            while True:  # a timeout of 0 still takes what is queued: a backlog goes whole
                if size >= self._group_bytes:
                    deadline = 0.0  # full: no lingering on, but what is queued still joins
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                group.append(item)
                size += item.size
            batch = self._write_ahead(group, previous)
            self._next.put((group, batch))
            previous = batch
        self._next.put(None)

    def _write_ahead(self, group: list[_Item], previous: WrittenAhead | None) -> WrittenAhead | None:
        """The group placed and, unless that fails, its files written from the ends the commit
        before it leaves; None when the group cannot be placed (its commit says why)."""
        # Read before the state: a commit landing in between is then in both, never in neither.
        in_flight = previous.ends_after if previous is not None and not previous.finished.is_set() else None
        try:
            state = self._writer.latest()
            batch = WrittenAhead(_placed(state, group), [item.claim for item in group], [item.rows for item in group])
        except Exception:
            return None
        ends = {tp: state.end_offset(tp) for tp in batch.records.tps}
        if in_flight is not None:
            ends.update({tp: end for tp, end in in_flight.items() if tp in ends})
        try:
            batch.write_ahead(ends, state.topics, self._files)
        except Exception as exc:  # the commit attempt writes them itself and reports what fails
            log.debug("writing a produce group's files ahead failed: %s", exc)
        return batch

    def _run(self) -> None:
        while (handed := self._next.get()) is not None:
            group, batch = handed
            try:
                self._commit(group, batch)
            finally:
                if batch is not None:
                    batch.finish()

    def _commit(self, group: list[_Item], batch: WrittenAhead | None = None) -> None:
        answered = False

        def answer(offsets: np.ndarray) -> None:
            nonlocal answered
            if answered:
                return
            answered = True
            start = 0
            for item in group:
                item.future.set_result(Committed(offsets[start : start + item.rows]))
                start += item.rows
            let_answers_go()

        try:
            offsets = self._append(group, batch, answer)
        except FatalError as exc:
            if len(group) == 1:
                group[0].future.set_exception(exc)
                return
            for one in group:  # refused as a whole: each on its own (in order), so only the bad one fails
                self._commit([one])
            return
        except BaseException as exc:  # conflicts exhausted, unknown outcome, storage: all share it
            if answered:  # landed and acknowledged; what failed after it changes nothing committed
                log.exception("after a produce commit landed")
                return
            for item in group:
                item.future.set_exception(exc)
            return
        answer(offsets)

    def _append(
        self,
        group: list[_Item],
        ahead: WrittenAhead | None = None,
        answer: Callable[[np.ndarray], None] | None = None,
    ) -> np.ndarray:
        """Commit the group; ``answer(offsets)`` as soon as the commit landed (before the
        committer's post-commit checksum and checkpoint). Returns the offsets."""
        batch: ProduceGroup
        if ahead is not None:
            batch = ahead
        else:
            placed = _placed(self._writer.latest(), group)
            batch = ProduceGroup(placed, [item.claim for item in group], [item.rows for item in group])
        started = time.monotonic()

        def landed(_: int) -> None:
            if answer is not None and batch.offsets is not None:
                answer(batch.offsets)

        result = self._writer.append(batch, self._policy, landed=landed)
        if self._observe is not None:
            self._observe(time.monotonic() - started, result.attempts, len(group))
        assert batch.offsets is not None
        return batch.offsets


class WrittenAhead(ProduceGroup):
    """A :class:`ProduceGroup` whose data files may be written before its commit attempt,
    numbered from the ends the commit in flight leaves (:meth:`write_ahead`). The attempt takes
    them if it sees the same topics, renumbered to the ends it starts from; otherwise they are
    deleted and the rows written from the attempt's ends, so nothing committed depends on the
    guess. Files no attempt took are deleted by :meth:`finish`."""

    def __init__(self, records: PlacedRecords, claims: list[SequenceClaim | None], sizes: list[int]) -> None:
        super().__init__(records, claims, sizes)
        # Set once an attempt numbered the records (ends_after is then known) or the commit ended.
        self.numbered = threading.Event()
        self.finished = threading.Event()
        # Each partition's end once the group lands, from the last attempt's numbering.
        self.ends_after: dict[TopicPartition, int] | None = None
        self._ahead: FilesAhead | None = None

    def write_ahead(
        self, ends: dict[TopicPartition, int], topics: dict[str, TopicMetadata], files: DataFileWriter
    ) -> None:
        """Write the group's files now, its records numbered from ``ends`` (not committed, not
        synced: the commit that takes them syncs them with its commit file). Groups with a
        LogAppendTime topic are left to their attempt, whose commit time their records carry.
        Raises what writing raises (nothing is left behind)."""
        names = {tp.topic for tp in self.records.tps}
        if any(topics[name].log_append_time for name in names):
            return
        written = self.write_unsynced(ends, topics, files)
        if written is None:
            rows = super().build(ends, topics, int(time.time() * 1000))
            tps = self.records.tps
            # One partition (one producer's connection, most often): its one run needs no search.
            runs = [(tps[0], 0, rows.num_rows)] if len(tps) == 1 and rows.num_rows else None
            written = files.write(rows, sync=False, renumberable=True, runs=runs)
        self._ahead = FilesAhead(files, written, ends, {name: topics[name] for name in names})

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> pa.Table | list[DataFile]:
        ahead, self._ahead = self._ahead, None
        built: pa.Table | list[DataFile] | None = None
        if ahead is not None:
            built = ahead.take(ends, topics, lambda: self.number(ends))  # renumbered where the ends moved
        if built is None:
            built = super().build(ends, topics, append_time_ms)
        assert self.offsets is not None
        last = np.full(len(self.records.tps), -1, dtype=np.int64)
        np.maximum.at(last, self.records.tp_ids, self.offsets)
        self.ends_after = {tp: int(last[i]) + 1 for i, tp in enumerate(self.records.tps)}
        self.numbered.set()
        return built

    def finish(self) -> None:
        """The commit ended (landed or failed): files written ahead that no attempt took are
        deleted, and the group written after this one no longer waits for it."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.discard()
        self.finished.set()
        self.numbered.set()


def let_answers_go() -> None:
    """Give the interpreter lock up once, right after a commit's requests were answered. Their
    futures' callbacks woke the event loop, which sends the answers but waits for the lock this
    thread holds: until this thread blocks, or for the switch interval, while it writes the
    commit's checksum. Given up here, the answers go out first and the clients send their next
    requests while this thread finishes. Traced under Kafka's ProducerPerformance (five
    requests in flight): answered to answers sent 0.55 -> 0.31 ms, a commit cycle's median
    4.54 -> 4.10 ms."""
    os.sched_yield()


def linger_deadline(first_arrived: float, linger_s: float) -> float:
    """When a group whose first request arrived at ``first_arrived`` (monotonic seconds) stops
    waiting for more: ``linger_s`` after that arrival, as a Kafka producer's ``linger.ms``
    counts from its batch's first record. A request that queued behind a commit in flight is
    past its deadline when the committer takes it, so the backlog commits at once instead of
    lingering a second time: measured with Kafka's ProducerPerformance (five requests in
    flight on one connection), lingering again after every commit left the committer idle
    ~5 ms of every ~25 ms cycle while the producer's other requests waited in the queue.
    Requests arriving faster than commits land still fill each group: everything queued is
    taken."""
    return first_arrived + linger_s


class _Item(NamedTuple):
    """A request's records for one partition (a table to place, or placed records), how many,
    its idempotent claim (or None), its future and when it was submitted (time.monotonic())."""

    records: pa.Table | PlacedRecords
    rows: int
    claim: SequenceClaim | None
    future: Future
    arrived: float
    size: int


def _placed(state: TableState, group: list[_Item]) -> PlacedRecords:
    """The group's records placed: each request's as placed when it was checked, tables now
    (each on its own, as a request's records are), in submission order. Raises what
    :func:`place_records` raises for a table's refused record."""
    return join_placed(
        [
            item.records if isinstance(item.records, PlacedRecords) else place_records(state, [item.records])
            for item in group
        ]
    )
