"""Data files written from the driver with pyarrow, committed as Delta ``add`` actions.

Records a producer (or a transaction, a heartbeat, an offset commit) has
in hand are already an Arrow table on the driver. Writing them through a
Spark job costs a job (~0.1-0.3 s here) per commit; writing one Parquet file
per partition with pyarrow and handing Delta the ``add`` actions costs a few
milliseconds. The files follow Delta's layout for a table partitioned by
``topic`` and ``partition`` (Hive-style directories, partition columns not
stored in the file) and carry the statistics Spark would collect for
``delta.dataSkippingStatsColumns = offset,timestamp``, in Delta's stats JSON
format (timestamps in ms with a ``Z``, as Delta's own writer emits them), so
Delta's and delta-rs' readers prune them like any other file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.object_store import filesystem
from engine.offsets import FileStats, TopicPartition
from engine.schema import LOG_ARROW_SCHEMA, PARTITION_COLUMNS, STATS_COLUMNS

# Row groups small enough that a seek into a large (OPTIMIZEd) file reads
# little more than it needs: the offset statistics of each group prune it.
ROW_GROUP_ROWS = 65_536

_FILE_COLUMNS = [f.name for f in LOG_ARROW_SCHEMA if f.name not in PARTITION_COLUMNS]


@dataclass(frozen=True)
class DataFile:
    """A written, not yet committed data file: its ``add`` action and its offsets."""

    add_json: str
    stats: FileStats
    full_path: str


def _stats_time(value: dt.datetime | None, *, upper: bool) -> str | None:
    if value is None:
        return None
    ms = value.replace(microsecond=(value.microsecond // 1000) * 1000)
    # Delta truncates to ms; a max that lost its micros would exclude its own row.
    if upper and ms != value:
        ms += dt.timedelta(milliseconds=1)
    return ms.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms.microsecond // 1000:03d}Z"


def file_stats_json(part: pa.Table) -> str:
    """Delta's ``stats`` for one file's rows (``offset`` and ``timestamp`` columns)."""
    mins: dict[str, object] = {}
    maxs: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for name in STATS_COLUMNS:
        column = part.column(name)
        bounds = pc.min_max(column)
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        if name == "timestamp":
            lo, hi = _stats_time(lo, upper=False), _stats_time(hi, upper=True)
        if lo is not None:
            mins[name], maxs[name] = lo, hi
        nulls[name] = column.null_count
    return json.dumps(
        {"numRecords": part.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )


class DataFileWriter:
    """Writes Parquet files into a log table's partition directories."""

    def __init__(self, uri: str) -> None:
        self._fs, self._root = filesystem(uri)

    def write(
        self, table: pa.Table, *, data_change: bool = True, modification_time_ms: int | None = None
    ) -> list[DataFile]:
        """One file per (topic, partition) of ``table`` (log columns, rows grouped
        by partition in offset order); nothing is committed.

        ``data_change=False`` marks files that only rearrange records already
        in the table (OPTIMIZE); ``modification_time_ms`` replaces the ``add``
        action's write time (a rewrite keeps its sources' age, as Kafka's log
        cleaner keeps a cleaned segment's last-modified time).
        """
        files = []
        topics = table.column("topic").to_pylist()
        partitions = table.column("partition").to_pylist()
        start = 0
        for end in range(1, len(topics) + 1):
            if end < len(topics) and (topics[end], partitions[end]) == (topics[start], partitions[start]):
                continue
            tp = TopicPartition(topics[start], partitions[start])
            files.append(self._write_one(tp, table.slice(start, end - start), data_change, modification_time_ms))
            start = end
        return files

    def _write_one(
        self, tp: TopicPartition, part: pa.Table, data_change: bool, modification_time_ms: int | None
    ) -> DataFile:
        relative = (
            f"topic={quote(tp.topic, safe='')}/partition={tp.partition}/part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        )
        full = f"{self._root}/{relative}"
        self._fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)
        with self._fs.open(full, "wb") as handle:
            pq.write_table(part.select(_FILE_COLUMNS), handle, compression="snappy", row_group_size=ROW_GROUP_ROWS)
        size = self._fs.size(full)
        add = {
            "path": relative,
            "partitionValues": {"topic": tp.topic, "partition": str(tp.partition)},
            "size": size,
            "modificationTime": int(time.time() * 1000) if modification_time_ms is None else modification_time_ms,
            "dataChange": data_change,
            "stats": file_stats_json(part),
        }
        return DataFile(json.dumps({"add": add}, separators=(",", ":")), FileStats.from_add(add), full)

    def discard(self, files: list[DataFile]) -> None:
        """Delete files that are certain never to have been committed."""
        for f in files:
            with contextlib.suppress(OSError):  # VACUUM removes what is left
                self._fs.rm(f.full_path)
