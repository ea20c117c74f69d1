"""The optimistic-commit writer: every append and topic change of the log table.

An append, attempt by attempt:

1. start a Delta transaction at the latest version V;
2. bring the writer's :class:`LogView` to V (nothing to do when the last
   commit at V was its own; otherwise read the commit files in between);
3. plan offsets from the view's end offsets, have Spark write the data
   files, check the files carry exactly the planned offsets;
4. record a read of the target partitions and commit.

A concurrent commit that added files to one of those partitions makes Delta
fail the commit with a conflict; nothing became visible, so the attempt is
retried from (1) within the :class:`RetryPolicy`. A commit call that fails
in any other way may still have landed: the writer looks for its own data
files in the commits after V, and reports :class:`CommitStateUnknownError`
only if it cannot tell.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame

from engine.commit_info import append_tags, user_metadata
from engine.data_files import DataFile, DataFileWriter
from engine.delta_jvm import (
    JVM_ERRORS,
    DeltaTableHandle,
    DeltaTxn,
    WrittenFiles,
    is_conflict,
    java_class_chain,
    java_message,
    topic_predicate,
)
from engine.delta_log import DeltaLogReader, ViewTracker
from engine.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    DeliveryTimeoutError,
    InconsistentWriteError,
    InvalidTxnStateError,
    LakelogError,
    RetriableError,
    error_from_text,
)
from engine.log_view import CommitChanges, LogView, parse_commit
from engine.offsets import (
    FileStats,
    OffsetRange,
    TopicPartition,
    counts_by_partition,
    partition_bounds,
    plan_ranges,
    verify_written,
)
from engine.topics import TopicMetadata

log = logging.getLogger(__name__)


class DataWriteError(RetriableError):
    """Writing the data files or the commit failed; nothing was committed."""


class _OutcomeUnknown(Exception):
    """A commit call failed in a way that does not tell whether it landed."""


def commit_sets_app(lines: Iterable[str], app: AppTransaction) -> bool:
    """Whether a commit file's JSON lines hold the ``txn`` action of ``app``."""
    for line in lines:
        if '"txn"' not in line:
            continue
        txn = json.loads(line).get("txn")
        if txn and txn.get("appId") == app.app_id and int(txn.get("version", -1)) == app.version:
            return True
    return False


def plan_ranges_of(files: Iterable[FileStats]) -> dict[TopicPartition, OffsetRange]:
    """The offset range each partition received from ``files`` (one commit's adds)."""
    bounds, _ = partition_bounds(files)
    return {tp: OffsetRange(tp, b.start, b.end) for tp, b in bounds.items()}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a conflicting commit is retried.

    ``retries`` bounds the number of retries after the first attempt and
    ``timeout_ms`` (when set) the total time; backoff doubles from
    ``backoff_ms`` up to ``backoff_max_ms`` with 20% jitter, as Kafka's
    ``retry.backoff.ms`` / ``retry.backoff.max.ms``.
    """

    retries: int = 10
    backoff_ms: int = 100
    backoff_max_ms: int = 1000
    timeout_ms: int | None = None

    def delay_s(self, retry: int, rng: random.Random) -> float:
        base = min(self.backoff_max_ms, self.backoff_ms * (2 ** max(0, retry - 1)))
        return base * rng.uniform(0.8, 1.2) / 1000.0

    def exhausted(self, conflicts: int, started: float, now: float) -> bool:
        """Whether, after ``conflicts`` failed attempts, no further attempt may be made."""
        if conflicts > self.retries:
            return True
        return self.timeout_ms is not None and (now - started) * 1000 >= self.timeout_ms


def retries_exhausted(policy: RetryPolicy, conflicts: int, started: float) -> LakelogError:
    """The error for an append that may not be attempted again (nothing was committed)."""
    elapsed_ms = int((time.monotonic() - started) * 1000)
    if conflicts <= policy.retries:
        return DeliveryTimeoutError(
            f"commit not done after {elapsed_ms} ms ({conflicts} conflicting attempts); nothing was committed"
        )
    return CommitConflictError(
        f"commit conflicted with concurrent writers {conflicts} times (retries={policy.retries}); "
        "nothing was committed, the call can be repeated",
        attempts=conflicts,
    )


@dataclass(frozen=True)
class AppTransaction:
    """Delta's application transaction id (``txn`` action: appId, version) a commit sets.

    A commit carrying ``(app_id, version)`` is only made while the table's
    latest version for ``app_id`` is below ``version``; so an attempt whose
    outcome was unknown is retried without ever committing twice (Kafka's
    idempotent producer), and a newer holder of ``app_id`` fences older ones.
    """

    app_id: str
    version: int
    # The batch's check() picks the version from the committed one in every
    # attempt (an epoch bump), so a higher committed version is not "landed".
    replan: bool = False


class AppendBatch(Protocol):
    """Records to append in one commit."""

    operation: str
    # The app transaction the commit sets, or None (then an unknown outcome
    # is resolved by looking for the batch's own files in later commits).
    app_transaction: AppTransaction | None
    # Commit even with no records (a transaction that only moves offsets or
    # bumps an epoch).
    commit_when_empty: bool

    def prepare(self, view: LogView) -> Mapping[TopicPartition, int] | None:
        """Validate against the view's topics; the record count per partition if known now.

        A batch whose counts are only known after Spark wrote it returns None.
        """

    def check(self, committed_app_version: int, view: LogView) -> None:
        """Raise a FatalError if the batch must not commit at ``view`` (fencing).

        ``committed_app_version`` is the table's version of the batch's app
        transaction (-1 if none or no app transaction). Runs in every attempt
        after the read is recorded, so what it checked cannot change unseen.
        """

    def target_partitions(self, view: LogView) -> list[TopicPartition]:
        """Every partition the batch may write to."""

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> DataFrame | pa.Table:
        """The rows to write, each partition's numbered from its end offset in ``ends``.

        A DataFrame is written by Spark; an Arrow table (rows grouped by
        partition, in offset order) is written from the driver.
        """


def check_attempt(
    batch: AppendBatch, committed_app: int, view: LogView
) -> tuple[AppTransaction | None, Mapping[TopicPartition, int] | None, bool]:
    """One attempt's checks: the app transaction to set, the expected counts, and
    whether there is nothing to commit. Raises what the batch refuses (fencing)."""
    batch.check(committed_app, view)  # may raise (fenced), may re-plan the app version
    app = batch.app_transaction
    if app is not None and not app.replan and committed_app >= app.version:
        raise InvalidTxnStateError(
            f"application transaction {app.app_id!r} is already at version {committed_app}; "
            f"version {app.version} was never committed by this writer"
        )
    expected = batch.prepare(view)
    nothing = expected is not None and not any(expected.values()) and not batch.commit_when_empty
    return app, expected, nothing


@dataclass(frozen=True)
class AppendResult:
    version: int | None  # None when the batch had nothing to commit
    ranges: dict[TopicPartition, OffsetRange]
    append_time_ms: int
    attempts: int


class Appender(Protocol):
    """What commits an :class:`AppendBatch`: :class:`LogWriter` (through Delta's JVM
    transaction) or :class:`engine.direct_commit.DirectCommitter` (without a JVM)."""

    def append(self, batch: AppendBatch, policy: RetryPolicy) -> AppendResult: ...


@dataclass(frozen=True)
class TopicChange:
    """A planned change of topic metadata: the table's new configuration."""

    properties: dict[str, str]
    tags: dict[str, str]
    delete_topic: str | None = None


class LogWriter:
    """Commits appends and topic changes. One thread at a time per writer."""

    def __init__(
        self,
        table: DeltaTableHandle,
        reader: DeltaLogReader,
        *,
        client_id: str,
        scan_end_offsets: Callable[[int, Iterable[TopicPartition]], dict[TopicPartition, int]],
        seed: int | None = None,
    ) -> None:
        self.table = table
        self.reader = reader
        self.client_id = client_id
        self._scan_end_offsets = scan_end_offsets
        self._files = DataFileWriter(table.uri)
        self._views = ViewTracker(reader)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    # -- the view ---------------------------------------------------------

    def view_at(self, version: int) -> LogView:
        """The writer's view brought to ``version`` (reading only what it lacks)."""
        return self._views.at(version)

    def _ends_for(self, view: LogView, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        ends = {tp: view.end_offset(tp) for tp in tps}
        unknown = [tp for tp in tps if tp in view.unknown_ends]
        if unknown:
            ends.update(self._scan_end_offsets(view.version, unknown))
        return ends

    # -- appends -----------------------------------------------------------

    def append(self, batch: AppendBatch, policy: RetryPolicy) -> AppendResult:
        """Commit ``batch`` with dense offsets after each partition's end offset.

        Raises CommitConflictError when retries are exhausted (nothing was
        committed), CommitStateUnknownError when a commit may have landed
        but it cannot be told, FatalError subclasses for invalid batches.
        """
        with self._lock:
            return self._append(batch, policy)

    def _append(self, batch: AppendBatch, policy: RetryPolicy) -> AppendResult:
        started = time.monotonic()
        failures = 0  # conflicts, and attempts whose outcome was unknown
        since: int | None = None  # read version of the first attempt
        unknown: BaseException | None = None  # why the last attempt's outcome is unknown
        last_plan: dict[TopicPartition, OffsetRange] = {}
        append_time_ms = 0
        while True:
            txn, view = self._start()
            since = txn.read_version if since is None else since
            app = batch.app_transaction
            committed_app = self._app_version(txn, view, app)
            if app is not None and unknown is not None and committed_app >= app.version:
                landed = self._find_landed(app, since)
                if landed is not None:
                    return self._landed_result(app, landed, last_plan, append_time_ms, failures + 1)
            app, expected, nothing = check_attempt(batch, committed_app, view)
            if nothing:
                return AppendResult(None, {}, 0, failures + 1)
            ends = self._ends_for(view, batch.target_partitions(view))
            append_time_ms = int(time.time() * 1000)
            written, direct = self._write(txn, batch.build(ends, view.topics, append_time_ms))
            counts = counts_by_partition(written.stats)
            if expected is not None and counts != {tp: n for tp, n in expected.items() if n}:
                raise InconsistentWriteError(f"planned {dict(expected)} records per partition, files hold {counts}")
            if not counts and not batch.commit_when_empty:
                return AppendResult(None, {}, append_time_ms, failures + 1)
            last_plan = plan_ranges(ends, counts)
            verify_written(last_plan, written.stats)
            if last_plan:
                txn.track_partitions(last_plan)
            extra = [] if app is None else [txn.set_transaction(app.app_id, app.version, append_time_ms)]
            tags = append_tags(batch.operation, self.client_id, last_plan)
            operation = self.table.append_operation(user_metadata(tags))
            try:
                version = self._commit(txn, written, operation, tags, extra, resolve=app is None)
            except _OutcomeUnknown as exc:
                unknown = exc.__cause__
                version = None
            if version is None:
                if unknown is None:
                    self._files.discard(direct)
                failures += 1
                self._back_off(policy, failures, started, app if unknown is not None else None)
                continue
            own = CommitChanges(None, tuple(written.stats), {app.app_id: app.version} if app else {})
            self._applied_own_commit(txn.read_version, version, own)
            return AppendResult(version, last_plan, append_time_ms, failures + 1)

    def _write(self, txn: DeltaTxn, rows: DataFrame | pa.Table) -> tuple[WrittenFiles, list[DataFile]]:
        """Write the batch's data files (not yet committed)."""
        try:
            if isinstance(rows, pa.Table):
                files = self._files.write(rows)
                return txn.add_files([f.add_json for f in files], [f.stats for f in files]), files
            return txn.write_files(rows), []
        except JVM_ERRORS as exc:
            message = java_message(exc)
            raise error_from_text(message) or DataWriteError(
                f"writing data files failed, nothing was committed: {message}"
            ) from exc
        except OSError as exc:
            raise DataWriteError(f"writing data files failed, nothing was committed: {exc}") from exc

    def _app_version(self, txn: DeltaTxn, view: LogView, app: AppTransaction | None) -> int:
        """The app transaction's version at the view, recording the read in ``txn``."""
        if app is None:
            return -1
        try:
            txn.read_app(app.app_id)
            if app.app_id in view.app_versions:
                return view.app_versions[app.app_id]
            return self.reader.transaction_version(app.app_id, view.base_version)
        except Exception as exc:  # py4j or delta-rs: either way nothing was committed yet
            raise DataWriteError(f"reading the Delta log failed, nothing was committed: {java_message(exc)}") from exc

    def _find_landed(self, app: AppTransaction, since: int) -> int | None:
        """The version after ``since`` whose commit sets ``app``, or None if none does."""
        try:
            for v in range(since + 1, self.reader.latest_version() + 1):
                lines = self.reader.read_commit_lines(v)
                if lines is None:
                    raise CommitStateUnknownError(
                        f"{app} may have committed, but commit {v} is no longer readable (log cleanup); "
                        "read the log to see where its records are"
                    )
                if commit_sets_app(lines, app):
                    return v
        except (OSError, ValueError) as exc:
            raise CommitStateUnknownError(f"could not read the log to see whether {app} committed: {exc}") from exc
        return None

    def _landed_result(
        self,
        app: AppTransaction,
        version: int,
        plan: dict[TopicPartition, OffsetRange],
        append_time_ms: int,
        attempts: int,
    ) -> AppendResult:
        """An earlier attempt with an unknown outcome landed as ``version``: check what it added."""
        lines = self.reader.read_commit_lines(version) or []
        landed = plan_ranges_of(parse_commit(lines).added)
        if landed != plan:
            raise InconsistentWriteError(f"commit {version} of {app} holds {landed}, the attempt planned {plan}")
        return AppendResult(version, plan, append_time_ms, attempts)

    def _start(self) -> tuple[DeltaTxn, LogView]:
        """A new transaction at the latest version, and the view at that version."""
        try:
            txn = self.table.start()
            return txn, self.view_at(txn.read_version)
        except JVM_ERRORS as exc:
            raise DataWriteError(f"reading the Delta log failed, nothing was committed: {java_message(exc)}") from exc

    def _back_off(
        self, policy: RetryPolicy, conflicts: int, started: float, unknown: AppTransaction | None = None
    ) -> None:
        """Wait before the next attempt, or raise when the policy allows none.

        After an attempt with an unknown outcome (``unknown`` is its app
        transaction) the budget still bounds retries, but the caller must
        then be told that the outcome is unknown rather than "nothing
        committed" -- unless the log says it did not land.
        """
        if policy.exhausted(conflicts, started, time.monotonic()):
            if unknown is not None:
                raise CommitStateUnknownError(
                    f"a commit of {unknown} failed with an unknown outcome and retries ran out; "
                    "re-read the log to see whether it landed"
                )
            raise retries_exhausted(policy, conflicts, started)
        time.sleep(policy.delay_s(conflicts, self._rng))

    def _commit(
        self,
        txn: DeltaTxn,
        actions: WrittenFiles,
        operation: Any,
        tags: Mapping[str, str],
        extra: list[Any],
        *,
        resolve: bool,
    ) -> int | None:
        """Commit; the new version, or None on a conflict (nothing committed).

        Any other failure may have landed: with ``resolve`` the log is searched
        for the attempt's files now; otherwise _OutcomeUnknown is raised and
        the caller's next attempt finds out through its app transaction.
        """
        try:
            return txn.commit(actions, operation, tags, extra)
        except JVM_ERRORS as exc:
            chain = java_class_chain(exc)
            if is_conflict(chain):
                log.debug("commit conflict at read version %s: %s", txn.read_version, chain[:1])
                return None
            if not resolve:
                raise _OutcomeUnknown() from exc
            found = self._find_own_commit(txn.read_version, [f.path for f in actions.stats], exc)
            if found is None:
                raise DataWriteError(f"commit failed and did not land: {java_message(exc)}") from exc
            return found

    def _find_own_commit(self, read_version: int, paths: list[str], cause: BaseException) -> int | None:
        """After a failed commit call: the version that holds our files, or None if none does."""
        try:
            latest = self.reader.latest_version()
            wanted = set(paths)
            for v in range(read_version + 1, latest + 1):
                lines = self.reader.read_commit_lines(v)
                if lines is None:
                    raise CommitStateUnknownError(f"commit {v} is no longer readable")
                if any(path in line for line in lines for path in wanted):
                    return v
        except CommitStateUnknownError:
            raise
        except Exception as exc:
            raise CommitStateUnknownError(
                f"a commit failed ({java_message(cause)}) and the log could not be re-read to find out "
                f"whether it landed ({exc}); read the log before retrying"
            ) from exc
        if not paths:
            raise CommitStateUnknownError(f"a commit without data files failed: {java_message(cause)}")
        return None

    def _applied_own_commit(self, read_version: int, version: int, changes: CommitChanges) -> None:
        self._views.applied_own_commit(read_version, version, changes)

    # -- topic metadata ----------------------------------------------------

    def change_topics(
        self, plan: Callable[[dict[str, TopicMetadata], dict[str, str]], TopicChange], policy: RetryPolicy
    ) -> int:
        """Commit a topic metadata change planned against the latest topics.

        ``plan`` is called again after each conflict, so its validation
        (topic exists / does not exist) always runs against what commits.
        """
        with self._lock:
            started = time.monotonic()
            conflicts = 0
            while True:
                txn, view = self._start()
                properties = txn.configuration()
                change = plan(dict(view.topics), properties)
                actions: list[Any] = []
                if change.delete_topic is not None:
                    actions = txn.removes(txn.files_of_topic(change.delete_topic))
                    operation = self.table.delete_operation(
                        topic_predicate(change.delete_topic), user_metadata(change.tags)
                    )
                else:
                    changed = {k: v for k, v in change.properties.items() if properties.get(k) != v}
                    operation = self.table.set_properties_operation(changed)
                txn.update_configuration(change.properties)
                version = self._commit_metadata(txn, actions, operation, change.tags)
                if version is None:
                    conflicts += 1
                    self._back_off(policy, conflicts, started)
                    continue
                self._applied_own_commit(txn.read_version, version, CommitChanges(dict(change.properties), ()))
                return version

    def _commit_metadata(
        self, txn: DeltaTxn, actions: list[Any], operation: Any, tags: Mapping[str, str]
    ) -> int | None:
        try:
            return txn.commit(actions, operation, tags)
        except JVM_ERRORS as exc:
            if is_conflict(java_class_chain(exc)):
                return None
            raise CommitStateUnknownError(
                f"topic metadata commit failed ({java_message(exc)}); describe the topic to see whether it applied"
            ) from exc
