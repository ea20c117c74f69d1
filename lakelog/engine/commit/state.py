"""The log table as of one Delta version: protocol, metadata, live files per partition,
end offsets, application transactions -- and how one commit moves it forward.

A :class:`TableState` is immutable. It is built once from a snapshot (a
checkpoint and the commits after it, read by delta-rs), then moved forward
commit by commit with :meth:`TableState.apply` from the commits' own
actions; unchanged partitions are shared between versions, so following the
log costs per commit what that commit touched, not the size of the table.

End offsets only move forward. Every lakelog append records each
partition's new end offset (Kafka's log end offset) in the same commit, as a
Delta application transaction ``lakelog.end.<topic id>.<partition>``
(:func:`end_marker_id`): plain Delta tools keep those entries in every
snapshot and checkpoint, so rows another writer appends never move a
partition's end, and rows at or past it are never records. A partition no
lakelog append has marked yet (a table written before the markers) ends one
past the largest offset any data file ever added to it. Retention and
DeleteRecords record each partition's new log start the same way (:func:`start_marker_id`).
Maintenance never
removes the file holding a partition's last offset (Kafka never deletes the
active segment either), except when the whole topic is deleted -- a metadata
change that resets the topic here.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar
from urllib.parse import unquote

import numpy as np

from lakelog.engine.commit.actions import Commit, Metadata, Protocol
from lakelog.engine.commit.checksum import checksum_disagreement, next_checksum
from lakelog.engine.commit.file_runs import FileColumns, LazyFiles, Run
from lakelog.engine.commit.markers import (
    Reservation,
    end_marker_id,
    reservation_slots,
    start_marker_id,
)
from lakelog.engine.offsets import FileStats, PartitionBounds
from lakelog.engine.topics import TopicMetadata, TopicPartition, topics_from_properties

T = TypeVar("T")


def _order(f: FileStats) -> tuple[int, int, str]:
    return (f.min_offset or 0, f.max_offset or 0, f.path)


@dataclass(frozen=True)
class PartitionFiles:
    """The live data files of one partition.

    ``ordered`` holds the files with offset statistics and records, by first
    offset; ``reach[i]`` is the largest offset among ``ordered[: i + 1]``, so a
    seek finds its first candidate by bisection even when files overlap (a
    plain Delta OPTIMIZE may merge files in any order). ``other`` holds files
    without offset statistics (they can never be pruned) and empty files.
    ``end`` is the partition's committed end offset when known (rows at or past
    it did not come through lakelog: they are never records), else None;
    ``start`` the log start offset retention or DeleteRecords recorded (rows
    below it are not records either), else None.
    """

    ordered: Sequence[FileStats] = ()
    reach: Sequence[int] = ()
    other: tuple[FileStats, ...] = ()
    end: int | None = None
    start: int | None = None

    @classmethod
    def of(cls, files: Iterable[FileStats]) -> PartitionFiles:
        ordered, other = [], []
        for f in files:
            (ordered if f.has_offset_stats and f.num_records else other).append(f)
        ordered.sort(key=_order)
        reach, top = [], -1
        for f in ordered:
            top = max(top, f.max_offset)  # type: ignore[type-var]
            reach.append(top)
        return cls(tuple(ordered), tuple(reach), tuple(other))

    @classmethod
    def of_rows(cls, columns: FileColumns, rows: np.ndarray, tp: TopicPartition) -> PartitionFiles:
        """The files of ``rows`` of ``columns`` (all of ``tp``), those of ``ordered`` built only
        when looked at (:class:`engine.commit.file_runs.LazyFiles`)."""
        ordered, reach, other = columns.in_offset_order(rows)
        return cls(LazyFiles(columns, ordered, tp), reach, tuple(columns.file(row, tp) for row in other))

    def __len__(self) -> int:
        return len(self.ordered) + len(self.other)

    def all(self) -> tuple[FileStats, ...]:
        return (*self.ordered, *self.other)

    def changed(self, added: Iterable[FileStats], removed: set[str]) -> PartitionFiles:
        """The files after a commit added ``added`` and removed the paths ``removed`` (decoded)."""
        added = list(added)
        plain = sorted((f for f in added if f.has_offset_stats and f.num_records), key=_order)
        extra = [f for f in added if not (f.has_offset_stats and f.num_records)]
        other = [f for f in self.other if unquote(f.path) not in removed] if removed else list(self.other)
        kept = [f for f in self.ordered if unquote(f.path) not in removed] if removed else self.ordered
        if len(kept) == len(self.ordered) and (not plain or not kept or _order(plain[0]) >= _order(kept[-1])):
            # The common case, an append after everything there is: extend (sharing what
            # was there, engine.commit.file_runs), no re-sort.
            top = self.reach[-1] if self.reach else -1
            reach = list(itertools.accumulate((f.max_offset for f in plain), max, initial=top))[1:]
            return PartitionFiles(
                _run(self.ordered).extended(plain), _run(self.reach).extended(reach), tuple(other + extra)
            )
        return PartitionFiles.of([*kept, *plain, *other, *extra])

    def covering(self, start: int, end: int | None = None) -> list[FileStats]:
        """Files that may hold offsets in ``[start, end)``, by first offset; files without
        statistics last (they may hold anything)."""
        first = bisect.bisect_left(self.reach, start)
        chosen = []
        for i in range(first, len(self.ordered)):
            f = self.ordered[i]
            if end is not None and f.min_offset >= end:  # type: ignore[operator]
                break
            if f.max_offset >= start:  # type: ignore[operator]
                chosen.append(f)
        chosen.extend(f for f in self.other if not f.has_offset_stats)
        return chosen

    @property
    def start_offset(self) -> int | None:
        """The first offset of the oldest file, or the log start recorded (``start``) when
        that is later (DeleteRecords may cut through a file); None without files."""
        if not self.ordered:
            return None
        first = self.ordered[0].min_offset
        return first if self.start is None else max(first, self.start)  # type: ignore[type-var]

    @property
    def has_unknown(self) -> bool:
        return any(not f.has_offset_stats for f in self.other)

    @property
    def past_end(self) -> bool:
        """Whether a file holds offsets at or past the committed end (rows another writer added)."""
        return self.end is not None and bool(self.reach) and self.reach[-1] >= self.end

    def may_duplicate(self, start: int, end: int | None = None) -> bool:
        """Whether two files may hold the same offset in ``[start, end)``.

        lakelog's own files never overlap; overlapping statistics or a file
        without them mean another writer's rows may repeat an offset, so a
        reader must keep one row per offset.
        """
        return overlapping(self.covering(start, end))


def _run(items: Sequence[T]) -> Run[T]:
    return items if isinstance(items, Run) else Run([items])


def overlapping(files: Iterable[FileStats]) -> bool:
    """Whether two of ``files`` (ordered by first offset) may hold the same offset: their
    offset statistics overlap, or one has none."""
    top = -1
    for f in files:
        if not f.has_offset_stats:
            return True
        if f.num_records and f.min_offset <= top:  # type: ignore[operator]
            return True
        top = max(top, f.max_offset)  # type: ignore[type-var]
    return False


class AppVersions:
    """Delta application transaction versions: those set since the snapshot a state was
    built from (``overlay``), else the snapshot's own (looked up once per id)."""

    def __init__(self, base: Callable[[str], int] | None = None, overlay: Mapping[str, int] | None = None) -> None:
        self._base = base
        self._overlay = dict(overlay or {})
        self._cache: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, app_id: str) -> int:
        """The version ``app_id`` reached (-1 if it never committed or its entry expired)."""
        if app_id in self._overlay:
            return self._overlay[app_id]
        if self._base is None:
            return -1
        with self._lock:
            if app_id not in self._cache:
                self._cache[app_id] = self._base(app_id)
            return self._cache[app_id]

    def updated(self, versions: Mapping[str, int]) -> AppVersions:
        if not versions:
            return self
        moved = AppVersions(self._base, {**self._overlay, **versions})
        moved._cache = self._cache  # the base's answers stay true
        moved._lock = self._lock
        return moved


@dataclass(frozen=True)
class TableState:
    """The log table at ``version``. Immutable; :meth:`apply` returns the next one."""

    version: int
    protocol: Protocol
    metadata: Metadata
    partitions: Mapping[TopicPartition, PartitionFiles]
    topics: Mapping[str, TopicMetadata]
    ends: Mapping[TopicPartition, int]
    # Partitions with a data file lacking offset statistics: their bounds must
    # be computed from the data before anything is appended to them.
    unknown_ends: frozenset[TopicPartition] = frozenset()
    apps: AppVersions = field(default_factory=AppVersions)
    # This version's .crc: read with the snapshot, then derived commit by commit in memory
    # (engine.commit.checksum), so a writer can write its commit's .crc even when the
    # previous commit's writer never wrote one. None once it cannot be derived exactly.
    checksum: Mapping[str, Any] | None = None

    @classmethod
    def build(
        cls,
        version: int,
        protocol: Protocol,
        metadata: Metadata,
        files: Iterable[FileStats],
        apps: AppVersions | None = None,
        checksum: Mapping[str, Any] | None = None,
    ) -> TableState:
        """The state from a snapshot's live files."""
        by_tp: dict[TopicPartition, list[FileStats]] = defaultdict(list)
        for f in files:
            by_tp[f.tp].append(f)
        partitions = {tp: PartitionFiles.of(fs) for tp, fs in by_tp.items()}
        return cls._of_partitions(version, protocol, metadata, partitions, apps, checksum)

    @classmethod
    def from_columns(
        cls,
        version: int,
        protocol: Protocol,
        metadata: Metadata,
        columns: FileColumns,
        apps: AppVersions | None = None,
        checksum: Mapping[str, Any] | None = None,
    ) -> TableState:
        """The state from a snapshot's live files as columns: what :meth:`build` gives for the
        same files, without building the files no one looks at. Rows naming no topic or
        partition (a foreign layout) are left out: no reader can place them."""
        partitions = {tp: PartitionFiles.of_rows(columns, rows, tp) for tp, rows in columns.by_partition()}
        return cls._of_partitions(version, protocol, metadata, partitions, apps, checksum)

    @classmethod
    def _of_partitions(
        cls,
        version: int,
        protocol: Protocol,
        metadata: Metadata,
        partitions: dict[TopicPartition, PartitionFiles],
        apps: AppVersions | None,
        checksum: Mapping[str, Any] | None,
    ) -> TableState:
        topics = topics_from_properties(metadata.configuration)
        ends = {}
        unknown = set()
        for tp, pf in partitions.items():
            if tp.topic not in topics:
                continue
            if pf.has_unknown:
                unknown.add(tp)
            if pf.reach:
                ends[tp] = pf.reach[-1] + 1
        return cls(
            version, protocol, metadata, partitions, topics, ends, frozenset(unknown), apps or AppVersions(), checksum
        )

    # -- reading --------------------------------------------------------------

    @property
    def properties(self) -> Mapping[str, str]:
        return self.metadata.configuration

    def end_offset(self, tp: TopicPartition) -> int:
        """The offset the partition's next record gets: the end lakelog's last append to it
        recorded, else (never marked) one past the largest offset in its files."""
        marked = self.committed_end(tp)
        return self.ends.get(tp, 0) if marked is None else marked

    def pending_reservations(self, tp: TopicPartition) -> list[Reservation]:
        """The offset reservations of ``tp`` not yet filled or aborted, by first offset
        (:mod:`engine.commit.reservations`)."""
        topic = self.topics.get(tp.topic)
        if topic is None:
            return []
        slots = reservation_slots(self.apps.get, tp, topic.topic_id)
        return sorted((r for r in slots if r.pending), key=lambda r: r.first)

    def stable_end(self, tp: TopicPartition) -> int:
        """The partition's last stable offset (Kafka's LSO): the first offset of its oldest
        pending reservation, else its end offset. Readers see no record at or past it;
        producers append at :meth:`end_offset`."""
        end = self.end_offset(tp)
        pending = self.pending_reservations(tp)
        return min(end, pending[0].first) if pending else end

    def committed_end(self, tp: TopicPartition) -> int | None:
        """The end offset lakelog's appends recorded for ``tp`` (:func:`end_marker_id`), or None."""
        return self._marked(tp, end_marker_id)

    def committed_start(self, tp: TopicPartition) -> int | None:
        """The log start offset retention or DeleteRecords recorded for ``tp`` (:func:`start_marker_id`),
        or None."""
        return self._marked(tp, start_marker_id)

    def _marked(self, tp: TopicPartition, marker: Callable[[str, int], str]) -> int | None:
        topic = self.topics.get(tp.topic)
        if topic is None:
            return None
        found = self.apps.get(marker(topic.topic_id, tp.partition))
        return None if found < 0 else found

    def app_version(self, app_id: str) -> int:
        return self.apps.get(app_id)

    def files_of(self, tp: TopicPartition) -> PartitionFiles:
        """The partition's live files, with its end offset where it is certain (recorded by
        lakelog, or derived from statistics every file has)."""
        found = self._files_of.get(tp)
        if found is None:
            pf = self.partitions.get(tp) or PartitionFiles()
            end = self.committed_end(tp)
            if end is None and tp not in self.unknown_ends:
                end = self.ends.get(tp, 0)
            start = self.committed_start(tp)
            found = pf if (end, start) == (pf.end, pf.start) else replace(pf, end=end, start=start)
            self._files_of[tp] = found
        return found

    @cached_property
    def _files_of(self) -> dict[TopicPartition, PartitionFiles]:
        # Every poll asks for its partitions' files; a state never changes, so once is enough.
        return {}

    @cached_property
    def files(self) -> list[FileStats]:
        """Every live data file (all partitions)."""
        return [f for pf in self.partitions.values() for f in pf.all()]

    def topic_files(self, topic: str) -> list[FileStats]:
        return [f for tp, pf in self.partitions.items() if tp.topic == topic for f in pf.all()]

    def bounds(self, tp: TopicPartition) -> PartitionBounds | None:
        """Log start and readers' end offsets from statistics; None when a file lacks them.

        The end is the last stable offset (:meth:`stable_end`): records a pending
        reservation holds back are not readable yet.
        """
        pf = self.files_of(tp)
        if pf.has_unknown:
            return None
        start = pf.start_offset
        end = self.end_offset(tp)
        if start is not None and pf.start is not None:
            start = max(start, pf.start)  # a file below it holds only another writer's rows
        # A file starting at or past the committed end holds only another writer's rows.
        start = end if start is None or start >= end else start
        stable = self.stable_end(tp)
        return PartitionBounds(min(start, stable), stable, len(pf))

    @property
    def checkpoint_interval(self) -> int:
        try:
            return max(1, int(self.properties.get("delta.checkpointInterval", 10)))
        except ValueError:
            return 10

    # -- moving forward ---------------------------------------------------------

    def apply(self, version: int, commit: Commit) -> TableState:
        """The state after ``commit``, which must be version ``self.version + 1``."""
        if version != self.version + 1:
            raise ValueError(f"commit {version} does not follow version {self.version}")
        metadata = commit.metadata or self.metadata
        protocol = commit.protocol or self.protocol
        topics = self.topics
        ends = dict(self.ends)
        unknown = set(self.unknown_ends)
        if commit.metadata is not None:
            topics = topics_from_properties(metadata.configuration)
            for tp in list(ends) + list(unknown):
                old, new = self.topics.get(tp.topic), topics.get(tp.topic)
                if new is None or old is None or new.topic_id != old.topic_id:
                    ends.pop(tp, None)
                    unknown.discard(tp)
        added: dict[TopicPartition, list[FileStats]] = defaultdict(list)
        for add in commit.adds:
            tp = add.tp
            if tp is None:
                continue
            f = add.file_stats()
            added[tp].append(f)
            if tp.topic not in topics or not add.data_change:
                continue
            if not f.has_offset_stats:
                unknown.add(tp)
            elif f.num_records:
                ends[tp] = max(ends.get(tp, 0), f.max_offset + 1)  # type: ignore[operator]
        removed: dict[TopicPartition | None, set[str]] = defaultdict(set)
        for remove in commit.removes:
            removed[remove.tp].add(unquote(remove.path))
        partitions = dict(self.partitions)
        if None in removed:  # a remove naming no partition: look for its path everywhere
            lost = removed.pop(None)
            for tp, pf in self.partitions.items():
                if any(unquote(f.path) in lost for f in pf.all()):
                    removed[tp] |= lost
        for tp in set(added) | {tp for tp in removed if tp is not None}:
            changed = self.files_of(tp).changed(added.get(tp, ()), removed.get(tp, set()))
            if len(changed):
                partitions[tp] = changed
            else:
                partitions.pop(tp, None)
            if tp in unknown and not changed.has_unknown:
                unknown.discard(tp)
        return TableState(
            version,
            protocol,
            metadata,
            partitions,
            topics,
            ends,
            frozenset(unknown),
            self.apps.updated(commit.txns),
            None if self.checksum is None else next_checksum(self.checksum, [a.to_json() for a in commit.actions]),
        )


def state_disagreement(checksum: Mapping[str, Any], state: TableState) -> str | None:
    """:func:`checksum_disagreement` of ``checksum`` against ``state`` (the version it is for)."""
    files = state.files
    return checksum_disagreement(
        checksum,
        num_files=len(files),
        table_size_bytes=sum(f.size or 0 for f in files),
        metadata=state.metadata.to_json()["metaData"],
        protocol=state.protocol.to_json()["protocol"],
    )
