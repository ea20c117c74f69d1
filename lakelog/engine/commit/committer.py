"""The commit loop: every write of the log table goes through :class:`Committer`.

One pipeline for appends (producers, transactions, consumer groups, the
streaming sink, ``Store.write``), topic changes and maintenance steps::

      [a renumberable append: its data files written ahead, from the ends this process knows]
        |
      [an append to a local table: take its turn (engine.storage.turns), held to the put]
        |
      plan against the state at version V        (pure: the batch, the change, the step)
        |
      write data files                            (pyarrow here; Spark executors for write(df));
                                                  files written ahead: renumbered in place
                                                  where the ends moved meanwhile
        |
      put-if-absent _delta_log/<V+1>.json  ------ taken -----+
        |                                                    |
        | landed              read the winner, apply the change's conflict rule
        |                       (engine.commit.conflicts): rebase -> try V+2 with
        |                       the same files; re-plan -> delete our files (they
        |                       certainly did not land), back off, plan again
        |
      post-commit: view update, .crc, checkpoint every delta.checkpointInterval
        |
      acknowledge

    a lost response (S3) is settled in one place (:meth:`Committer._settle`):
    read the version; if it is empty, take it with an empty commit so the lost
    request can never land later; our commit is the one holding our txnId.
    Data files are deleted only when the commit certainly did not land.

Errors keep the three outcomes apart: RetriableError (CommitConflictError,
DeliveryTimeoutError, DataWriteError: nothing was committed),
CommitStateUnknownError (it may have landed), FatalError (refused; a full
or read-only store is StoreFullError / StoreAccessError: nothing was
committed, and retrying at once cannot help).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

import pyarrow as pa

from lakelog.engine.commit.actions import (
    Action,
    Commit,
    CommitInfo,
    Metadata,
    RemoveFile,
    Txn,
    encode_actions,
    sealed_commit,
)
from lakelog.engine.commit.actions import Protocol as DeltaProtocol
from lakelog.engine.commit.checkpoints import request_checkpoint
from lakelog.engine.commit.checksum import initial_checksum, next_checksum
from lakelog.engine.commit.conflicts import (
    Resolution,
    Verdict,
    append_verdict,
    maintenance_verdict,
    record_verdict,
    topic_change_verdict,
)
from lakelog.engine.commit.data_files import DataFile, DataFileWriter, FilesAhead
from lakelog.engine.commit.features import check_writable
from lakelog.engine.commit.follower import PreparedState, TableLog
from lakelog.engine.commit.info import TAG_CLIENT, TAG_DETAILS, TAG_OPERATION, append_tags, commit_info
from lakelog.engine.commit.log_files import LogFiles, checksum_file
from lakelog.engine.commit.markers import (
    Reservation,
    end_marker_id,
    is_reservation_id,
    lost_marker_id,
    start_marker_id,
)
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.commit.reservations import (
    DEFAULT_TIMEOUT_MS,
    expired,
    extend_actions,
    fill_verdict,
    holds,
    plan_reservations,
    release_verdict,
    resolve_actions,
)
from lakelog.engine.commit.retry import RetryPolicy, retries_exhausted
from lakelog.engine.commit.state import TableState, state_disagreement
from lakelog.engine.errors import (
    CommitConflictError,
    CommitNotDurableError,
    CommitStateUnknownError,
    CorruptLogError,
    DeliveryTimeoutError,
    InconsistentWriteError,
    InvalidTxnStateError,
    LakelogError,
    LogListingRaceError,
    MaintenanceConflictError,
    ReservationLostError,
    RetriableError,
    StoreAccessError,
    StoreError,
    StoreFullError,
    error_for_os_error,
)
from lakelog.engine.offsets import (
    FileStats,
    OffsetRange,
    counts_by_partition,
    partition_bounds,
    plan_ranges,
    verify_written,
)
from lakelog.engine.storage.object_store import is_s3, make_directories
from lakelog.engine.storage.turns import Turn, take_turn
from lakelog.engine.storage.unique_ids import new_uuid
from lakelog.engine.topics import TopicMetadata, TopicPartition

log = logging.getLogger(__name__)


class DataWriteError(RetriableError):
    """Writing the data files or the commit file failed; nothing was committed."""


def write_failure(exc: OSError, what: str) -> LakelogError:
    """The error for an OSError that ended ``what`` before anything was committed: a full
    store (StoreFullError) or one refusing writes (StoreAccessError: read-only, permission
    denied) is fatal -- retrying at once cannot succeed -- anything else a retriable
    DataWriteError."""
    error = error_for_os_error(exc, f"{what} (nothing was committed)")
    if isinstance(error, (StoreFullError, StoreAccessError)):
        return error
    return DataWriteError(f"{what} failed, nothing was committed: {exc}")


@dataclass(frozen=True)
class AppTransaction:
    """Delta's application transaction (``txn`` action: appId, version) a commit sets.

    A commit carrying ``(app_id, version)`` is only made while the table's
    version for ``app_id`` is below ``version``; so a retried batch never
    commits twice (Kafka's idempotent producer), and a newer holder of
    ``app_id`` fences older ones.
    """

    app_id: str
    version: int
    # The batch's check() picks the version from the committed one in every
    # attempt (an epoch bump), so a higher committed version is not "landed".
    replan: bool = False


class AppendBatch(Protocol):
    """Records to append in one commit. A batch may name its files with a ``file_label``
    attribute (:data:`engine.commit.data_files.OFFSETS_LABEL`), and declare with a true
    ``renumberable`` attribute that its :meth:`build` returns a table, may be called more than
    once (the last call's numbering is the one committed) and that only the offset column
    depends on ``ends`` (``append_time_ms`` only LogAppendTime timestamps): the committer then
    writes its files before its turn and renumbers them in it (:class:`FilesAhead`); such a
    batch is a :class:`RenumberableBatch`."""

    operation: str
    # The app transactions the commit sets (none for most appends); check() may re-plan them.
    app_transactions: Sequence[AppTransaction]
    # Commit even with no records (a transaction that only bumps an epoch).
    commit_when_empty: bool

    def prepare(self, view: TableState) -> Mapping[TopicPartition, int] | None:
        """Validate against the state's topics; the record count per partition if known now.

        A batch whose counts are only known after its files are written returns None.
        """

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        """Raise a FatalError if the batch must not commit at ``view`` (fencing).

        ``committed`` maps the app id of each of the batch's app transactions
        to the table's version of it (-1 if none). Runs in every attempt;
        anything it read that a winner changes makes the attempt re-plan (the
        conflict rules).
        """

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        """Every partition the batch may write to."""

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> pa.Table | list[DataFile]:
        """The rows, each partition's numbered from its end offset in ``ends``.

        An Arrow table (rows grouped by partition, in offset order) is written
        here, one Parquet file per partition; a batch that writes its own files
        (Spark executors for ``Store.write``) returns them.
        """


class RenumberableBatch(AppendBatch, Protocol):
    """A batch with a true ``renumberable`` attribute (:class:`AppendBatch`): its files are
    written before the commit's turn and renumbered in it."""

    def write_unsynced(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], files: DataFileWriter
    ) -> list[DataFile] | None:
        """The files :meth:`build`'s rows for ``ends`` would give (unsynced, renumberable:
        :meth:`DataFileWriter.write_records`), written straight from the batch's columns and its
        records numbered; None, nothing written or numbered, when it cannot (the committer then
        builds the rows). Raises OSError."""

    def number(self, ends: Mapping[TopicPartition, int]) -> object:
        """Number the records from ``ends`` as :meth:`build` would, without the rows (what a
        renumbering in the turn calls)."""


def check_attempt(
    batch: AppendBatch, view: TableState
) -> tuple[tuple[AppTransaction, ...], Mapping[TopicPartition, int] | None, bool]:
    """One attempt's checks: the app transactions to set, the expected counts, and
    whether there is nothing to commit. Raises what the batch refuses (fencing)."""
    committed = {app.app_id: view.app_version(app.app_id) for app in batch.app_transactions}
    batch.check(committed, view)  # may raise (fenced), may re-plan the app versions
    apps = tuple(batch.app_transactions)
    for app in apps:
        now = view.app_version(app.app_id)
        if not app.replan and now >= app.version:
            raise InvalidTxnStateError(
                f"application transaction {app.app_id!r} is already at version {now}; "
                f"version {app.version} was never committed by this writer"
            )
    expected = batch.prepare(view)
    nothing = expected is not None and not any(expected.values()) and not batch.commit_when_empty
    return apps, expected, nothing


@dataclass(frozen=True)
class AppendResult:
    version: int | None  # None when the batch had nothing to commit
    ranges: dict[TopicPartition, OffsetRange]
    append_time_ms: int
    attempts: int


@dataclass(frozen=True)
class TopicChange:
    """A planned change of topic metadata: the table's new configuration."""

    properties: dict[str, str]
    tags: dict[str, str]
    delete_topic: str | None = None


@dataclass
class MaintenanceChange:
    """A maintenance step on one topic: files it removes, files it adds (already written)."""

    operation: str  # Delta's operation name: OPTIMIZE, LOG COMPACTION, DELETE
    topic: str
    topic_id: str
    removed: Sequence[RemoveFile]
    added: Sequence[DataFile]
    data_change: bool
    tags: dict[str, str]
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    # Retention, DeleteRecords: each partition's new log start offset, recorded where plain Delta
    # tools keep it (a winner that moved one further makes the step lose: starts never move back).
    log_starts: Mapping[int, int] = field(default_factory=dict)
    # A repair dropping missing files: per partition the offset ranges [first, end) they held.
    lost_ranges: Mapping[int, Sequence[tuple[int, int]]] = field(default_factory=dict)


class _Replan(Exception):
    """The version was taken by a winner the change cannot rebase over."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.reason)
        self.verdict = verdict


class _OutcomeUnknown(Exception):
    """A put whose outcome could not be settled."""

    def __init__(self, version: int, txn_id: str, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.version = version
        self.txn_id = txn_id


@dataclass
class _Pending:
    """Append attempts whose outcome was unknown, all put at ``version`` (an attempt after
    an unknown one can only reach the same version: every earlier one is taken). At most
    one landed: the one whose txnId that version holds."""

    version: int
    attempts: dict[str, tuple[AppendResult, list[DataFile]]]

    def landed(self, txn_id: str | None) -> AppendResult | None:
        found = self.attempts.get(txn_id or "")
        return None if found is None else replace(found[0], version=self.version)

    def files_except(self, txn_id: str | None) -> list[DataFile]:
        return [f for t, (_, files) in self.attempts.items() if t != txn_id for f in files]


# The longest a local append waits for its turn (engine.storage.turns) before it goes on
# without one: a turn lasts milliseconds, so only a stuck holder makes anyone wait this long.
TURN_WAIT_MAX_S = 1.0
# Attempts to abort a reservation (about 10 s in all) before it is left to expire.
_RELEASE_ATTEMPTS = 8
# Attempts to settle a lost response before the outcome is reported unknown.
_SETTLE_ATTEMPTS = 3


class Committer:
    """Commits appends, topic changes and maintenance steps to one table.

    One call at a time per committer (a lock serializes them); every client
    holds its own, and all of a process's committers of one table share its
    :class:`TableLog`.
    """

    def __init__(self, log: TableLog, client_id: str, *, seed: int | None = None) -> None:
        if "://" in log.uri and not is_s3(log.uri):
            raise StoreError(
                f"committing needs put-if-absent, which lakelog has for local paths and S3 only; {log.uri} is neither"
            )
        self.log = log
        self.uri = log.uri
        self.client_id = client_id
        self._files = DataFileWriter(log.uri)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    @property
    def log_files(self) -> LogFiles:
        return self.log.files

    def latest(self) -> TableState:
        return self.log.latest()

    # -- appends -------------------------------------------------------------

    def append(
        self, batch: AppendBatch, policy: RetryPolicy, *, landed: Callable[[int], None] | None = None
    ) -> AppendResult:
        """Commit ``batch`` with dense offsets after each partition's end offset.

        ``landed(version)`` is called once the commit is durable and the view advanced past it,
        before the post-commit checksum and checkpoint (an agent acknowledges there: nothing
        after it changes what was committed); it must not raise. Not called when nothing was
        committed.

        Raises CommitConflictError / DeliveryTimeoutError when retries or time
        ran out (nothing was committed), DataWriteError when files could not
        be written (nothing was committed; StoreFullError / StoreAccessError
        when the store is full or refuses writes), CommitStateUnknownError when a
        commit may have landed but it cannot be told, FatalError subclasses
        for refused batches.
        """
        with self._lock:
            return self._append(batch, policy, landed)

    def _append(
        self, batch: AppendBatch, policy: RetryPolicy, landed: Callable[[int], None] | None = None
    ) -> AppendResult:
        started = time.monotonic()
        failures = 0
        pending: _Pending | None = None
        wait: Callable[[], None] | None = None
        while True:
            if wait is not None:
                wait()  # outside the turn: others commit meanwhile
                wait = None
            # Files written before the turn, numbered from the ends known now: while another
            # appender holds the turn; in this one only offsets that moved are rewritten.
            ahead = self._write_ahead(batch) if pending is None else None
            # Planned and put in this committer's turn, a local append is not raced by another
            # lakelog appender of the table, so its file is written once (engine.storage.turns).
            turn = self._take_turn(policy, started)
            try:
                state = self._latest(pending, policy, started)
                if pending is not None and state.version >= pending.version:
                    earlier = self._pending_landed(pending)
                    if earlier is not None:
                        if landed is not None and earlier.version is not None:
                            landed(earlier.version)
                        return earlier
                    pending = None
                check_writable(state.protocol, state.metadata)
                apps, expected, nothing = check_attempt(batch, state)
                if nothing:
                    return AppendResult(None, {}, 0, failures + 1)
                ends = self._ends_for(state, batch.target_partitions(state))
                append_time_ms = int(time.time() * 1000)
                written = None
                if ahead is not None:
                    # Taken when the batch holds as many records per partition as when written
                    # (none refused since); built again for the ends the files are renumbered to.
                    taken = counts_by_partition([f.stats for f in ahead.files])
                    if expected is not None and taken == {tp: n for tp, n in expected.items() if n}:
                        renumbered = cast(RenumberableBatch, batch)  # only such a batch is written ahead
                        written = ahead.take(ends, state.topics, functools.partial(renumbered.number, ends))
                    ahead.discard()
                    ahead = None
                if written is None:
                    written = self._write(
                        batch.build(ends, state.topics, append_time_ms), getattr(batch, "file_label", "")
                    )
                stats = [f.stats for f in written]
                counts = counts_by_partition(stats)
                if expected is not None and counts != {tp: n for tp, n in expected.items() if n}:
                    self._discard(written)
                    raise InconsistentWriteError(f"planned {dict(expected)} records per partition, files hold {counts}")
                if not counts and not batch.commit_when_empty:
                    self._discard(written)
                    return AppendResult(None, {}, append_time_ms, failures + 1)
                plan = plan_ranges(ends, counts)
                try:
                    verify_written(plan, stats)
                except InconsistentWriteError:
                    self._discard(written)
                    raise
                actions: list[Action] = [f.add for f in written]
                actions.extend(Txn(app.app_id, app.version, append_time_ms) for app in apps)
                # Each partition's new end, where plain Delta tools keep it: rows another writer
                # appends then never move it (engine.commit.state).
                actions.extend(
                    Txn(end_marker_id(state.topics[tp.topic].topic_id, tp.partition), r.end, append_time_ms)
                    for tp, r in sorted(plan.items())
                )
                tags = append_tags(batch.operation, self.client_id, plan)
                metrics = {"numFiles": len(written), "numOutputRows": sum(counts.values())}
                relied = {tp: r.start for tp, r in plan.items()}
                app_ids = [app.app_id for app in apps]
                markers = end_markers(state, relied)
                info = attempt_info("WRITE", tags, parameters={"mode": "Append"}, metrics=metrics)
                result = AppendResult(None, plan, append_time_ms, failures + 1)
                try:
                    version = self._land(
                        state.version,
                        actions,
                        info,
                        lambda winner, relied=relied, app_ids=app_ids, markers=markers: append_verdict(
                            winner, relied, app_ids, markers
                        ),
                        written,
                        policy,
                        started,
                        pending,
                        landed,
                        # Others plan on it from here; it is acknowledged once durable.
                        turn.release,
                    )
                except _Replan as replan:
                    log.debug("%s: re-planning an append: %s", self.client_id, replan.verdict.reason)
                    self._discard(written)
                    failures += 1
                    wait = functools.partial(self._back_off, policy, failures, started, pending, replan=True)
                    continue
                except _OutcomeUnknown as unknown:
                    # Keep the files: the commit may land. The next attempt learns the
                    # outcome from the version it was put at (it holds our txnId or not).
                    if pending is None:
                        pending = _Pending(unknown.version, {})
                    pending.attempts[unknown.txn_id] = (result, written)
                    failures += 1
                    wait = functools.partial(self._back_off, policy, failures, started, pending)
                    continue
                except _PendingLanded as earlier:
                    if landed is not None and earlier.result.version is not None:
                        landed(earlier.result.version)
                    return earlier.result
                return AppendResult(version, plan, append_time_ms, failures + 1)
            finally:
                turn.release()
                if ahead is not None:  # the attempt ended before it could take them
                    ahead.discard()

    def _write_ahead(self, batch: AppendBatch) -> FilesAhead | None:
        """A ``renumberable`` batch's files written from the newest state this process has
        read (the log is not read: the turn's read finds what landed since), unsynced. None
        for other batches, before this process read the table, on S3 (no turns, nothing to
        rewrite in place), when a topic of the batch is unknown or LogAppendTime (its rows
        carry the commit's time), or when building them fails (the attempt in the turn builds
        them again and reports what is wrong). Raises what writing files raises, as the
        attempt would (DataWriteError, StoreFullError, StoreAccessError): nothing was
        committed."""
        if not getattr(batch, "renumberable", False) or is_s3(self.uri):
            return None
        state = self.log.known()
        if state is None:
            return None  # the attempt's read loads the table, within the append's own timeout
        try:
            tps = batch.target_partitions(state)
            topics = {tp.topic: state.topics.get(tp.topic) for tp in tps}
            if not tps or any(meta is None or meta.log_append_time for meta in topics.values()):
                return None
            ends = self._ends_for(state, tps)
            written = self._write_unsynced(cast(RenumberableBatch, batch), ends, state)
            rows = None if written is not None else batch.build(ends, state.topics, int(time.time() * 1000))
        except (DataWriteError, StoreFullError, StoreAccessError):
            raise
        except Exception as exc:
            log.debug("%s: building an append's files ahead of its turn failed: %s", self.client_id, exc)
            return None
        if written is None:
            if not isinstance(rows, pa.Table):
                return None
            written = self._write(rows, getattr(batch, "file_label", ""), renumberable=True)
        return FilesAhead(self._files, written, ends, topics)

    def _write_unsynced(
        self, batch: RenumberableBatch, ends: dict[TopicPartition, int], state: TableState
    ) -> list[DataFile] | None:
        """The batch's files written from its columns (:meth:`RenumberableBatch.write_unsynced`),
        or None when it leaves them to its rows."""
        try:
            return batch.write_unsynced(ends, state.topics, self._files)
        except OSError as exc:
            raise write_failure(exc, "writing data files") from exc

    def _take_turn(self, policy: RetryPolicy, started: float) -> Turn:
        """This committer's turn at a local table (none on S3), waited for at most
        :data:`TURN_WAIT_MAX_S` and what is left of the policy's time."""
        if is_s3(self.uri):
            return Turn(None)
        wait_s = TURN_WAIT_MAX_S
        if policy.timeout_ms is not None:
            wait_s = min(wait_s, max(0.0, policy.timeout_ms / 1000 - (time.monotonic() - started)))
        return take_turn(self.log.files.log_dir, wait_s, self._follow)

    def _follow(self) -> None:
        """Read the commits landing while waiting for a turn; errors are left to the turn's
        own read of the log, which reports them."""
        with contextlib.suppress(LakelogError, OSError):
            self.log.latest()

    def _latest(self, pending: _Pending | None, policy: RetryPolicy, started: float) -> TableState:
        # Loading a snapshot may have to outlast listing races: within what is left of the
        # append's own time (delivery.timeout.ms for a producer), never a fixed few tries.
        left_ms = None if policy.timeout_ms is None else policy.timeout_ms - int((time.monotonic() - started) * 1000)
        try:
            return self.log.latest(timeout_ms=left_ms)
        except LogListingRaceError as exc:
            if pending is not None:
                raise CommitStateUnknownError(
                    f"a commit put at version {pending.version} had an unknown outcome and the log could not be "
                    f"listed to tell ({exc}); re-read it before retrying"
                ) from exc
            raise
        except OSError as exc:
            if pending is not None:
                raise CommitStateUnknownError(
                    f"a commit put at version {pending.version} had an unknown outcome and the log cannot be "
                    f"read to tell ({exc}); re-read it before retrying"
                ) from exc
            raise write_failure(exc, "reading the Delta log") from exc

    def _pending_landed(self, pending: _Pending) -> AppendResult | None:
        """Whether the unknown attempt landed, now that its version is taken; its files are
        deleted if it did not."""
        try:
            commit = self.log.read_commit(pending.version)
        except OSError as exc:
            raise CommitStateUnknownError(
                f"a commit put at version {pending.version} had an unknown outcome and it cannot be read back "
                f"({exc}); re-read the log before retrying"
            ) from exc
        landed = None if commit is None else pending.landed(commit.txn_id)
        if landed is not None:
            log.info("%s: a commit with a lost response landed as version %s", self.client_id, pending.version)
            self._discard(pending.files_except(commit.txn_id))  # type: ignore[union-attr]
            return landed
        if commit is None:
            # The log was cleaned past it (days later): whether it landed cannot be told.
            raise CommitStateUnknownError(
                f"a commit attempted at version {pending.version} had an unknown outcome and that version "
                "is no longer in the log; re-read the log before retrying"
            )
        self._discard(pending.files_except(None))
        return None

    def _ends_for(self, state: TableState, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        ends = {tp: state.end_offset(tp) for tp in tps}
        unknown = [tp for tp in tps if tp in state.unknown_ends and state.committed_end(tp) is None]
        if unknown:
            reader = PartitionReader(self.uri)
            for tp in unknown:
                offsets = reader.read(state.files_of(tp), tp, 0).column("offset")
                ends[tp] = max(ends[tp], int(offsets[-1].as_py()) + 1 if len(offsets) else 0)
        return ends

    def _write(self, rows: pa.Table | list[DataFile], label: str = "", *, renumberable: bool = False) -> list[DataFile]:
        if isinstance(rows, list):
            return rows
        try:
            return self._files.write(rows, label=label, sync=False, renumberable=renumberable)
        except OSError as exc:
            raise write_failure(exc, "writing data files") from exc

    def _discard(self, files: Iterable[DataFile]) -> None:
        self._files.discard(list(files))

    def _back_off(
        self,
        policy: RetryPolicy,
        failures: int,
        started: float,
        pending: _Pending | None = None,
        *,
        replan: bool = False,
    ) -> None:
        """Wait before the next attempt, or raise when the policy allows none.

        With an attempt whose outcome is still unknown, running out means the
        caller must be told so, not "nothing was committed".
        """
        if policy.exhausted(failures, started, time.monotonic()):
            if pending is not None:
                raise CommitStateUnknownError(
                    f"a commit put at version {pending.version} had an unknown outcome and retries ran out "
                    "before it could be told; re-read the log to see whether it landed"
                )
            raise retries_exhausted(policy, failures, started)
        time.sleep(policy.replan_delay_s(failures, self._rng) if replan else policy.delay_s(failures, self._rng))

    # -- reserved appends ------------------------------------------------------------

    def append_reserved(
        self, batch: AppendBatch, policy: RetryPolicy, *, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> AppendResult:
        """Commit ``batch`` as :meth:`append` does, its offsets claimed before its files are written.

        For batches whose files take long to write (Spark jobs): the batch's
        record counts (``prepare`` must return them) are reserved in one small
        commit (:mod:`engine.commit.reservations`), the files are written once,
        numbered inside the reserved ranges, and one commit adds them. That
        commit rebases over every other append, so the files are never
        rewritten however busy the partitions are; readers end at the
        reservation until it lands (Kafka's last stable offset). While the
        files are written a heartbeat keeps the reservation alive; a failed
        build aborts it (its offsets are skipped, as an aborted transaction's);
        a writer that dies leaves it to expire ``timeout_ms`` after its last
        heartbeat, when any client may abort it.

        Raises what :meth:`append` raises, and ReservationLostError
        (retriable, nothing committed) when the reservation was aborted
        before the records landed.
        """
        started = time.monotonic()
        taken = self._reserve(batch, policy, started, timeout_ms)
        if taken is None:
            return AppendResult(None, {}, 0, 1)
        reservations, state, append_time_ms, attempts = taken
        firsts = self._ends_for(state, batch.target_partitions(state))
        firsts.update({r.tp: r.first for r in reservations})
        expected = {r.tp: r.count for r in reservations}
        try:
            with _Heartbeat(Committer(self.log, self.client_id), reservations, timeout_ms, policy):
                built = batch.build(firsts, state.topics, append_time_ms)
            written = self._write(built, getattr(batch, "file_label", ""))
        except BaseException:
            self.release(reservations, policy, reason="its files could not be written")
            raise
        stats = [f.stats for f in written]
        plan = plan_ranges(firsts, expected)
        try:
            counts = counts_by_partition(stats)
            if counts != {tp: n for tp, n in expected.items() if n}:
                raise InconsistentWriteError(
                    f"reserved {dict(expected)} records per partition, the files hold {counts} "
                    "(did the input change between the count and the write? persist() it)"
                )
            verify_written(plan, stats)
        except InconsistentWriteError:
            self._discard(written)
            self.release(reservations, policy, reason="its files did not hold the reserved offsets")
            raise
        return self._fill(batch, reservations, written, plan, append_time_ms, policy, started, attempts)

    def append_or_reserve(
        self,
        batch: AppendBatch,
        policy: RetryPolicy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        lost: Callable[[], None] | None = None,
    ) -> AppendResult:
        """:meth:`append` once; after one conflict (``lost`` is called), :meth:`append_reserved`.

        For batches whose files this process writes quickly (a streaming sink's
        micro-batch): when nothing else commits to their partitions they land in
        one commit, as a producer's batch does; beside a busy producer the first
        files are given up once and the batch reserves its offsets instead of
        re-planning every time it loses. Raises what those raise.
        """
        once = replace(policy, retries=0)
        try:
            return self.append(batch, once)
        except (CommitConflictError, DeliveryTimeoutError) as exc:
            log.debug("%s: an append lost a race (%s); reserving its offsets", self.client_id, exc)
        if lost is not None:
            lost()
        return self.append_reserved(batch, policy, timeout_ms=timeout_ms)

    def _reserve(
        self, batch: AppendBatch, policy: RetryPolicy, started: float, timeout_ms: int
    ) -> tuple[list[Reservation], TableState, int, int] | None:
        """Take the batch's offsets in one commit: (reservations, the state they were planned
        at, the append time, attempts), or None when there is nothing to commit."""
        attempts = 0

        def attempt() -> int:
            # In this committer's turn, as an append: lakelog's producers of the table wait for
            # it instead of landing between its plan and its put (engine.storage.turns).
            turn = self._take_turn(policy, started)
            try:
                return planned(turn)
            finally:
                turn.release()

        def planned(turn: Turn) -> int:
            nonlocal attempts, taken
            attempts += 1
            state = self._latest(None, policy, started)
            check_writable(state.protocol, state.metadata)
            apps, expected, nothing = check_attempt(batch, state)
            if expected is None:
                raise TypeError(f"{type(batch).__name__}.prepare must count its records to reserve offsets")
            if nothing or not any(expected.values()):
                taken = None
                return -1
            now_ms = int(time.time() * 1000)
            ends = self._ends_for(state, [tp for tp, n in expected.items() if n])
            try:
                reservations, actions = plan_reservations(state, ends, expected, now_ms + timeout_ms, now_ms)
            except ValueError as exc:
                raise _Replan(Verdict(Resolution.REPLAN, str(exc))) from None
            relied = {r.tp: r.first for r in reservations}
            app_ids = [a.app_id for a in actions if is_reservation_id(a.app_id)]
            app_ids.extend(app.app_id for app in apps)
            markers = end_markers(state, relied)
            # No records yet: the ranges are details, not the ranges an append's history shows.
            tags = {
                TAG_OPERATION: "reserve",
                TAG_CLIENT: self.client_id,
                TAG_DETAILS: _json({"reserved": _ranges_json(reservations), "until": now_ms + timeout_ms}),
            }
            version = self._land(
                state.version,
                actions,
                attempt_info("RESERVE OFFSETS", tags),
                lambda winner: append_verdict(winner, relied, app_ids, markers),
                [],
                policy,
                started,
                linked=turn.release,
            )
            taken = (reservations, state, now_ms, attempts)
            return version

        taken: tuple[list[Reservation], TableState, int, int] | None = None
        self._replanning(
            attempt,
            policy,
            started,
            lambda version: (
                f"an offset reservation put at version {version} had an unknown outcome; it expires "
                f"{timeout_ms} ms after it was made if it landed"
            ),
        )
        return taken

    def _fill(
        self,
        batch: AppendBatch,
        reservations: list[Reservation],
        written: list[DataFile],
        plan: dict[TopicPartition, OffsetRange],
        append_time_ms: int,
        policy: RetryPolicy,
        started: float,
        attempts: int,
    ) -> AppendResult:
        """Commit the files of ``reservations`` and resolve them; the files are never rewritten."""
        apps = tuple(batch.app_transactions)
        app_ids = [app.app_id for app in apps]
        tags = append_tags(batch.operation, self.client_id, plan)
        metrics = {"numFiles": len(written), "numOutputRows": sum(r.count for r in reservations)}

        replans = -1

        def attempt() -> int:
            nonlocal replans
            replans += 1
            state = self._latest(None, policy, started)
            check_writable(state.protocol, state.metadata)
            lost = [r for r in reservations if not holds(state, r)]
            if lost:
                self._discard(written)
                raise ReservationLostError(
                    f"the reservation of offsets {lost[0].first}..{lost[0].end - 1} of {lost[0].tp} was aborted "
                    "before the write landed (its deadline passed); nothing was committed"
                )
            if apps and all(state.app_version(app.app_id) >= app.version for app in apps):
                raise _AlreadyCommitted()
            now_ms = int(time.time() * 1000)
            actions: list[Action] = [f.add for f in written]
            actions += resolve_actions(reservations, now_ms)
            actions.extend(Txn(app.app_id, app.version, now_ms) for app in apps)
            info = attempt_info("WRITE", tags, parameters={"mode": "Append"}, metrics=metrics)

            return self._land(
                state.version,
                actions,
                info,
                lambda winner: fill_verdict(winner, reservations, app_ids),
                written,
                policy,
                started,
            )

        try:
            version = self._replanning(
                attempt,
                policy,
                started,
                lambda version: (
                    f"the commit of a reserved write put at version {version} had an unknown outcome; "
                    "read the table's history to see whether it landed"
                ),
            )
        except _AlreadyCommitted:
            # Another run of the same batch (a replayed micro-batch) committed it first.
            self._discard(written)
            already = ", ".join(f"{app.app_id} version {app.version}" for app in apps)
            self.release(reservations, policy, reason=f"{already} is already committed")
            return AppendResult(None, {}, append_time_ms, attempts + replans)
        except (CommitConflictError, DeliveryTimeoutError):
            # Retries ran out (the files were deleted): give the offsets up rather than hold readers.
            self.release(reservations, policy, reason="its commit ran out of retries")
            raise
        return AppendResult(version, plan, append_time_ms, attempts + replans)

    def release(self, reservations: Sequence[Reservation], policy: RetryPolicy, *, reason: str) -> int | None:
        """Abort ``reservations`` that are still pending: their offsets are never used (readers
        skip them, as an aborted transaction's). Never raises: a reservation that cannot be
        aborted now expires at its deadline. The version, or None when nothing was aborted."""
        delay = 0.1
        for attempt in range(_RELEASE_ATTEMPTS):
            try:
                return self._resolve(reservations, policy, reason=reason, expired_by=None)
            except LakelogError as exc:
                # Readers wait at a pending reservation: worth a few seconds of trying (a log
                # damaged and mended meanwhile, a run of conflicts) before leaving it to expire.
                if attempt + 1 == _RELEASE_ATTEMPTS:
                    log.warning(
                        "%s: could not abort a reservation (%s): %s; it expires at its deadline",
                        self.client_id,
                        reason,
                        exc,
                    )
                    break
                time.sleep(delay)
                delay = min(2.0, delay * 2)
        return None

    def abort_expired(self, policy: RetryPolicy, now_ms: int | None = None) -> int | None:
        """Abort every pending reservation whose deadline passed (a writer that died); the
        version, or None when there was none. Raises what a commit raises."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        found = expired(self.log.latest(), now_ms)
        if not found:
            return None
        log.warning(
            "%s: aborting %d offset reservation(s) whose writer stopped renewing them, e.g. %s offsets %s..%s",
            self.client_id,
            len(found),
            found[0].tp,
            found[0].first,
            found[0].end - 1,
        )
        return self._resolve(found, policy, reason="its deadline passed", expired_by=now_ms)

    def extend(self, reservations: Sequence[Reservation], until_ms: int, policy: RetryPolicy) -> bool:
        """Move the deadline of ``reservations`` to ``until_ms`` (a heartbeat); False when
        one of them is no longer pending (nothing to keep alive)."""
        started = time.monotonic()
        alive = True

        def attempt() -> int:
            nonlocal alive
            state = self._latest(None, policy, started)
            if not all(holds(state, r) for r in reservations):
                alive = False
                return -1
            now_ms = int(time.time() * 1000)
            actions = extend_actions(reservations, until_ms, now_ms)
            tags = {TAG_OPERATION: "extend_reservation", TAG_CLIENT: self.client_id}
            return self._land(
                state.version,
                actions,
                attempt_info("EXTEND RESERVATION", tags),
                lambda winner: release_verdict(winner, reservations),
                [],
                policy,
                started,
            )

        self._replanning(
            attempt,
            policy,
            started,
            lambda version: f"a reservation heartbeat at version {version} had an unknown outcome",
        )
        return alive

    def _resolve(
        self, reservations: Sequence[Reservation], policy: RetryPolicy, *, reason: str, expired_by: int | None
    ) -> int | None:
        started = time.monotonic()
        done: int | None = None

        def attempt() -> int:
            nonlocal done
            state = self._latest(None, policy, started)
            live = [r for r in reservations if holds(state, r)]
            if expired_by is not None:
                # A heartbeat may have moved a deadline since it was judged.
                now_pending = {
                    (r.tp, r.slot): r.until_ms for tp in {r.tp for r in live} for r in state.pending_reservations(tp)
                }
                live = [r for r in live if now_pending.get((r.tp, r.slot), 0) < expired_by]
            if not live:
                return -1
            now_ms = int(time.time() * 1000)
            tags = {
                TAG_OPERATION: "abort_reservation",
                TAG_CLIENT: self.client_id,
                TAG_DETAILS: _json({"aborted": _ranges_json(live), "reason": reason}),
            }
            done = self._land(
                state.version,
                resolve_actions(live, now_ms, aborted=True),
                attempt_info("ABORT RESERVATION", tags),
                lambda winner: release_verdict(winner, live),
                [],
                policy,
                started,
            )
            return done

        self._replanning(
            attempt,
            policy,
            started,
            lambda version: f"aborting a reservation at version {version} had an unknown outcome",
        )
        return done

    # -- topic changes --------------------------------------------------------------

    def change_topics(
        self, plan: Callable[[dict[str, TopicMetadata], dict[str, str]], TopicChange], policy: RetryPolicy
    ) -> int:
        """Commit a topic metadata change planned against the latest topics.

        ``plan`` runs again after each conflict, so its validation (topic
        exists / does not exist) always runs against what commits. Deleting a
        topic removes all its files in the same commit. Returns the version.
        """
        started = time.monotonic()

        def attempt() -> int:
            state = self.log.latest()
            change = plan(dict(state.topics), dict(state.properties))
            check_writable(state.protocol, state.metadata, removes=change.delete_topic is not None)
            now_ms = int(time.time() * 1000)
            actions: list[Action] = [state.metadata.with_configuration(change.properties)]
            if change.delete_topic is not None:
                actions += [RemoveFile.of(f, now_ms, data_change=True) for f in state.topic_files(change.delete_topic)]
                operation = "DELETE"
                parameters: dict[str, Any] = {"predicate": f"[\"topic = '{change.delete_topic}'\"]"}
            else:
                operation = "SET TBLPROPERTIES"
                changed = {k: v for k, v in change.properties.items() if state.properties.get(k) != v}
                parameters = {"properties": _json(changed)}
            info = attempt_info(operation, change.tags, parameters=parameters)

            deleting = change.delete_topic
            return self._land(
                state.version,
                actions,
                info,
                lambda winner, deleting=deleting: topic_change_verdict(winner, deleting),
                [],
                policy,
                started,
            )

        return self._replanning(
            attempt,
            policy,
            started,
            lambda version: (
                f"a topic change put at version {version} had an unknown outcome; "
                "describe the topic to see whether it applied"
            ),
        )

    # -- maintenance ------------------------------------------------------------------

    def commit_maintenance(self, change: MaintenanceChange, read_version: int, policy: RetryPolicy) -> int:
        """Commit a maintenance step planned at ``read_version``; returns its version.

        Rebases over every winner that left its files and its topic alone.
        Raises MaintenanceConflictError when a winner removed one of its files
        or replaced its topic, CommitConflictError / DeliveryTimeoutError when
        versions kept being taken past ``policy`` (its new files are deleted
        in these cases: nothing of it is visible), CommitStateUnknownError when
        the outcome is unknown (its files are kept: the commit may reference
        them).
        """
        with self._lock:
            state = self.log.latest()
            check_writable(state.protocol, state.metadata, removes=bool(change.removed))
            actions: list[Action] = [*change.removed, *(f.add for f in change.added)]
            now_ms = int(time.time() * 1000)
            starts = sorted(change.log_starts.items())
            actions += [Txn(start_marker_id(change.topic_id, p), start, now_ms) for p, start in starts]
            actions += [
                Txn(lost_marker_id(change.topic_id, p, first), end, now_ms)
                for p, ranges in sorted(change.lost_ranges.items())
                for first, end in ranges
            ]
            info = attempt_info(
                change.operation,
                change.tags,
                parameters=change.parameters,
                metrics=change.metrics,
                isolation_level="SnapshotIsolation",
            )

            from urllib.parse import unquote

            removes = {unquote(f.path) for f in change.removed}
            markers = {start_marker_id(change.topic_id, p): start for p, start in starts}
            started = time.monotonic()
            try:
                return self._land(
                    read_version,
                    actions,
                    info,
                    lambda winner: maintenance_verdict(winner, removes, change.topic, change.topic_id, markers),
                    list(change.added),
                    policy,
                    started,
                )
            except _Replan as lost:
                self._discard(change.added)
                raise MaintenanceConflictError(
                    f"{change.operation.lower()} of topic {change.topic!r} lost to a concurrent commit: "
                    f"{lost.verdict.reason}; nothing of it was committed",
                    attempts=1,
                ) from None
            except _OutcomeUnknown as unknown:
                raise CommitStateUnknownError(
                    f"the {change.operation.lower()} commit put at version {unknown.version} of topic "
                    f"{change.topic!r} had an unknown outcome; its files were kept"
                ) from unknown

    def record_operation(
        self,
        operation: str,
        *,
        parameters: Mapping[str, Any],
        metrics: Mapping[str, Any],
        policy: RetryPolicy,
    ) -> int:
        """Commit only a ``commitInfo`` naming ``operation``: Delta's record of work done
        outside the log (VACUUM START / VACUUM END, as Spark and delta-rs write them), so
        ``DESCRIBE HISTORY`` shows it. Returns its version.

        It changes nothing, so it rebases over every winner but a protocol change, after
        which the table is checked again (a protocol this core does not implement is never
        written). Raises CommitConflictError / DeliveryTimeoutError when versions kept being
        taken past ``policy`` (nothing committed), CommitStateUnknownError when the outcome
        is unknown, UnsupportedTableFeatureError for such a protocol.
        """
        started = time.monotonic()
        tags = {TAG_OPERATION: operation.lower().replace(" ", "_"), TAG_CLIENT: self.client_id}

        def attempt() -> int:
            state = self.log.latest()
            check_writable(state.protocol, state.metadata)
            info = attempt_info(
                operation, tags, parameters=parameters, metrics=metrics, isolation_level="SnapshotIsolation"
            )

            return self._land(state.version, [], info, record_verdict, [], policy, started)

        return self._replanning(
            attempt,
            policy,
            started,
            lambda version: (
                f"the {operation} commit put at version {version} had an unknown outcome; "
                "read the table's history to see whether it landed"
            ),
        )

    def _replanning(
        self, attempt: Callable[[], int], policy: RetryPolicy, started: float, unknown: Callable[[int], str]
    ) -> int:
        """``attempt`` (plan against the latest state, then land) until it lands; after a
        winner it cannot rebase over it backs off and plans again, within ``policy``. An
        unknown outcome raises CommitStateUnknownError saying ``unknown(version)``."""
        with self._lock:
            failures = 0
            while True:
                try:
                    return attempt()
                except _Replan:
                    failures += 1
                    self._back_off(policy, failures, started)
                except _OutcomeUnknown as exc:
                    raise CommitStateUnknownError(unknown(exc.version)) from exc

    # -- the one put-if-absent loop ------------------------------------------------------

    def _land(
        self,
        read_version: int,
        actions: Sequence[Action],
        info: Callable[[int], CommitInfo],
        verdict: Callable[[Commit], Verdict],
        written: Sequence[DataFile],
        policy: RetryPolicy,
        started: float,
        pending: _Pending | None = None,
        on_landed: Callable[[int], None] | None = None,
        linked: Callable[[], None] | None = None,
    ) -> int:
        """Put the commit at ``read_version + 1``, rebasing over winners the rule allows.

        Returns the version it landed at, after calling ``on_landed(version)`` between the view's
        advance and the checksum (:meth:`_after_commit`). Raises _Replan (nothing of it
        landed), _OutcomeUnknown, _PendingLanded (a winner was our earlier
        attempt with an unknown outcome), DataWriteError, StoreFullError or
        StoreAccessError (the commit file could not be written: nothing
        landed; ``written`` is deleted), ``linked()`` is called once the commit file is in
        place, before it is durable (the committer's turn ends there),
        CommitConflictError / DeliveryTimeoutError (rebased past the policy:
        nothing landed; ``written`` is deleted).
        """
        version = read_version + 1
        rebases = 0
        body = encode_actions(actions) if actions else b""  # only the commitInfo line changes per version
        # Files written unsynced are synced with the commit file, in one round before it appears.
        unsynced = [f.full_path for f in written if not f.synced]
        while True:
            commit_info_ = info(version)
            commit = Commit((commit_info_, *actions))
            prepared: list[PreparedState | None] = []
            try:
                landed = self.log.files.put_commit(
                    version,
                    sealed_commit(commit_info_, body),
                    unsynced,
                    linked,
                    lambda: prepared.append(self.log.prepare(version, commit)),  # noqa: B023 (called in the put)
                )
            except CommitNotDurableError:
                raise  # visible but maybe not durable: never acknowledged, files kept
            except CommitStateUnknownError as exc:
                landed = self._settle(version, commit_info_.txn_id or "", exc)
            except OSError as exc:
                self._discard(written)
                raise write_failure(exc, f"writing commit {version}") from exc
            if landed:
                self._after_commit(version, commit, on_landed, prepared[0] if prepared else None)
                return version
            log.debug("%s: version %s was taken by another commit", self.client_id, version)
            # Judge every winner up to the first free version before putting again: a
            # large commit (a maintenance step) would otherwise be written once per winner.
            while True:
                winner = self.log.read_commit(version)
                if winner is None:
                    break
                self.log.advance(version, winner)
                earlier = None if pending is None or version != pending.version else pending.landed(winner.txn_id)
                if earlier is not None:
                    self._discard(written)
                    raise _PendingLanded(earlier)
                judged = verdict(winner)
                if judged.resolution is not Resolution.REBASE:
                    raise _Replan(judged)
                rebases += 1
                if rebases > policy.max_rebases or policy.timed_out(started, time.monotonic()):
                    self._discard(written)
                    raise retries_exhausted(policy, policy.retries + 1, started)
                version += 1

    def _settle(self, version: int, txn_id: str, cause: BaseException) -> bool:
        """After a put of ``version`` whose response was lost: True if our commit is there.

        If the version is still empty, an empty commit takes it, so the lost
        request can never land later; then the version holds ours or not.
        Raises _OutcomeUnknown when even that cannot be done.
        """
        for _ in range(_SETTLE_ATTEMPTS):
            try:
                found = self.log.files.read_commit(version)
                if found is not None:
                    return found.txn_id == txn_id
                marker = commit_info(
                    "LAKELOG SETTLE",
                    version - 1,
                    now_ms=int(time.time() * 1000),
                    tags={TAG_OPERATION: "settle", TAG_CLIENT: self.client_id},
                    blind_append=True,
                )
                if self.log.files.put_commit(version, encode_actions([marker])):
                    log.warning(
                        "%s: took version %s with an empty commit after a lost response",
                        self.client_id,
                        version,
                    )
                    self._after_commit(version, Commit((marker,)))
                    return False
            except (OSError, CommitStateUnknownError, CorruptLogError) as exc:
                cause = exc
                time.sleep(0.05)
        raise _OutcomeUnknown(version, txn_id, cause)

    # -- post-commit hooks -------------------------------------------------------------

    def _after_commit(
        self,
        version: int,
        commit: Commit,
        landed: Callable[[int], None] | None = None,
        prepared: PreparedState | None = None,
    ) -> None:
        """The view update (``prepared`` taken if it still applies), ``landed(version)``, the
        checksum, a checkpoint every delta.checkpointInterval. The checksum only saves readers
        work (it is derived from the log), so whoever waits for the commit is told before it is
        written."""
        state = self.log.advance(version, commit, prepared)
        if landed is not None:
            landed(version)
        if prepared is not None and state is prepared.state and prepared.checksum_file is not None:
            self.log.files.write_checksum(version, prepared.checksum_file)
        else:
            checksum = None if state is None else state.checksum
            if checksum is None:  # this process did not follow the chain: derive it from the file
                previous = self.log.files.read_checksum(version - 1)
                checksum = None if previous is None else next_checksum(previous, [a.to_json() for a in commit.actions])
                if checksum is not None and state is not None and state_disagreement(checksum, state) is not None:
                    checksum = None  # derived from a .crc that disagrees with the log: never pass it on
            if checksum is not None:
                with contextlib.suppress(TypeError, ValueError):  # a .crc never fails a landed commit
                    self.log.files.write_checksum(version, checksum_file(checksum))
        interval = (state or self.log.current()).checkpoint_interval
        if version % interval == 0:
            request_checkpoint(self.uri, version)


class _AlreadyCommitted(Exception):
    """The batch's app transaction was committed by another run of it."""


class _Heartbeat:
    """Keeps reservations alive while their files are written: every third of the timeout
    their deadline moves to now + timeout (one small commit), until the block ends or they
    are no longer pending."""

    def __init__(
        self, committer: Committer, reservations: Sequence[Reservation], timeout_ms: int, policy: RetryPolicy
    ) -> None:
        self._committer = committer
        self._reservations = list(reservations)
        self._timeout_ms = timeout_ms
        self._policy = policy
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lakelog-reservation-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._timeout_ms / 3000):
            try:
                until_ms = int(time.time() * 1000) + self._timeout_ms
                if not self._committer.extend(self._reservations, until_ms, self._policy):
                    log.warning(
                        "%s: a reservation is no longer pending; its write will fail", self._committer.client_id
                    )
                    return
            except LakelogError as exc:  # the next beat tries again; the deadline is a third away at worst
                log.warning("%s: reservation heartbeat failed: %s", self._committer.client_id, exc)


def _ranges_json(reservations: Iterable[Reservation]) -> list[list[Any]]:
    """Reserved ranges as the tags' ranges are written: [topic, partition, first, end]."""
    return [[r.tp.topic, r.tp.partition, r.first, r.end] for r in sorted(reservations, key=lambda r: r.tp)]


def attempt_info(operation: str, tags: Mapping[str, str], **fields: Any) -> Callable[[int], CommitInfo]:
    """The ``commitInfo`` of one commit attempt, for the version it is put at: one ``txnId``
    for the attempt (how a lost response is recognized as its own), the time of each put, and
    ``fields`` as :func:`engine.commit.info.commit_info` takes them."""
    txn_id = str(new_uuid())

    def info(version: int) -> CommitInfo:
        return commit_info(operation, version - 1, now_ms=int(time.time() * 1000), tags=tags, txn_id=txn_id, **fields)

    return info


def end_markers(state: TableState, starts: Mapping[TopicPartition, int]) -> dict[str, int]:
    """The end marker id of each partition in ``starts`` mapped to its start offset (what an
    append's conflict rule checks a winner's markers against)."""
    return {
        end_marker_id(state.topics[tp.topic].topic_id, tp.partition): start
        for tp, start in starts.items()
        if tp.topic in state.topics
    }


class _PendingLanded(Exception):
    def __init__(self, result: AppendResult) -> None:
        super().__init__("an earlier attempt landed")
        self.result = result


def _json(value: object) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


# -- creating a table -------------------------------------------------------------------


def create_table(
    uri: str,
    schema_string: str,
    partition_columns: Sequence[str],
    properties: Mapping[str, str],
    *,
    client_id: str,
) -> bool:
    """Create the table at ``uri`` (commit 0: protocol and metadata) and its checksum.

    False when another process created it first. Raises OSError when nothing
    could be written, CommitStateUnknownError when it is not known.
    """
    files = LogFiles(uri)
    if "://" not in uri:
        # The store root and _delta_log/ are synced into their parents: commit 0 must
        # survive a power loss along with every directory entry leading to it.
        make_directories(files.log_dir)
    now_ms = int(time.time() * 1000)
    metadata = Metadata(str(uuid.uuid4()), schema_string, tuple(partition_columns), dict(properties), now_ms)
    protocol = DeltaProtocol(1, 2)
    info = commit_info(
        "CREATE TABLE",
        -1,
        now_ms=now_ms,
        tags={TAG_OPERATION: "create_store", TAG_CLIENT: client_id},
        parameters={
            "partitionBy": _json(list(partition_columns)),
            "isManaged": "false",
            "properties": _json(dict(properties)),
        },
        blind_append=True,
    )
    info = CommitInfo({k: v for k, v in info.values.items() if k != "readVersion"})
    if not files.put_commit(0, encode_actions([info, protocol, metadata])):
        return False
    with contextlib.suppress(TypeError, ValueError):  # a checksum only saves readers work
        files.write_checksum(
            0,
            checksum_file(
                initial_checksum(metadata.to_json()["metaData"], protocol.to_json()["protocol"], info.txn_id or "")
            ),
        )
    return True


def describe_bounds(files: Iterable[FileStats]) -> dict[TopicPartition, OffsetRange]:
    """The offset range each partition holds in ``files`` (one commit's adds)."""
    bounds, _ = partition_bounds(files)
    return {tp: OffsetRange(tp, b.start, b.end) for tp, b in bounds.items()}
