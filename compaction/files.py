"""The live data files of a log table as maintenance sees them.

Maintenance needs more of each ``add`` action than the writers do: the
file's size (OPTIMIZE bins, ``retention.bytes``), its newest record
timestamp (``retention.ms``, ``min.compaction.lag.ms``), and the time it was
written (a tombstone's ``delete.retention.ms`` runs from there, as it runs
from a segment's last-modified time in Kafka's log cleaner).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa

from engine.delta_log import add_action_column
from engine.offsets import TopicPartition


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

    def remove_action(self, deletion_ms: int, *, data_change: bool) -> dict:
        """Delta's ``remove`` action for this file."""
        return {
            "remove": {
                "path": self.path,
                "deletionTimestamp": deletion_ms,
                "dataChange": data_change,
                "extendedFileMetadata": True,
                "partitionValues": {"topic": self.tp.topic, "partition": str(self.tp.partition)},
                "size": self.size,
                # Delta allows stats on remove; history reads the offsets a step removed from them.
                "stats": json.dumps(
                    {
                        "numRecords": self.records,
                        "minValues": {"offset": self.min_offset},
                        "maxValues": {"offset": self.max_offset},
                    },
                    separators=(",", ":"),
                ),
            }
        }


@dataclass(frozen=True)
class PartitionLog:
    """A partition's live files in offset order; ``unplannable`` when some file lacks offset statistics."""

    tp: TopicPartition
    files: tuple[LiveFile, ...]
    unplannable: bool = False

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)

    @property
    def start_offset(self) -> int | None:
        return self.files[0].min_offset if self.files else None


def partition_logs(actions: pa.Table, topics: set[str] | None = None) -> dict[TopicPartition, PartitionLog]:
    """Group delta-rs' flattened add actions (``DeltaTable.get_add_actions(flatten=True)``) by partition."""

    def column(name: str) -> list:
        return add_action_column(actions, name)

    grouped: dict[TopicPartition, list[LiveFile]] = defaultdict(list)
    unplannable: set[TopicPartition] = set()
    rows = zip(
        column("path"),
        column("partition.topic"),
        column("partition.partition"),
        column("size_bytes"),
        column("num_records"),
        column("min.offset"),
        column("max.offset"),
        column("max.timestamp"),
        column("modification_time"),
        strict=True,
    )
    for path, topic, partition, size, records, lo, hi, newest, mtime in rows:
        if topics is not None and topic not in topics:
            continue
        tp = TopicPartition(topic, int(partition))
        if records is None or lo is None or hi is None:
            unplannable.add(tp)
            continue
        if records == 0:
            continue
        newest_ms = None if newest is None else int(newest.timestamp() * 1000)
        grouped[tp].append(LiveFile(path, tp, int(size), int(records), int(lo), int(hi), newest_ms, int(mtime)))
    tps = set(grouped) | unplannable
    return {
        tp: PartitionLog(tp, tuple(sorted(grouped.get(tp, ()), key=lambda f: f.min_offset)), tp in unplannable)
        for tp in tps
    }
