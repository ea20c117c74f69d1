"""Planning a streaming read's micro-batches: plain functions over offsets and commits.

Offsets travel in the checkpoint in the Kafka source's JSON form,
``{"topic": {"0": 42, "1": 7}}`` (the next offset to read per partition).

Rate limits cut a batch at a *commit boundary*: the end offsets of a
micro-batch are the log's end offsets after some Delta commit (clipped to
the batch's start), so the records of one commit -- one producer batch, one
transaction spanning several partitions -- are never split across
micro-batches. A single commit larger than ``maxOffsetsPerTrigger`` is
therefore read whole (the limit is a soft bound, as it is for a Kafka
transaction that a consumer in read_committed mode cannot cut either).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lakelog.engine.commit.actions import Commit
from lakelog.engine.commit.info import TAG_OPERATION, TAG_RANGES, lakelog_tags, parse_ranges
from lakelog.engine.offsets import PartitionBounds, partition_bounds
from lakelog.engine.topics import TopicPartition


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}


@dataclass(frozen=True)
class DataLoss:
    """Offsets a query should have read but that are no longer in the log."""

    tp: TopicPartition
    start: int  # first offset lost
    end: int | None  # first offset still there (None: the partition is gone)
    reason: str

    def describe(self) -> str:
        where = f"offsets {self.start}..{self.end - 1}" if self.end is not None else f"offsets from {self.start}"
        return f"{self.tp}: {where} ({self.reason})"


def reconcile_start(
    start: Mapping[TopicPartition, int], bounds: Mapping[TopicPartition, PartitionBounds]
) -> tuple[dict[TopicPartition, int], list[DataLoss]]:
    """The offsets to continue from, given where the last batch ended and the log now.

    Partitions new to the query start at their log start offset (Kafka's
    source reads newly discovered partitions from the earliest offset).
    Offsets below a partition's log start offset (retention removed them),
    partitions that disappeared (topic deleted) and offsets beyond a
    partition's end (the topic was re-created) are reported as data loss;
    the returned start then skips to what the log holds.
    """
    losses = []
    result = {}
    for tp, offset in start.items():
        b = bounds.get(tp)
        if b is None:
            losses.append(DataLoss(tp, offset, None, "the partition no longer exists"))
        elif offset < b.start:
            losses.append(DataLoss(tp, offset, b.start, f"removed from the log; log start offset is now {b.start}"))
            result[tp] = b.start
        elif offset > b.end:
            losses.append(
                DataLoss(
                    tp, b.start, b.end, f"the log end offset went back from {offset} to {b.end} (topic re-created)"
                )
            )
            result[tp] = b.start
        else:
            result[tp] = offset
    for tp, b in bounds.items():
        if tp not in result and tp not in start:
            result[tp] = b.start
    return result, losses


def total_records(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> int:
    return sum(max(0, end[tp] - start.get(tp, end[tp])) for tp in end)


def proportional_limit(
    start: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """Kafka source's ``rateLimit``: share ``limit`` among partitions by their backlog.

    Used only when the commits between start and target are no longer in
    the Delta log (log cleanup), so commit boundaries are unknown.
    """
    sizes = {tp: max(0, target[tp] - start.get(tp, target[tp])) for tp in target}
    total = sum(sizes.values())
    if total <= limit:
        return dict(target)
    ends = {}
    for tp, size in sizes.items():
        share = limit * (size / total)
        take = math.ceil(share) if share < 1 else math.floor(share)
        ends[tp] = start.get(tp, target[tp]) + min(size, take)
    return ends


def split_ranges(
    ranges: Iterable[tuple[TopicPartition, int, int]], min_partitions: int | None, max_per_task: int
) -> list[tuple[TopicPartition, int, int]]:
    """Spark tasks for the offset ranges ``[start, end)`` of a batch: non-empty, in order.

    As the Kafka source's KafkaOffsetRangeCalculator: one task per
    partition, a partition with more than ``max_per_task`` records (the
    ``maxRecordsPerPartition`` option) split into equal pieces; with
    ``minPartitions`` and fewer tasks than that, each partition is split in
    proportion to its share of the batch's records, so there are about
    ``min_partitions`` tasks (at least that many when every record is its
    own task, never a task for an empty range).
    """
    nonempty = [(tp, lo, hi) for tp, lo, hi in ranges if hi > lo]
    pieces = {(tp, lo): max(1, math.ceil((hi - lo) / max_per_task)) for tp, lo, hi in nonempty}
    if min_partitions is not None and sum(pieces.values()) < min_partitions:
        total = sum(hi - lo for _, lo, hi in nonempty)
        ideal = total / min_partitions
        for tp, lo, hi in nonempty:
            wanted = max(1, round((hi - lo) / ideal)) if ideal > 0 else 1
            pieces[(tp, lo)] = max(pieces[(tp, lo)], min(wanted, hi - lo))
    result = []
    for tp, lo, hi in nonempty:
        count = pieces[(tp, lo)]
        size, start = hi - lo, lo
        for i in range(count):
            # Pieces of equal size, give or take one record.
            until = lo + (size * (i + 1)) // count
            if until > start:
                result.append((tp, start, until))
            start = until
    return result


@dataclass(frozen=True)
class CommitRanges:
    """The offsets one Delta commit added, per partition: [start, end)."""

    version: int
    ranges: Mapping[TopicPartition, tuple[int, int]]


def commit_ranges(version: int, commit: Commit) -> CommitRanges:
    """The offsets ``commit`` appended: the ranges a lakelog append records in its tags.
    Other lakelog commits add the offsets of their files with dataChange (an OPTIMIZE adds
    none); a commit another writer made appends no records (engine.commit.state)."""
    tags = lakelog_tags(commit.commit_info.values if commit.commit_info is not None else {})
    if TAG_RANGES in tags:
        found = {TopicPartition(t, p): (s, e) for t, p, s, e in parse_ranges(tags[TAG_RANGES]) if e > s}
        return CommitRanges(version, found)
    if TAG_OPERATION not in tags:
        return CommitRanges(version, {})
    bounds, _ = partition_bounds(a.file_stats() for a in commit.adds if a.data_change and a.tp is not None)
    return CommitRanges(version, {tp: (b.start, b.end) for tp, b in bounds.items() if b.end > b.start})


def plan_by_commits(
    start: Mapping[TopicPartition, int],
    target: Mapping[TopicPartition, int],
    commits: Iterable[CommitRanges],
    max_records: int,
) -> dict[TopicPartition, int]:
    """End offsets of the longest run of whole commits (in version order) holding at most
    ``max_records`` new records -- at least one commit when anything is new."""
    ends = {tp: start.get(tp, target[tp]) for tp in target}
    taken = 0
    for commit in commits:
        new: dict[TopicPartition, int] = {}
        count = 0
        for tp, (lo, hi) in commit.ranges.items():
            if tp not in target:
                continue
            first, hi = max(lo, ends[tp]), min(hi, target[tp])
            if hi > first:
                new[tp] = hi
                count += hi - first
        if not new:
            continue
        if taken and taken + count > max_records:
            break
        ends.update(new)
        taken += count
        if taken >= max_records:
            break
    return ends


class CommitIndex:
    """The offset ranges added by recent commits, read from the Delta log as needed.

    Moves forward as the log grows and backward until it covers a batch's
    start offsets; forgets commits that every partition has read past.
    """

    def __init__(self, read_commit: Callable[[int], Commit | None]) -> None:
        self._read_commit = read_commit
        self._commits: list[CommitRanges] = []
        self._low: int | None = None  # lowest version read
        self._high = -1  # highest version read

    def covering(
        self, latest_version: int, start: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int]
    ) -> list[CommitRanges] | None:
        """Commits up to ``latest_version`` holding every offset in [start, target), in
        version order; None when the log no longer has them all."""
        if self._low is None:
            self._low = latest_version + 1
            self._high = latest_version
        for v in range(self._high + 1, latest_version + 1):
            if not self._add(v, at_end=True):
                self._commits, self._low, self._high = [], None, -1
                return None
        self._high = max(self._high, latest_version)
        while self._low > 0 and not self._covers(start, target):
            if not self._add(self._low - 1, at_end=False):
                return None
        self._forget(start)
        return list(self._commits)

    def _add(self, version: int, *, at_end: bool) -> bool:
        changes = self._read_commit(version)
        if changes is None:
            return False
        ranges = commit_ranges(version, changes)
        if ranges.ranges:
            if at_end:
                self._commits.append(ranges)
            else:
                self._commits.insert(0, ranges)
        if at_end:
            self._high = version
        else:
            self._low = version
        return True

    def _covers(self, start: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int]) -> bool:
        lowest: dict[TopicPartition, int] = {}
        for commit in self._commits:
            for tp, (lo, _) in commit.ranges.items():
                lowest[tp] = min(lowest.get(tp, lo), lo)
        return all(lowest.get(tp, target[tp]) <= start.get(tp, target[tp]) for tp in target)

    def _forget(self, start: Mapping[TopicPartition, int]) -> None:
        while self._commits and all(
            hi <= start.get(tp, 0) or tp not in start for tp, (_, hi) in self._commits[0].ranges.items()
        ):
            # Wholly below every start: no later batch can need it.
            self._commits.pop(0)
