"""``lakelog check``: prove the store's invariant, as Kafka's log-dump tool and Delta's FSCK do.

For every partition of every topic (or of one), from the table's latest
version:

* every data file an ``add`` action references exists (``missing_file``) and
  is a readable Parquet file (``unreadable_file``);
* its ``add`` statistics (numRecords, min/max offset) equal its contents
  (``wrong_stats``): readers prune and seek by them, so a wrong one hides
  records;
* the offsets from the log start to the log end are unique
  (``duplicate_offset``: two lakelog files hold one offset) and dense
  (``offset_gap``) -- except in compacted topics, where the cleaner removes
  records as Kafka's does, and except ranges a repair recorded as lost;
* the store holds no stray temporary file (``stray_temporary``): the
  ``.<name>.<id>.tmp`` files a writer killed midway leaves under
  ``_delta_log/`` or ``_lakelog/``, once older than a grace period (a writer
  in flight is not disturbed);
* the Delta log itself is whole: every commit file decodes to at least one
  Delta action (``corrupt_commit``: empty, not UTF-8, not JSON actions), no
  commit is missing where readers must replay (``missing_commit``),
  ``_last_checkpoint`` names a checkpoint that exists (``missing_checkpoint``),
  no checksum is empty or unreadable (``corrupt_checksum``) or belongs to a
  version that has no commit (``orphan_checksum``), and the newest checksum
  at or below the latest version -- the one delta-kernel takes protocol and
  metadata from -- agrees with the log (``checksum_mismatch``). These are checked
  first, and also when the log is too damaged to load a snapshot (then no
  partition is checked).

Rows another writer added (a second row at an offset lakelog committed, rows
past a partition's end) are warnings, not violations: readers leave them out
(:class:`engine.errors.ForeignRowsWarning`).

``--repair`` removes stray temporaries and what in the log can be derived
again or is only a hint: a ``_last_checkpoint`` naming a missing checkpoint
(readers, delta-rs and Spark then list the log and use an older checkpoint or
the JSON commits; a new checkpoint is written), an empty, orphaned or
disagreeing checksum. A damaged or missing commit is reported, never
replaced: an empty commit in its place would let a new append take the
offsets it held. With ``--drop-missing-files`` it
also removes the ``add`` actions of missing files in one Delta commit
(operation ``FSCK``, as Delta's ``FSCK REPAIR TABLE``), which records the
offset ranges they held: in its commitInfo and, per partition, as Delta
application transactions ``lakelog.lost.<topic id>.<partition>.<first>``
whose version is the range's end, so later checks (and every Delta reader)
see them as recorded losses, not as holes. Decisions are pure functions
over values (:func:`check_partition`, :func:`stray_temporaries`,
:func:`lost_ranges`); :func:`check_store` and :func:`repair_store` do the IO.
"""

from __future__ import annotations

import json
import posixpath
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import numpy as np

from lakelog.engine.commit import MaintenanceChange, RetryPolicy, TableLog
from lakelog.engine.commit.actions import RemoveFile
from lakelog.engine.commit.checkpoints import write_checkpoint
from lakelog.engine.commit.data_files import written_by_lakelog
from lakelog.engine.commit.follower import checksum_problem
from lakelog.engine.commit.info import TAG_CLIENT, TAG_DETAILS, TAG_OPERATION, TAG_TOPIC
from lakelog.engine.commit.log_files import (
    HINT,
    LogFiles,
    LogListing,
    checksum_name,
    commit_name,
    listing_problems,
)
from lakelog.engine.commit.markers import aborted_marker_id, lost_marker_id
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.commit.reservations import expired
from lakelog.engine.commit.state import PartitionFiles, TableState
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import (
    CorruptLogError,
    DataLossError,
    LakelogError,
    UnknownTopicOrPartitionError,
    one_line,
)
from lakelog.engine.offsets import FileStats
from lakelog.engine.storage.object_store import filesystem
from lakelog.engine.topics import TopicPartition

# A writer (lakelog's put-if-absent, a lease write, delta-rs' checkpoint) names its temporary
# file ``.<final name>.<unique id>.tmp`` and renames or links it into place.
TEMPORARY = re.compile(r"^\..+\.tmp$")
# Directories of the store where writers create temporaries; data directories hold none.
TEMPORARY_DIRS = ("_delta_log", "_lakelog")
LOG_DIR = "_delta_log"
DEFAULT_GRACE_S = 3600.0
REPAIR_CLIENT = "lakelog-check"
REPAIR_POLICY = RetryPolicy(retries=20, backoff_ms=20, backoff_max_ms=500)
# Per partition and kind, at most this many examples are listed.
EXAMPLES = 5


@dataclass(frozen=True)
class Violation:
    """One way the store breaks the invariant; ``tp`` is None for store-wide findings."""

    # missing_file, unreadable_file, wrong_stats, duplicate_offset, offset_gap, stray_temporary, and the
    # log's own: corrupt_commit, missing_commit, missing_checkpoint, corrupt_checksum, orphan_checksum,
    # checksum_mismatch, unreadable_log
    kind: str
    tp: TopicPartition | None
    detail: str
    path: str | None = None


@dataclass(frozen=True)
class FileContents:
    """What one data file holds: its offsets, or why they could not be read."""

    path: str
    offsets: np.ndarray | None  # None when missing or unreadable
    missing: bool = False
    error: str | None = None


@dataclass
class PartitionReport:
    tp: TopicPartition
    start: int
    end: int
    files: int
    records: int
    violations: list[Violation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lost: list[tuple[int, int]] = field(default_factory=list)  # recorded losses [first, end)
    aborted: list[tuple[int, int]] = field(default_factory=list)  # aborted reservations [first, end)
    pending: list[tuple[int, int]] = field(default_factory=list)  # reservations not yet filled

    def line(self) -> str:
        head = f"{self.tp.topic}/{self.tp.partition}: "
        span = f"offsets {self.start}..{self.end - 1}" if self.end > self.start else "empty"
        facts = [f"{span}, {self.records} records in {self.files} files"]
        facts += [f"lost (recorded) {a}..{b - 1}" for a, b in self.lost]
        facts += [f"aborted (reserved, never written) {a}..{b - 1}" for a, b in self.aborted]
        facts += [f"reserved by a write in progress {a}..{b - 1}" for a, b in self.pending]
        facts += [f"warning: {w}" for w in self.warnings]
        if not self.violations:
            return head + "ok, " + "; ".join(facts)
        found = "; ".join(f"{v.kind}: {v.detail}" for v in self.violations)
        return head + f"{len(self.violations)} violation(s): {found}; " + "; ".join(facts)


@dataclass
class CheckReport:
    """A whole check: per partition, then store-wide findings (stray temporaries)."""

    version: int
    partitions: list[PartitionReport]
    store_violations: list[Violation] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

    @property
    def violations(self) -> list[Violation]:
        return [v for p in self.partitions for v in p.violations] + self.store_violations

    @property
    def ok(self) -> bool:
        return not self.violations

    def lines(self) -> list[str]:
        """A line per partition that holds files or broke the invariant, then store-wide
        findings, repairs and a summary."""
        out = [p.line() for p in self.partitions if p.files or p.violations]
        out += [f"store: {v.kind}: {v.detail}" for v in self.store_violations]
        out += self.repaired
        kinds: dict[str, int] = {}
        for v in self.violations:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
        summary = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"
        empty = sum(1 for p in self.partitions if not (p.files or p.violations))
        out.append(
            f"checked {len(self.partitions)} partition(s) ({empty} empty) at version {self.version}: "
            f"{'ok' if self.ok else 'FAILED'}, violations: {summary}"
        )
        return out


# -- decisions (pure) -------------------------------------------------------------------


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """Sorted unique ints as maximal runs [first, end)."""
    if not len(values):
        return []
    breaks = np.nonzero(np.diff(values) != 1)[0]
    firsts = np.concatenate(([values[0]], values[breaks + 1]))
    lasts = np.concatenate((values[breaks], [values[-1]]))
    return [(int(a), int(b) + 1) for a, b in zip(firsts, lasts, strict=True)]


def _gaps(held: np.ndarray, start: int, end: int) -> list[tuple[int, int]]:
    """The ranges [a, b) of [start, end) that no offset of sorted unique ``held`` covers."""
    gaps, position = [], start
    for first, stop in _runs(held):
        if first > position:
            gaps.append((position, min(first, end)))
        position = max(position, stop)
    if position < end:
        gaps.append((position, end))
    return [(a, b) for a, b in gaps if a < b]


def recorded_runs(gap: tuple[int, int], ends: Mapping[str, Callable[[int], int]]) -> list[tuple[int, int, str]]:
    """The runs [a, b) of ``gap``, from its first offset on, that a recorded range covers:
    ``ends[kind](a)`` is the end of the range of that kind recorded at ``a`` (-1 if none);
    ranges recorded one after another chain. Each run is (a, b, kind)."""
    runs = []
    position = gap[0]
    while position < gap[1]:
        found = next(((kind, stop) for kind, end in ends.items() if (stop := end(position)) > position), None)
        if found is None:
            break
        kind, stop = found
        stop = min(stop, gap[1])
        if runs and runs[-1][2] == kind:  # chained ranges of one kind read as one
            runs[-1] = (runs[-1][0], stop, kind)
        else:
            runs.append((position, stop, kind))
        position = stop
    return runs


def check_partition(
    tp: TopicPartition,
    files: Sequence[FileStats],
    contents: Mapping[str, FileContents],
    start: int | None,
    end: int | None,
    *,
    compacted: bool,
    lost_end: Callable[[int], int] = lambda offset: -1,
    aborted_end: Callable[[int], int] = lambda offset: -1,
    pending_end: Callable[[int], int] = lambda offset: -1,
) -> PartitionReport:
    """Check one partition: ``files`` its live ``add`` statistics, ``contents`` what each file
    (by path) holds, ``start``/``end`` the recorded log start and end offsets (None where none
    was recorded: then the smallest offset held, and one past the largest). A hole is no
    violation where a range is recorded: lost by a repair (``lost_end``), reserved and
    aborted (``aborted_end``) or reserved by a write still in progress (``pending_end``)."""
    violations: list[Violation] = []
    warnings: list[str] = []
    held_parts: list[np.ndarray] = []
    own_parts: list[np.ndarray] = []
    stats_ranges: list[np.ndarray] = []  # what missing/unreadable files said they held
    for f in files:
        found = contents.get(f.path)
        if found is None or found.offsets is None:
            missing = found is None or found.missing
            held = f"offsets {f.min_offset}..{f.max_offset}" if f.has_offset_stats else "offsets unknown"
            why = "" if missing or found is None else f": {found.error}"
            violations.append(
                Violation("missing_file" if missing else "unreadable_file", tp, f"{f.path} ({held}){why}", f.path)
            )
            if f.has_offset_stats:
                stats_ranges.append(np.arange(f.min_offset, f.max_offset + 1, dtype=np.int64))  # type: ignore[operator]
            continue
        offsets = found.offsets
        if f.num_records is not None and f.num_records != len(offsets):
            violations.append(
                Violation("wrong_stats", tp, f"{f.path}: numRecords {f.num_records}, file holds {len(offsets)}", f.path)
            )
        if len(offsets) and f.has_offset_stats:
            low, high = int(offsets.min()), int(offsets.max())
            if (f.min_offset, f.max_offset) != (low, high):
                violations.append(
                    Violation(
                        "wrong_stats",
                        tp,
                        f"{f.path}: stats say offsets {f.min_offset}..{f.max_offset}, file holds {low}..{high}",
                        f.path,
                    )
                )
        held_parts.append(offsets)
        if written_by_lakelog(f.path):
            own_parts.append(offsets)
    every = np.concatenate(held_parts).astype(np.int64) if held_parts else np.empty(0, np.int64)
    if start is None:
        start = int(every.min()) if len(every) else 0
    if end is None:
        end = int(every.max()) + 1 if len(every) else start
    inside = every[(every >= start) & (every < end)]
    if len(inside) < len(every):
        past = int(np.count_nonzero(every >= end))
        if past:
            warnings.append(f"{past} row(s) at or past the end offset {end} (another writer's, left out)")
    unique, counts = np.unique(inside, return_counts=True)
    repeated = unique[counts > 1]
    if len(repeated):
        own = np.concatenate(own_parts) if own_parts else np.empty(0, np.int64)
        own_unique, own_counts = np.unique(own, return_counts=True)
        doubled = np.intersect1d(repeated, own_unique[own_counts > 1])
        if len(doubled):
            examples = ", ".join(f"{a}..{b - 1}" for a, b in _runs(doubled)[:EXAMPLES])
            violations.append(
                Violation("duplicate_offset", tp, f"{len(doubled)} offset(s) held by two lakelog files: {examples}")
            )
        foreign = len(repeated) - len(doubled)
        if foreign:
            warnings.append(f"{foreign} offset(s) repeated by another writer's rows (left out)")
    covered = np.union1d(unique, np.concatenate(stats_ranges)) if stats_ranges else unique
    recorded: dict[str, list[tuple[int, int]]] = {"lost": [], "aborted": [], "pending": []}
    holes: list[tuple[int, int]] = []
    ends = {"lost": lost_end, "aborted": aborted_end, "pending": pending_end}
    for gap in _gaps(covered, start, end):
        runs = recorded_runs(gap, ends)
        for a, b, kind in runs:
            recorded[kind].append((a, b))
        covered_to = runs[-1][1] if runs else gap[0]
        if covered_to < gap[1]:
            holes.append((covered_to, gap[1]))
    if holes and not compacted:
        examples = ", ".join(f"{a}..{b - 1}" for a, b in holes[:EXAMPLES])
        missing_count = sum(b - a for a, b in holes)
        violations.append(Violation("offset_gap", tp, f"{missing_count} offset(s) held by no file: {examples}"))
    return PartitionReport(
        tp,
        start,
        end,
        len(files),
        len(unique),
        violations,
        warnings,
        recorded["lost"],
        recorded["aborted"],
        recorded["pending"],
    )


def stray_temporaries(listing: Iterable[tuple[str, float]], now: float, grace_s: float) -> list[str]:
    """Of (path relative to the store, modification time in epoch seconds), the temporary
    files a writer left under ``_delta_log/`` or ``_lakelog/`` longer than ``grace_s`` ago."""
    stray = []
    for path, mtime in listing:
        parts = path.split("/")
        if parts[0] in TEMPORARY_DIRS and TEMPORARY.match(parts[-1]) and now - mtime > grace_s:
            stray.append(path)
    return sorted(stray)


def lost_ranges(report: PartitionReport, missing: Iterable[FileStats]) -> list[tuple[int, int]]:
    """The offset ranges [first, end) dropping the ``missing`` files of a partition loses:
    the runs of offsets only they held (their statistics tell which)."""
    said = [np.arange(f.min_offset, f.max_offset + 1, dtype=np.int64) for f in missing if f.has_offset_stats]  # type: ignore[operator]
    if not said:
        return []
    candidates = np.unique(np.concatenate(said))
    inside = candidates[(candidates >= report.start) & (candidates < report.end)]
    return _runs(inside)


# -- IO ---------------------------------------------------------------------------------


def _read_offsets(reader: PartitionReader, path: str) -> FileContents:
    try:
        table = reader.read_file(path, ["offset"])
    except DataLossError:
        return FileContents(path, None, missing=True)
    except CorruptLogError as exc:  # not Parquet, or not the log's columns: say why
        cause = exc.__cause__ or exc
        first = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        return FileContents(path, None, error=f"{type(cause).__name__}: {first}")
    column = table.column("offset")
    if column.null_count:
        return FileContents(path, None, error="rows without an offset")
    return FileContents(path, column.to_numpy().astype(np.int64))


def _partitions(state: TableState, topic: str | None) -> list[TopicPartition]:
    if topic is not None and topic not in state.topics:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    names = [topic] if topic is not None else sorted(state.topics)
    return [TopicPartition(n, p) for n in names for p in range(state.topics[n].partitions)]


def _listing(uri: str) -> list[tuple[str, float]]:

    fs, root = filesystem(uri)
    found = []
    for directory in TEMPORARY_DIRS:
        try:
            entries = fs.find(f"{root}/{directory}", detail=True)
        except FileNotFoundError:
            continue
        for name, info in entries.items():
            relative = posixpath.relpath(name, root)
            found.append((relative, _mtime(info)))
    return found


def _mtime(info: Mapping[str, Any]) -> float:
    value = info.get("mtime", info.get("LastModified", info.get("created", 0)))
    return value.timestamp() if hasattr(value, "timestamp") else float(value or 0)


def _log_violation(kind: str, name: str, detail: str) -> Violation:
    return Violation(kind, None, detail, f"{LOG_DIR}/{name}")


def check_log(files: LogFiles) -> tuple[list[Violation], LogListing]:
    """The faults of the Delta log itself, and the listing they were found in.

    Reads every commit file the log holds (what history, time travel and the streaming
    source may read, not only what the latest snapshot replays), lists the directory
    once and reads ``_last_checkpoint``; writes nothing."""
    listing = files.listing()
    found = [_log_violation(p.kind, p.name, p.detail) for p in listing_problems(listing, files.last_checkpoint())]
    for version in sorted(listing.commits):
        try:
            files.read_commit(version)
        except CorruptLogError as exc:
            found.append(_log_violation("corrupt_commit", commit_name(version), str(exc)))
    return found, listing


def _checksum_violation(uri: str, files: LogFiles, listing: LogListing, latest: int) -> Violation | None:
    """A fault of the newest ``.crc`` at or below ``latest``: delta-kernel takes the protocol
    and metadata of the latest snapshot from it (Delta Spark from the latest version's)."""
    version = max((v for v, size in listing.checksums.items() if v <= latest and size), default=None)
    if version is None:
        return None
    checksum = files.read_checksum(version)
    if checksum is None:
        name = checksum_name(version)
        return _log_violation("corrupt_checksum", name, f"{name} is not a JSON checksum")
    problem = checksum_problem(uri, version, checksum)
    if problem is None:
        return None
    name = checksum_name(version)
    return _log_violation("checksum_mismatch", name, f"{name} disagrees with the log: {problem}")


def check_store(context: StoreContext, topic: str | None = None, grace_s: float = DEFAULT_GRACE_S) -> CheckReport:
    """Check the store of ``context`` (one topic with ``topic``) at its latest version: :func:`check_log_table`."""
    return check_log_table(context.log, topic, grace_s)


def check_log_table(table_log: TableLog, topic: str | None = None, grace_s: float = DEFAULT_GRACE_S) -> CheckReport:
    """Check the log table ``table_log`` follows (one topic with ``topic``) at its latest
    version: the Delta log (:func:`check_log`), then every partition from the latest
    snapshot; a log too damaged to load one is reported as it is, with no partition
    checked. Reads every live data file's offsets; writes nothing. Raises
    UnknownTopicOrPartitionError for an unknown topic."""
    uri = table_log.uri
    log_violations, listing = check_log(table_log.files)
    stray = stray_temporaries(_listing(uri), time.time(), grace_s)
    store_violations = log_violations + [Violation("stray_temporary", None, path, path) for path in stray]
    try:
        state = table_log.latest()
    except CorruptLogError as exc:
        named = {v.path for v in log_violations if v.path is not None}
        if not any(path in str(exc) for path in named):
            store_violations.append(Violation("unreadable_log", None, str(exc)))
        return CheckReport(max(listing.commits, default=-1), [], store_violations)
    mismatch = _checksum_violation(uri, table_log.files, listing, state.version)
    if mismatch is not None:
        store_violations.append(mismatch)
    reader = PartitionReader(uri)
    reports = []
    for tp in _partitions(state, topic):
        pf: PartitionFiles = state.files_of(tp)
        files = pf.all()
        contents = {f.path: _read_offsets(reader, f.path) for f in files}
        topic_id = state.topics[tp.topic].topic_id
        compacted = "compact" in str(state.topics[tp.topic].config_value("cleanup.policy"))

        def lost_end(offset: int, tp: TopicPartition = tp, topic_id: str = topic_id) -> int:
            return state.app_version(lost_marker_id(topic_id, tp.partition, offset))

        def aborted_end(offset: int, tp: TopicPartition = tp, topic_id: str = topic_id) -> int:
            return state.app_version(aborted_marker_id(topic_id, tp.partition, offset))

        pending = {r.first: r.end for r in state.pending_reservations(tp)}
        reports.append(
            check_partition(
                tp,
                files,
                contents,
                pf.start,
                pf.end,
                compacted=compacted,
                lost_end=lost_end,
                aborted_end=aborted_end,
                pending_end=lambda offset, pending=pending: pending.get(offset, -1),
            )
        )
    return CheckReport(state.version, reports, store_violations)


# What a repair may delete in the log: hints and files derived from the commits, never a commit.
_REMOVABLE = {"corrupt_checksum", "orphan_checksum", "checksum_mismatch"}


def repair_log(table_log: TableLog, report: CheckReport) -> list[str]:
    """Repair the store-wide findings of ``report`` that are safe to repair: remove stray
    temporaries (only those, only inside the store), empty, orphaned or disagreeing checksums,
    and a ``_last_checkpoint`` naming a missing checkpoint (then write a checkpoint of the
    latest version, so readers need not replay the whole log). Commit files are never
    touched. Returns what was done, a line each."""
    from deltalake.exceptions import DeltaError

    done = []
    fs, root = filesystem(table_log.uri)
    files = table_log.files
    for v in report.store_violations:
        if v.path is None:
            continue
        name = v.path.rsplit("/", 1)[-1]
        if v.kind == "stray_temporary":
            try:
                fs.rm(f"{root}/{v.path}")
            except FileNotFoundError:
                continue  # its writer or another repair removed it meanwhile
            done.append(f"repair: removed stray temporary {v.path}")
        elif v.kind in _REMOVABLE and files.remove(name):
            done.append(f"repair: removed {v.path} ({v.kind}; Delta readers derive the state from the log)")
    hint = [v for v in report.store_violations if v.kind == "missing_checkpoint"]
    if hint and files.remove(HINT):
        done.append(
            f"repair: removed {LOG_DIR}/{HINT}, which named the missing {hint[0].path}: readers list the log "
            "and start from an older checkpoint or the JSON commits"
        )
        try:
            version = table_log.latest().version
            write_checkpoint(table_log.uri, version)
            done.append(f"repair: wrote a checkpoint of version {version}")
        except (LakelogError, OSError, DeltaError) as exc:  # the hint is gone: readers manage without
            done.append(f"repair: no new checkpoint written ({one_line(str(exc), 200)})")
    return done


def repair_store(
    context: StoreContext,
    report: CheckReport,
    *,
    drop_missing_files: bool = False,
) -> list[str]:
    """Repair what ``report`` found: the store-wide findings :func:`repair_log` can repair
    and, with ``drop_missing_files``, commit the removal of every missing file's ``add``
    action, one commit per topic (operation FSCK) recording the offset ranges lost.
    Returns what was done, a line each. Damaged or missing commits, unreadable files,
    wrong statistics, duplicates and gaps are reported, never changed. Raises
    MaintenanceConflictError when a concurrent commit removed one of those files first
    (run check again), and the commit core's errors otherwise."""
    done = repair_log(context.log, report)
    done += _abort_expired(context)
    if drop_missing_files:
        done += _drop_missing(context, report)
    return done


def _abort_expired(context: StoreContext) -> list[str]:
    """Abort the offset reservations whose writer stopped renewing them before their deadline
    (it died): safe, their offsets were never given to any record."""
    now_ms = int(time.time() * 1000)
    found = expired(context.log.latest(), now_ms)
    if not found:
        return []
    version = context.committer(REPAIR_CLIENT).abort_expired(REPAIR_POLICY, now_ms)
    if version is None:
        return []  # the store's own sweeper aborted them first
    return [
        f"repair: {r.tp}: aborted the expired reservation of offsets {r.first}..{r.end - 1} at version {version}"
        for r in found
    ]


def _drop_missing(context: StoreContext, report: CheckReport) -> list[str]:
    state = context.log.at(report.version)
    by_topic: dict[str, list[tuple[PartitionReport, list[FileStats]]]] = {}
    for p in report.partitions:
        gone = {v.path for v in p.violations if v.kind == "missing_file"}
        if gone:
            files = [f for f in state.files_of(p.tp).all() if f.path in gone]
            by_topic.setdefault(p.tp.topic, []).append((p, files))
    done = []
    for topic, parts in sorted(by_topic.items()):
        now_ms = int(time.time() * 1000)
        removed = [RemoveFile.of(f, now_ms, data_change=True) for _, files in parts for f in files]
        lost = {p.tp.partition: lost_ranges(p, files) for p, files in parts}
        details = {str(p): [[a, b - 1] for a, b in ranges] for p, ranges in sorted(lost.items())}
        change = MaintenanceChange(
            "FSCK",
            topic,
            state.topics[topic].topic_id,
            removed,
            [],
            True,
            {
                TAG_OPERATION: "repair",
                TAG_CLIENT: REPAIR_CLIENT,
                TAG_TOPIC: topic,
                TAG_DETAILS: json.dumps({"lost_offsets": details}, sort_keys=True, separators=(",", ":")),
            },
            {"predicate": json.dumps([f"topic = '{topic}'"])},
            {"numFilesRemoved": len(removed)},
            lost_ranges=lost,
        )
        version = context.committer(REPAIR_CLIENT).commit_maintenance(change, report.version, REPAIR_POLICY)
        for p, files in parts:
            ranges = ", ".join(f"{a}..{b - 1}" for a, b in lost[p.tp.partition]) or "none"
            names = ", ".join(unquote(f.path) for f in files)
            done.append(
                f"repair: {p.tp}: dropped {len(files)} missing file(s) at version {version} ({names}),"
                f" lost offsets {ranges}"
            )
    return done
