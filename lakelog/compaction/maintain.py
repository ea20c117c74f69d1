"""``maintain``: run what each topic's configuration asks for, then VACUUM and log cleanup.

Per topic, in this order, each step one Delta commit planned on a fresh
snapshot (so live producers, sinks and streams keep running):

1. retention (``cleanup.policy`` has ``delete``): the oldest whole files past
   ``retention.ms`` / ``retention.bytes`` go; the log start offset advances;
2. log compaction (``cleanup.policy`` has ``compact``): the cleanable prefix
   keeps the latest record per key (:mod:`compaction.log_cleaner`);
3. OPTIMIZE: runs of small files become files near ``segment.bytes``
   (``dataChange=false``: no reader sees a change).

Before them, files whose offset ranges overlap (left by a plain Delta
OPTIMIZE) are rewritten in offset order (``dataChange=false``), since the
three steps above assume disjoint ranges; a partition that still overlaps
when a step plans (a foreign OPTIMIZE landed meanwhile) is left out of it.

Then VACUUM deletes files no snapshot within ``delta.deletedFileRetentionDuration``
(default 7 days) references, and expired Delta log files are cleaned up
(``delta.logRetentionDuration``, up to the last checkpoint). A step that
loses to a concurrent maintenance run is planned again (at most
``replans`` times), then reported as skipped; nothing is ever half applied.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from lakelog.compaction.files import PartitionLog, partition_logs
from lakelog.compaction.plan import cleanable_files, compaction_bins, optimize_bins, overlapping_runs, retention_victims
from lakelog.compaction.rewrite import CompactTask, OptimizeTask, TaskResult, run_compact, run_optimize, run_tasks
from lakelog.compaction.step import MaintenanceStep, commit_step
from lakelog.engine.commit import Committer, RetryPolicy, TableLog, normalize_uri
from lakelog.engine.commit.delta_table import open_delta_table, with_listing_retries
from lakelog.engine.errors import (
    CommitConflictError,
    CorruptLogError,
    DeliveryTimeoutError,
    InvalidConfigError,
    MaintenanceConflictError,
    StoreError,
    UnknownTopicOrPartitionError,
    error_for_os_error,
)
from lakelog.engine.storage.object_store import filesystem
from lakelog.engine.topics import STORE_FORMAT_PROPERTY, TopicMetadata, TopicPartition, topics_from_properties
from lakelog.store import Store

log = logging.getLogger("lakelog.maintain")

POLICY = RetryPolicy(retries=20, backoff_ms=20, backoff_max_ms=500)


@dataclass
class TopicReport:
    """What maintenance did (or, in a dry run, would do) to one topic."""

    topic: str
    cleanup_policy: tuple[str, ...]
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    bytes_rewritten: int = 0
    records_removed_by_retention: int = 0
    records_removed_by_compaction: int = 0
    files_optimized: int = 0  # files fewer after OPTIMIZE
    files_deleted_by_retention: int = 0
    bytes_deleted_by_retention: int = 0
    planned_log_start: dict[int, int] = field(default_factory=dict)
    log_start_before: dict[int, int] = field(default_factory=dict)
    log_start_after: dict[int, int] = field(default_factory=dict)
    versions: list[int] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def bytes_reclaimed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)

    def line(self) -> str:
        moved = {p: s for p, s in self.log_start_after.items() if s != self.log_start_before.get(p, 0)}
        text = (
            f"{self.topic} [{','.join(self.cleanup_policy)}]: files {self.files_before} -> {self.files_after}, "
            f"bytes {self.bytes_before:,} -> {self.bytes_after:,} (rewritten {self.bytes_rewritten:,}, "
            f"reclaimed {self.bytes_reclaimed:,}), records removed: retention {self.records_removed_by_retention:,}, "
            f"compaction {self.records_removed_by_compaction:,}; "
            f"log start offsets {'unchanged' if not moved else 'now ' + _partition_map(moved)}"
        )
        if self.skipped:
            text += "; skipped: " + "; ".join(self.skipped)
        return text


@dataclass
class MaintenanceReport:
    dry_run: bool
    topics: list[TopicReport]
    vacuumed_files: int = 0
    log_files_cleaned: int = 0
    vacuum_skipped: str | None = None

    def lines(self) -> list[str]:
        head = "dry run: nothing was changed; this is what maintain would do" if self.dry_run else "maintenance done"
        out = [head, *(t.line() for t in self.topics)]
        if self.vacuum_skipped:
            out.append(f"vacuum: skipped: {self.vacuum_skipped}")
            return out
        out.append(
            f"vacuum: {self.vacuumed_files} unreferenced file(s) {'to delete' if self.dry_run else 'deleted'}; "
            f"delta log: {self.log_files_cleaned} expired file(s) removed"
        )
        return out


def _partition_map(values: dict[int, int]) -> str:
    return ", ".join(f"{p}:{v}" for p, v in sorted(values.items()))


@dataclass
class _Context:
    uri: str
    log: TableLog
    committer: Committer
    now_ms: int
    dry_run: bool
    spark: Any | None
    client_id: str
    policy: RetryPolicy
    progress: Callable[[str], None]


def maintain(
    store: str | os.PathLike[str] | Store,
    *,
    topics: Iterable[str] | None = None,
    dry_run: bool = False,
    optimize: bool = True,
    vacuum: bool = True,
    vacuum_retention_hours: float | None = None,
    now_ms: int | None = None,
    spark: Any | None = None,
    progress: Callable[[str], None] | None = None,
    client_id: str = "lakelog-maintain",
    replans: int = 3,
    policy: RetryPolicy = POLICY,
) -> MaintenanceReport:
    """Apply retention, log compaction and OPTIMIZE to ``topics`` (all, incl. ``__consumer_offsets``,
    when None) of the store at ``store`` (a path/URI or a Store), then VACUUM.

    Guarantees: offsets, order, timestamps and headers of kept records never
    change; a partition's end offset never moves; each step is one atomic
    commit or nothing. With a SparkSession (``spark``, or one a Store
    already has), partitions are rewritten by Spark tasks, else in this
    process; Spark is never started for it.
    ``vacuum_retention_hours`` overrides ``delta.deletedFileRetentionDuration``
    (0 deletes every unreferenced file at once: only safe when no reader is
    behind; a whole number of hours). ``now_ms`` fixes the clock (tests).
    VACUUM whose own commit keeps losing to concurrent writers is skipped and
    the report says so (``vacuum_skipped``). Raises InvalidConfigError for a
    negative or fractional retention, StoreError when the path holds no
    lakelog store or VACUUM cannot read the log, StoreFullError when the
    storage has no space left (StoreAccessError when it refuses a write; the
    step being written commits nothing), UnknownTopicOrPartitionError for an
    unknown topic.
    """
    uri = normalize_uri(getattr(store, "uri", store))
    if spark is None and getattr(store, "spark_started", False):
        spark = store.spark
    if vacuum_retention_hours is not None and vacuum_retention_hours < 0:
        raise InvalidConfigError(f"vacuum retention must be >= 0 hours, got {vacuum_retention_hours}")
    if vacuum_retention_hours is not None and vacuum_retention_hours != int(vacuum_retention_hours):
        # delta-rs' VACUUM counts whole hours: 0.05 would silently become 0 (delete everything now).
        raise InvalidConfigError(
            f"vacuum retention must be a whole number of hours (VACUUM counts whole hours), "
            f"got {vacuum_retention_hours}"
        )
    table_log = store.log if hasattr(store, "log") else TableLog(uri)
    try:
        properties = table_log.latest().properties
    except CorruptLogError:
        raise  # a damaged log names its file; maintenance must not run on it
    except StoreError as exc:
        raise StoreError(f"{uri} holds no Delta table to maintain: {exc}") from exc
    if STORE_FORMAT_PROPERTY not in properties:
        raise StoreError(f"{uri} is a Delta table but not a lakelog store")
    known = topics_from_properties(properties)
    names = sorted(known) if topics is None else list(topics)
    for name in names:
        if name not in known:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    ctx = _Context(
        uri,
        table_log,
        Committer(table_log, client_id),
        int(time.time() * 1000) if now_ms is None else now_ms,
        dry_run,
        spark,
        client_id,
        policy,
        progress or (lambda text: log.info("%s", text)),
    )
    report = MaintenanceReport(dry_run, [])
    try:
        for name in names:
            report.topics.append(_maintain_topic(ctx, name, optimize, replans))
        if vacuum:
            report.vacuumed_files, report.log_files_cleaned, report.vacuum_skipped = _vacuum(
                ctx, vacuum_retention_hours
            )
    except OSError as exc:
        # A rewrite's Parquet write (pyarrow) or a listing failed: a full disk is StoreFullError here
        # as for a producer. Steps committed before it stay committed; the failed one commits nothing.
        raise error_for_os_error(exc, "maintain") from exc
    return report


def _snapshot(ctx: _Context, topic: str) -> tuple[int, TopicMetadata | None, dict[TopicPartition, PartitionLog]]:
    state = ctx.log.latest()
    meta = state.topics.get(topic)
    return state.version, meta, partition_logs(state, {topic}) if meta else {}


def _maintain_topic(ctx: _Context, topic: str, optimize: bool, replans: int) -> TopicReport:
    _, meta, logs = _snapshot(ctx, topic)
    assert meta is not None
    policy = tuple(meta.config_value("cleanup.policy"))
    report = TopicReport(topic, policy)
    report.files_before = sum(len(p.files) for p in logs.values())
    report.bytes_before = sum(p.size for p in logs.values())
    report.log_start_before = {tp.partition: p.start_offset or 0 for tp, p in logs.items() if p.files}
    unplannable = sorted(tp.partition for tp, p in logs.items() if p.unplannable)
    if unplannable:
        report.skipped.append(f"partitions {unplannable} have files without offset statistics")
    steps = [("sort", _plan_sort)]
    if "delete" in policy:
        steps.append(("retention", _plan_retention))
    if "compact" in policy:
        steps.append(("compact", _plan_compaction))
    if optimize:
        steps.append(("optimize", _plan_optimize))
    deleted: set[str] = set()  # dry run: files retention would delete
    for operation, plan in steps:
        for attempt in range(replans + 1):
            version, meta, logs = _snapshot(ctx, topic)
            if meta is None:
                report.skipped.append(f"{operation}: the topic was deleted meanwhile")
                return report
            logs = {tp: _without(p, deleted) for tp, p in logs.items() if not p.unplannable}
            if operation != "sort":
                overlapping = sorted(tp.partition for tp, p in logs.items() if overlapping_runs(p.files))
                if overlapping:
                    report.skipped.append(f"{operation}: partitions {overlapping} hold files whose offsets overlap")
                    logs = {tp: p for tp, p in logs.items() if tp.partition not in overlapping}
            ctx.progress(f"{topic}: {operation}, planning on version {version}")
            step = plan(ctx, meta, logs, report)
            if step is not None and ctx.dry_run:
                # Later steps plan as if this one had run: retention's files are
                # gone, a merged bin is one file (its first stands in for it).
                merging = step.operation != "retention"
                deleted |= {f.path for b in step.bins for f in (b[1:] if merging else b)}
            if step is None or ctx.dry_run:
                break
            try:
                landed = commit_step(ctx.committer, step, version, policy=ctx.policy)
            except MaintenanceConflictError as exc:
                _undo_counts(report, step)
                if attempt == replans:
                    report.skipped.append(f"{operation}: {exc}")
                else:
                    ctx.progress(f"{topic}: {exc}; planning again")
                continue
            report.versions.append(landed)
            ctx.progress(f"{topic}: {operation} committed as version {landed}")
            break
    _, _, logs = _snapshot(ctx, topic)
    report.files_after = sum(len(p.files) for p in logs.values())
    report.bytes_after = sum(p.size for p in logs.values())
    report.log_start_after = {tp.partition: p.start_offset or 0 for tp, p in logs.items() if p.files}
    if ctx.dry_run:
        _estimate_after(report)
    return report


def _without(plog: PartitionLog, paths: set[str]) -> PartitionLog:
    if not paths:
        return plog
    return PartitionLog(
        plog.tp,
        tuple(f for f in plog.files if f.path not in paths),
        plog.unplannable,
        plog.end,
        plog.start,
        tuple(f for f in plog.below_start if f.path not in paths),
    )


def _estimate_after(report: TopicReport) -> None:
    # Nothing was committed: estimate from the plan (compaction's and
    # OPTIMIZE's new file sizes are unknown until written).
    report.files_after = report.files_before - report.files_deleted_by_retention - report.files_optimized
    report.bytes_after = report.bytes_before - report.bytes_deleted_by_retention
    report.log_start_after = {**report.log_start_before, **report.planned_log_start}


def _undo_counts(report: TopicReport, step: MaintenanceStep) -> None:
    counts = step.details
    report.records_removed_by_retention -= counts.get("records_removed_by_retention", 0)
    report.records_removed_by_compaction -= counts.get("records_removed_by_compaction", 0)
    report.bytes_rewritten -= counts.get("bytes_rewritten", 0)
    report.files_optimized -= counts.get("files_optimized", 0)
    report.files_deleted_by_retention -= counts.get("files_deleted", 0)
    report.bytes_deleted_by_retention -= counts.get("bytes_deleted", 0)


def _plan_sort(
    ctx: _Context, meta: TopicMetadata, logs: dict[TopicPartition, PartitionLog], report: TopicReport
) -> MaintenanceStep | None:
    tasks = []
    for tp, plog in sorted(logs.items()):
        runs = overlapping_runs(plog.files)
        if runs:
            tasks.append(OptimizeTask(ctx.uri, tp, tuple(tuple(r) for r in runs), plog.end))
    if not tasks:
        return None
    files = sum(len(b) for t in tasks for b in t.bins)
    ctx.progress(
        f"{meta.name}: {files} file(s) of {len(tasks)} partition(s) overlap in offsets (a plain Delta OPTIMIZE?); "
        "rewriting them in offset order"
    )
    if ctx.dry_run:
        merged = files - sum(len(t.bins) for t in tasks)
        report.files_optimized += merged
        bins = [b for t in tasks for b in t.bins]
        step = MaintenanceStep("sort", meta.name, meta.topic_id, [f for b in bins for f in b], [], {})
        step.bins = bins
        return step
    return _step_from_results("sort", meta, run_tasks(tasks, run_optimize, ctx.spark), report, None)


def _plan_retention(
    ctx: _Context, meta: TopicMetadata, logs: dict[TopicPartition, PartitionLog], report: TopicReport
) -> MaintenanceStep | None:
    victims = []
    starts = {}
    for tp, plog in sorted(logs.items()):
        gone = retention_victims(
            plog.files,
            now_ms=ctx.now_ms,
            retention_ms=int(meta.config_value("retention.ms")),
            retention_bytes=int(meta.config_value("retention.bytes")),
        )
        if gone:
            victims += gone
            # Never below a start DeleteRecords set inside the first file left.
            starts[tp.partition] = max(plog.files[len(gone)].min_offset, plog.start or 0)
    # Files DeleteRecords left wholly below the log start hold no records any more: theirs go too.
    behind = [f for _, plog in sorted(logs.items()) for f in plog.below_start]
    if not victims and not behind:
        return None
    removed = sum(f.records for f in victims)
    victims += behind
    size = sum(f.size for f in victims)
    report.records_removed_by_retention += removed
    report.files_deleted_by_retention += len(victims)
    report.bytes_deleted_by_retention += size
    report.planned_log_start.update(starts)
    ctx.progress(f"{meta.name}: retention removes {len(victims)} file(s), {removed} record(s)")
    details = {
        "records_removed_by_retention": removed,
        "files_deleted": len(victims),
        "bytes_deleted": size,
        "log_start_offsets": starts,
    }
    step = MaintenanceStep("retention", meta.name, meta.topic_id, victims, [], details)
    step.bins = [(f,) for f in victims]
    return step


def _plan_compaction(
    ctx: _Context, meta: TopicMetadata, logs: dict[TopicPartition, PartitionLog], report: TopicReport
) -> MaintenanceStep | None:
    tasks = []
    for tp, plog in sorted(logs.items()):
        files = cleanable_files(
            plog.files, now_ms=ctx.now_ms, min_compaction_lag_ms=int(meta.config_value("min.compaction.lag.ms"))
        )
        if len(files):
            bins = compaction_bins(files, int(meta.config_value("segment.bytes")))
            tasks.append(
                CompactTask(
                    ctx.uri,
                    tp,
                    tuple(tuple(b) for b in bins),
                    ctx.now_ms,
                    int(meta.config_value("delete.retention.ms")),
                    write=not ctx.dry_run,
                )
            )
    ctx.progress(f"{meta.name}: compacting {len(tasks)} partition(s)")
    return _step_from_results(
        "compact", meta, run_tasks(tasks, run_compact, ctx.spark), report, "records_removed_by_compaction"
    )


def _plan_optimize(
    ctx: _Context, meta: TopicMetadata, logs: dict[TopicPartition, PartitionLog], report: TopicReport
) -> MaintenanceStep | None:
    target = int(meta.config_value("segment.bytes"))
    tasks = []
    for tp, plog in sorted(logs.items()):
        bins = optimize_bins(plog.files, target)
        if bins:
            tasks.append(OptimizeTask(ctx.uri, tp, tuple(tuple(b) for b in bins), plog.end))
    if not tasks:
        return None
    files = sum(len(b) for t in tasks for b in t.bins)
    ctx.progress(f"{meta.name}: OPTIMIZE merges {files} file(s) of {len(tasks)} partition(s)")
    if ctx.dry_run:
        report.files_optimized += files - sum(len(t.bins) for t in tasks)
        return None
    return _step_from_results("optimize", meta, run_tasks(tasks, run_optimize, ctx.spark), report, None)


def _step_from_results(
    operation: str, meta: TopicMetadata, results: list[TaskResult], report: TopicReport, removed_key: str | None
) -> MaintenanceStep | None:
    removed = [f for r in results for f in r.removed]
    if not removed:
        return None
    records = sum(r.records_removed for r in results)
    rewritten = sum(r.bytes_read for r in results if r.removed)
    details: dict[str, Any] = {"bytes_rewritten": rewritten}
    if removed_key is not None:
        details[removed_key] = records
        setattr(report, removed_key, getattr(report, removed_key) + records)
    # Both compaction and OPTIMIZE write one file per bin of files they replace.
    merged = len(removed) - sum(len(r.bins) for r in results)
    details["files_optimized"] = merged
    report.files_optimized += merged
    details["partitions"] = sorted(r.tp.partition for r in results if r.removed)
    report.bytes_rewritten += rewritten
    step = MaintenanceStep(operation, meta.name, meta.topic_id, removed, [f for r in results for f in r.added], details)
    step.bins = [b for r in results for b in r.bins]
    return step


def _vacuum(ctx: _Context, retention_hours: float | None) -> tuple[int, int, str | None]:
    """VACUUM and Delta log cleanup: (files deleted, log files removed, why VACUUM was skipped).

    delta-rs lists the unreferenced files (its dry run: nothing written); the VACUUM
    START and END commits go through the commit core like every other commit, and
    the files are deleted between them, as Spark's VACUUM does.
    """
    from deltalake.exceptions import DeltaError

    ctx.progress("vacuum: listing unreferenced files")
    kwargs: dict[str, Any] = {"dry_run": True}
    parameters: dict[str, Any] = {"retentionCheckEnabled": True}
    if retention_hours is not None:
        kwargs["retention_hours"] = int(retention_hours)
        kwargs["enforce_retention_duration"] = False
        parameters = {"retentionCheckEnabled": False, "specifiedRetentionMillis": int(retention_hours) * 3_600_000}
    try:
        paths = sorted(with_listing_retries(lambda: open_delta_table(ctx.uri).vacuum(**kwargs)))
    except DeltaError as exc:
        raise StoreError(f"VACUUM of {ctx.uri} failed: {str(exc).splitlines()[0]}") from exc
    fs, root = filesystem(ctx.uri)
    # delta-rs lists every removed file past retention, also those an earlier VACUUM deleted.
    # Only table-relative paths: VACUUM never touches anything outside the store.
    inside = [unquote(p) for p in paths if "://" not in p and not p.startswith("/")]
    inside = [p for p in inside if ".." not in p.split("/")]
    sizes = _sizes(fs, [f"{root}/{p}" for p in inside]) if inside else {}
    files = sorted(sizes)
    if ctx.dry_run:
        return len(files), 0, None
    if files:
        try:
            ctx.committer.record_operation(
                "VACUUM START",
                parameters=parameters,
                metrics={"numFilesToDelete": len(files), "sizeOfDataToDelete": sum(sizes.values())},
                policy=ctx.policy,
            )
        except (CommitConflictError, DeliveryTimeoutError) as exc:
            # Writers kept taking every version: nothing was deleted, the next run deletes it all.
            return 0, 0, f"its commit lost to concurrent writers ({exc}); run maintain again"
        ctx.progress(f"vacuum: deleting {len(files)} file(s)")
        deleted = _delete(fs, files)
        try:
            ctx.committer.record_operation(
                "VACUUM END",
                parameters={"status": "COMPLETED"},
                metrics={"numDeletedFiles": deleted, "numVacuumedDirectories": 0},
                policy=ctx.policy,
            )
        except (CommitConflictError, DeliveryTimeoutError) as exc:
            # The files are gone either way; only the history's END line is missing (as after
            # a VACUUM that crashed in Spark).
            log.warning("VACUUM of %s deleted %d file(s) but its END commit lost every race: %s", ctx.uri, deleted, exc)
    else:
        deleted = 0
    try:
        cleaned = int(with_listing_retries(lambda: open_delta_table(ctx.uri).cleanup_metadata()) or 0)
    except DeltaError as exc:
        raise StoreError(f"Delta log cleanup of {ctx.uri} failed: {str(exc).splitlines()[0]}") from exc
    return deleted, cleaned, None


def _sizes(fs: Any, files: list[str]) -> dict[str, int]:
    """Sizes of those of ``files`` that exist, from one listing per directory (a LIST on S3,
    not a HEAD per file)."""
    wanted = set(files)
    sizes: dict[str, int] = {}
    for directory in sorted({f.rsplit("/", 1)[0] for f in files}):
        try:
            listed = fs.ls(directory, detail=True, refresh=True)  # s3fs caches listings
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(f"VACUUM could not list {directory}: {exc}") from exc
        for entry in listed:
            if entry["name"] in wanted:
                sizes[entry["name"]] = int(entry.get("size") or 0)
    return sizes


def _delete(fs: Any, files: list[str]) -> int:
    """Delete ``files``; returns how many were deleted (one a concurrent VACUUM deleted first
    is not counted). Raises StoreError when the store refuses a deletion."""
    deleted = 0
    for path in files:
        try:
            fs.rm_file(path)
            deleted += 1
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(f"VACUUM could not delete {path}: {exc}") from exc
    return deleted
