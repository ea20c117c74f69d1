"""Produce requests of many connections and partitions become one Delta commit (server-side linger).

A broker appends each request to its log segments; a commit per request would make the
store's commit rate grow with the number of clients. Requests hand their records (one
table per partition, already checked against the topics) to :class:`ProduceLinger`; its
thread takes whatever arrived within ``linger_ms`` of the first one's arrival (requests that
queued up while the previous commit was in flight have waited that long already: they and
everything queued behind them go at once, :func:`linger_deadline`), places it all in one
:class:`kafka_endpoint.idempotence.ProduceGroup` and commits it through the commit core, then
hands each request its records' offsets. Idempotent producers' batches join the same groups,
their sequences checked in the order they were submitted. If the group is refused (a topic
changed in between, a batch out of sequence or sent twice), each request's records are
committed on their own, so one bad request fails only itself.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lakelog.engine.commit import Committer, RetryPolicy
from lakelog.engine.errors import FatalError
from lakelog.engine.produce.placement import place_records
from lakelog.kafka_endpoint.idempotence import ProduceGroup, SequenceClaim

log = logging.getLogger(__name__)


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
    ) -> None:
        """``observe(seconds, attempts, requests)`` is told of every commit (metrics)."""
        self._writer, self._policy, self._linger_s = writer, policy, linger_ms / 1000
        self._observe = observe
        self._queue: queue.Queue[_Item | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="lakelog-serve-group-commit", daemon=True)
        self._thread.start()

    def submit(self, table: pa.Table, claim: SequenceClaim | None = None) -> Future:
        """A future of :class:`Committed` (or the error that refused the records). ``claim``:
        the records are an idempotent producer's batch, committed at most once and after the
        same producer's batches submitted before it (DuplicateSequenceError,
        OutOfOrderSequenceError otherwise)."""
        future: Future = Future()
        self._queue.put(_Item(table, claim, future, time.monotonic()))
        return future

    def close(self) -> None:
        """Commit what was submitted, then stop."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            group = [first]
            deadline = linger_deadline(first.arrived, self._linger_s)
            while True:  # a timeout of 0 still takes what is queued: a backlog goes whole
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                group.append(item)
            self._commit(group)

    def _commit(self, group: list[_Item]) -> None:
        try:
            offsets = self._append(group)
        except FatalError as exc:
            if len(group) == 1:
                group[0].future.set_exception(exc)
                return
            for one in group:  # refused as a whole: each on its own (in order), so only the bad one fails
                self._commit([one])
            return
        except BaseException as exc:  # conflicts exhausted, unknown outcome, storage: all share it
            for item in group:
                item.future.set_exception(exc)
            return
        start = 0
        for table, _, future, _ in group:
            future.set_result(Committed(offsets[start : start + table.num_rows]))
            start += table.num_rows

    def _append(self, group: list[_Item]) -> np.ndarray:
        tables = [item.table for item in group]
        placed = place_records(self._writer.latest(), tables)
        batch = ProduceGroup(placed, [item.claim for item in group], [t.num_rows for t in tables])
        started = time.monotonic()
        result = self._writer.append(batch, self._policy)
        if self._observe is not None:
            self._observe(time.monotonic() - started, result.attempts, len(tables))
        assert batch.offsets is not None
        return batch.offsets


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
    """A request's records for one partition, its idempotent claim (or None), its future and
    when it was submitted (time.monotonic())."""

    table: pa.Table
    claim: SequenceClaim | None
    future: Future
    arrived: float
