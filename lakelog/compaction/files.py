"""The live data files of a log table as maintenance sees them.

Maintenance needs more of each ``add`` action than the writers do: the
file's size (OPTIMIZE bins, ``retention.bytes``), its newest record
timestamp (``retention.ms``, ``min.compaction.lag.ms``), and the time it was
written (a tombstone's ``delete.retention.ms`` runs from there, as it runs
from a segment's last-modified time in Kafka's log cleaner).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from lakelog.engine.commit.actions import RemoveFile
from lakelog.engine.commit.data_files import written_by_lakelog
from lakelog.engine.commit.state import TableState
from lakelog.engine.offsets import FileStats
from lakelog.engine.topics import TopicPartition


@dataclass(frozen=True)
class LiveFile:
    """One live data file of one partition, with the statistics maintenance plans by."""

    path: str
    tp: TopicPartition
    size: int
    records: int
    min_offset: int
    max_offset: int
    max_timestamp_ms: int | None  # None: no timestamp statistics (never expires)
    modification_time_ms: int

    def file_stats(self) -> FileStats:
        return FileStats(
            self.path,
            self.tp,
            self.records,
            self.min_offset,
            self.max_offset,
            modification_time=self.modification_time_ms,
        )

    def remove_action(self, deletion_ms: int, *, data_change: bool) -> RemoveFile:
        """Delta's ``remove`` action for this file (with its size and offset statistics)."""
        stats = FileStats(self.path, self.tp, self.records, self.min_offset, self.max_offset, size=self.size)
        return RemoveFile.of(stats, deletion_ms, data_change=data_change)


@dataclass(frozen=True)
class PartitionLog:
    """A partition's live files in offset order; ``unplannable`` when some file lacks offset statistics."""

    tp: TopicPartition
    files: tuple[LiveFile, ...]
    unplannable: bool = False
    end: int | None = None  # the committed end offset, when known (engine.commit.state)
    start: int | None = None  # the log start retention or DeleteRecords recorded, when any
    # lakelog's files holding only offsets below ``start`` (records DeleteRecords deleted; it
    # keeps the file holding the newest offset, which later appends leave behind): retention's.
    below_start: tuple[LiveFile, ...] = ()

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)

    @property
    def start_offset(self) -> int | None:
        """The partition's log start: its first file's first offset, or the recorded start when
        that is later (DeleteRecords may cut through a file)."""
        if not self.files:
            return None
        first = self.files[0].min_offset
        return first if self.start is None else max(first, self.start)


def partition_logs(state: TableState, topics: set[str] | None = None) -> dict[TopicPartition, PartitionLog]:
    """The live files of ``state`` grouped by partition (those of ``topics`` only, when given)."""
    grouped: dict[TopicPartition, list[LiveFile]] = defaultdict(list)
    unplannable: set[TopicPartition] = set()
    ends: dict[TopicPartition, int | None] = {}
    starts: dict[TopicPartition, int | None] = {}
    below: dict[TopicPartition, list[LiveFile]] = defaultdict(list)
    for tp in state.partitions:
        if topics is not None and tp.topic not in topics:
            continue
        files = state.files_of(tp)
        ends[tp] = files.end
        starts[tp] = files.start
        newest = files.reach[-1] if files.reach else None
        for f in files.all():
            below_start = f.has_offset_stats and files.start is not None and f.max_offset < files.start  # type: ignore[operator]
            if below_start and f.size is not None and written_by_lakelog(f.path) and f.max_offset != newest:
                below[tp].append(_live(f, tp))
                continue
            outside = below_start or (
                f.has_offset_stats and files.end is not None and f.min_offset >= files.end  # type: ignore[operator]
            )
            if outside:
                continue  # another writer's rows past the end or below the start: never records
            if not f.has_offset_stats or f.size is None:
                unplannable.add(tp)
                continue
            if f.num_records == 0:
                continue
            grouped[tp].append(_live(f, tp))
    tps = set(grouped) | unplannable | set(below)
    return {
        tp: PartitionLog(
            tp,
            tuple(sorted(grouped.get(tp, ()), key=lambda f: f.min_offset)),
            tp in unplannable,
            ends.get(tp),
            starts.get(tp),
            tuple(sorted(below.get(tp, ()), key=lambda f: f.min_offset)),
        )
        for tp in tps
    }


def _live(f: FileStats, tp: TopicPartition) -> LiveFile:
    return LiveFile(
        f.path,
        tp,
        int(f.size),  # type: ignore[arg-type]
        int(f.num_records),  # type: ignore[arg-type]
        int(f.min_offset),  # type: ignore[arg-type]
        int(f.max_offset),  # type: ignore[arg-type]
        f.max_timestamp_ms,
        int(f.modification_time or 0),
    )
