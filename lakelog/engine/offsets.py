"""Offset arithmetic as plain functions over values.

Planning which offsets a commit takes, checking that the files Spark wrote
carry exactly those offsets, deriving a partition's log start and end offsets
from Delta file statistics, and resolving Kafka-style offset specifications
("earliest", "latest", ``{topic: {partition: offset}}``, JSON with -2/-1).
None of this touches Spark, so it is tested without it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.engine.errors import InconsistentWriteError, InvalidOffsetError
from lakelog.engine.topics import TopicPartition

EARLIEST = -2  # Kafka's JSON code for "earliest"
LATEST = -1  # Kafka's JSON code for "latest"


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``start`` (inclusive) to ``end`` (exclusive) of one partition."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class FileStats:
    """What a data file's Delta ``add`` action says about it (:meth:`engine.commit.actions.AddFile.file_stats`).

    ``num_records`` and the offsets are None when the file has no statistics;
    the rest is None where a caller built it from less than an ``add`` action.
    """

    path: str
    tp: TopicPartition
    num_records: int | None
    min_offset: int | None
    max_offset: int | None
    data_change: bool = True
    size: int | None = None
    modification_time: int | None = None
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None

    @property
    def has_offset_stats(self) -> bool:
        return self.min_offset is not None and self.max_offset is not None and self.num_records is not None


def plan_ranges(
    end_offsets: Mapping[TopicPartition, int], counts: Mapping[TopicPartition, int]
) -> dict[TopicPartition, OffsetRange]:
    """Give each partition's new records the offsets right after its end offset."""
    plan = {}
    for tp, count in counts.items():
        if count <= 0:
            continue
        start = end_offsets.get(tp, 0)
        plan[tp] = OffsetRange(tp, start, start + count)
    return plan


def verify_written(planned: Mapping[TopicPartition, OffsetRange], files: Iterable[FileStats]) -> None:
    """Raise InconsistentWriteError unless ``files`` hold exactly the planned offsets.

    Each partition's files must each be a contiguous run (``numRecords`` ==
    ``max - min + 1``) and together tile the planned range with no gap and
    no overlap. This is checked before the commit, so a mismatch never
    becomes visible.
    """
    by_tp: dict[TopicPartition, list[FileStats]] = defaultdict(list)
    for f in files:
        by_tp[f.tp].append(f)
    unexpected = sorted(str(tp) for tp in by_tp if tp not in planned)
    if unexpected:
        raise InconsistentWriteError(f"files were written for partitions nobody planned: {unexpected}")
    for tp, want in planned.items():
        got = sorted(by_tp.get(tp, []), key=lambda f: f.min_offset if f.min_offset is not None else -1)
        position = want.start
        for f in got:
            if not f.has_offset_stats:
                raise InconsistentWriteError(f"file {f.path} for {tp} has no offset statistics")
            if f.min_offset != position or f.num_records != f.max_offset - f.min_offset + 1:
                raise InconsistentWriteError(
                    f"{tp}: planned offsets {want.start}..{want.end - 1}, but a file holds "
                    f"{f.num_records} records at {f.min_offset}..{f.max_offset} (expected to start at {position})"
                )
            position = f.max_offset + 1
        if position != want.end:
            raise InconsistentWriteError(
                f"{tp}: planned offsets {want.start}..{want.end - 1}, files cover {want.start}..{position - 1}"
            )


@dataclass(frozen=True)
class PartitionBounds:
    """A partition's log start offset, log end offset (next offset to be written), and file count."""

    start: int
    end: int
    files: int = 0


def partition_bounds(files: Iterable[FileStats]) -> tuple[dict[TopicPartition, PartitionBounds], set[TopicPartition]]:
    """Log start/end offsets per partition from the live files' statistics.

    Returns the bounds and the partitions where some file lacks offset
    statistics (their bounds must be computed from the data instead).
    """
    lo: dict[TopicPartition, int] = {}
    hi: dict[TopicPartition, int] = {}
    count: dict[TopicPartition, int] = defaultdict(int)
    missing: set[TopicPartition] = set()
    for f in files:
        count[f.tp] += 1
        if not f.has_offset_stats:
            missing.add(f.tp)
            continue
        if f.num_records == 0:
            continue
        lo[f.tp] = min(lo.get(f.tp, f.min_offset), f.min_offset)
        hi[f.tp] = max(hi.get(f.tp, f.max_offset + 1), f.max_offset + 1)
    bounds = {tp: PartitionBounds(lo.get(tp, 0), hi.get(tp, 0), count[tp]) for tp in count}
    return bounds, missing


def parse_offset_spec(spec: Any, *, option: str) -> str | dict[str, dict[int, int]]:
    """Normalize ``"earliest"``, ``"latest"``, a dict or its JSON text.

    Dict/JSON values are offsets, with -2 meaning earliest and -1 latest, as
    in Spark's Kafka source. Raises InvalidOffsetError naming ``option``.
    """
    if isinstance(spec, str):
        text = spec.strip()
        if text.lower() in ("earliest", "latest"):
            return text.lower()
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise InvalidOffsetError(
                f"{option} must be 'earliest', 'latest' or JSON like {{\"topic\": {{\"0\": 42}}}}, got {text!r}"
            ) from exc
    if not isinstance(spec, Mapping):
        raise InvalidOffsetError(f"{option} must be 'earliest', 'latest' or a mapping, got {spec!r}")
    result: dict[str, dict[int, int]] = {}
    for topic, partitions in spec.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            raise InvalidOffsetError(
                f"{option}: expected {{topic: {{partition: offset}}}}, got {topic!r}: {partitions!r}"
            )
        parsed: dict[int, int] = {}
        for partition, offset in partitions.items():
            try:
                p = int(partition)
            except (TypeError, ValueError) as exc:
                raise InvalidOffsetError(
                    f"{option}: partition {partition!r} of topic {topic!r} is not an integer"
                ) from exc
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise InvalidOffsetError(
                    f"{option}: offset {offset!r} for {topic}-{p} must be an integer >= 0, "
                    "or -2 (earliest) / -1 (latest)"
                )
            parsed[p] = offset
        result[topic] = parsed
    return result


def resolve_offsets(
    spec: str | Mapping[str, Mapping[int, int]],
    bounds: Mapping[TopicPartition, PartitionBounds],
    *,
    default: str,
    option: str,
) -> dict[TopicPartition, int]:
    """Turn a parsed spec into a concrete offset for every partition in ``bounds``.

    As in Spark's Kafka source, a mapping must give an offset for every
    partition of each topic it names (-2 earliest, -1 latest); topics it does
    not name take ``default``. A partition not in ``bounds`` is an error, as
    is an offset outside the partition's ``[start, end]``.
    """
    if isinstance(spec, str):
        spec_map: Mapping[str, Mapping[int, int]] = {}
        default = spec
    else:
        spec_map = spec
    known = set(bounds)
    for topic, partitions in spec_map.items():
        for p in partitions:
            if TopicPartition(topic, p) not in known:
                raise InvalidOffsetError(f"{option} names {topic}-{p}, which is not a partition being read")
        missing = sorted(tp.partition for tp in known if tp.topic == topic and tp.partition not in partitions)
        if missing:
            raise InvalidOffsetError(
                f"{option} gives offsets for some partitions of topic {topic!r} but not for {missing}: "
                "give every partition of a topic it names (-2 for earliest, -1 for latest)"
            )
    result = {}
    for tp, b in bounds.items():
        offset = spec_map.get(tp.topic, {}).get(tp.partition)
        if offset is None:
            offset = EARLIEST if default == "earliest" else LATEST
        if offset == EARLIEST:
            result[tp] = b.start
        elif offset == LATEST:
            result[tp] = b.end
        else:
            if not b.start <= offset <= b.end:
                raise InvalidOffsetError(
                    f"{option}: offset {offset} for {tp} is outside the log "
                    f"(log start offset {b.start}, log end offset {b.end})"
                )
            result[tp] = offset
    return result


def read_ranges(
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
) -> dict[TopicPartition, OffsetRange]:
    """Pair starting and ending offsets; an ending offset before the start is an error."""
    ranges = {}
    for tp, start in starts.items():
        end = ends[tp]
        if end < start:
            raise InvalidOffsetError(f"ending offset {end} for {tp} is before its starting offset {start}")
        ranges[tp] = OffsetRange(tp, start, end)
    return ranges


def counts_by_partition(files: Iterable[FileStats]) -> dict[TopicPartition, int]:
    """Records per partition in ``files`` (from their statistics)."""
    counts: dict[TopicPartition, int] = defaultdict(int)
    for f in files:
        counts[f.tp] += f.num_records or 0
    return {tp: n for tp, n in counts.items() if n > 0}
