"""Reading a partition's records from its Parquet files with pyarrow, without Spark.

Consumers poll a few hundred records at a time; a Spark job per poll would
cost more than the records. The files of a partition are chosen by their
Delta offset statistics (the same pruning a Spark read does), read with
pyarrow, and cut to the wanted offsets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.commit.state import PartitionFiles, TableState
from engine.object_store import filesystem
from engine.offsets import FileStats, PartitionBounds, TopicPartition
from engine.schema import LOG_ARROW_SCHEMA

_DATA_COLUMNS = [f.name for f in LOG_ARROW_SCHEMA if f.name not in ("topic", "partition")]


def files_for_range(files: Iterable[FileStats], tp: TopicPartition, start: int, end: int | None) -> list[FileStats]:
    """The files of ``tp`` that may hold offsets in [start, end), by first offset.

    Files without offset statistics are always included, last (they cannot be pruned).
    """
    chosen = []
    for f in files:
        if f.tp != tp or f.num_records == 0:
            continue
        if f.has_offset_stats and (f.max_offset < start or (end is not None and f.min_offset >= end)):
            continue
        chosen.append(f)
    return sorted(chosen, key=lambda f: (f.min_offset is None, f.min_offset or 0, f.max_offset or 0))


class PartitionReader:
    """Reads records of one table's partitions. Thread-safe (no shared mutable state)."""

    def __init__(self, uri: str) -> None:
        self._fs, self._root = filesystem(uri)

    def read(
        self,
        files: PartitionFiles | Iterable[FileStats],
        tp: TopicPartition,
        start: int,
        end: int | None = None,
        max_records: int | None = None,
    ) -> pa.Table:
        """Records of ``tp`` with start <= offset < end, in offset order (log columns).

        Correct for any layout of files a Delta writer may leave (overlapping,
        unsorted, split or merged offset ranges, files without statistics).
        With ``max_records``, files are read in order of their first offset
        only until that many records are in hand, and the result stops before
        the first offset of the first file left unread: a record there or after
        may sit in that file, so nothing is ever skipped (the result may hold
        more than ``max_records``).
        """
        parts = []
        held, top = 0, -1
        # A partition's files from a table state are found by bisection (a long log costs a
        # seek no more than a short one); any other collection of files is filtered.
        candidates = (
            files.covering(start, end) if isinstance(files, PartitionFiles) else files_for_range(files, tp, start, end)
        )
        limit = end
        # A file without statistics may hold any offset: then every candidate is read.
        may_stop = max_records is not None and all(f.has_offset_stats for f in candidates[-1:])
        for i, f in enumerate(candidates):
            part = self.read_file(f.path, offsets=(start, end))
            offsets = part.column("offset")
            keep = pc.greater_equal(offsets, start)
            if end is not None:
                keep = pc.and_(keep, pc.less(offsets, end))
            part = part.filter(keep)
            parts.append(part)
            held += part.num_rows
            if part.num_rows:
                top = max(top, pc.max(part.column("offset")).as_py())
            rest = candidates[i + 1 :]
            if may_stop and rest:
                # Everything below the next file's first offset is in hand; stop once that
                # is enough (a merged file's rows may all lie past it: then read on).
                bound = rest[0].min_offset if end is None else min(end, rest[0].min_offset)
                below = (
                    held if top < bound else sum(pc.sum(pc.less(p.column("offset"), bound)).as_py() or 0 for p in parts)
                )
                if below >= max_records:  # type: ignore[operator]
                    limit = bound
                    break
        schema = pa.schema([LOG_ARROW_SCHEMA.field(n) for n in _DATA_COLUMNS])
        table = pa.concat_tables(parts).sort_by("offset") if parts else schema.empty_table()
        if limit is not None and limit != end and table.num_rows:
            table = table.filter(pc.less(table.column("offset"), limit))
        return with_partition_columns(tp, table)

    def bounds(self, state: TableState, tp: TopicPartition) -> PartitionBounds:
        """Log start and end offsets of ``tp`` in ``state``: from file statistics, else (a file
        another Delta writer left without them) from the offsets themselves."""
        found = state.bounds(tp)
        if found is not None:
            return found
        files = state.files_of(tp)
        offsets = self.read(files, tp, 0).column("offset")
        end = state.end_offset(tp)
        if not len(offsets):
            return PartitionBounds(end, end, len(files))
        return PartitionBounds(int(offsets[0].as_py()), max(end, int(offsets[-1].as_py()) + 1), len(files))

    def read_file(
        self, path: str, columns: Sequence[str] | None = None, offsets: tuple[int, int | None] | None = None
    ) -> pa.Table:
        """The rows of one data file (its ``add`` action's path), without the partition columns.

        With ``offsets`` = (start, end), only the row groups whose offset
        statistics overlap [start, end) are read (the rows may still hold
        more): a seek into a large file costs a row group, not the file,
        as Kafka's offset index makes a seek cost one index lookup.
        """
        wanted = list(columns) if columns is not None else _DATA_COLUMNS
        with self._fs.open(f"{self._root}/{unquote(path)}", "rb") as handle:
            if offsets is None:
                table = pq.read_table(handle, columns=wanted)
            else:
                parquet = pq.ParquetFile(handle)
                table = parquet.read_row_groups(_row_groups(parquet.metadata, *offsets), columns=wanted)
        # Spark writes timestamps without a time zone (and maybe in ns); normalize to the log schema.
        return table.cast(pa.schema([LOG_ARROW_SCHEMA.field(n) for n in table.column_names]))

    def first_at(self, files: Iterable[FileStats], tp: TopicPartition, timestamp_ms: int) -> tuple[int, int] | None:
        """Kafka's ``offsetsForTimes`` for one partition: the earliest offset whose timestamp
        is >= ``timestamp_ms`` and that timestamp (ms), or None when every record is older.

        Files whose timestamp statistics say all their records are older are not read;
        the others are read two columns at a time.
        """
        threshold = pa.scalar(timestamp_ms * 1000, pa.timestamp("us", tz="UTC"))
        best: tuple[int, int] | None = None
        for f in files_for_range(files, tp, 0, None):
            if best is not None and f.has_offset_stats and f.min_offset >= best[0]:
                break
            if f.max_timestamp_ms is not None and f.max_timestamp_ms < timestamp_ms:
                continue
            part = self.read_file(f.path, ["offset", "timestamp"])
            stamps = part.column("timestamp").cast(pa.timestamp("us", tz="UTC"))
            newer = part.filter(pc.greater_equal(stamps, threshold))
            if not newer.num_rows:
                continue
            first = pc.min(newer.column("offset")).as_py()
            if best is None or first < best[0]:
                row = newer.filter(pc.equal(newer.column("offset"), first))
                best = (int(first), int(row.column("timestamp").cast(pa.int64())[0].as_py()) // 1000)
        return best


def with_partition_columns(tp: TopicPartition, rows: pa.Table) -> pa.Table:
    """``rows`` of one data file (no partition columns) with ``topic`` and ``partition`` in front."""
    n = rows.num_rows
    return rows.add_column(0, "topic", pa.array([tp.topic] * n, pa.string())).add_column(
        1, "partition", pa.array([tp.partition] * n, pa.int32())
    )


def _row_groups(metadata: pq.FileMetaData, start: int, end: int | None) -> list[int]:
    """Row groups that may hold offsets in [start, end) by their ``offset`` statistics."""
    if metadata.num_row_groups == 0:
        return []
    first = metadata.row_group(0)
    leaf = next((i for i in range(first.num_columns) if first.column(i).path_in_schema == "offset"), None)
    chosen = []
    for g in range(metadata.num_row_groups):
        stats = None if leaf is None else metadata.row_group(g).column(leaf).statistics
        if stats is not None and stats.has_min_max and (stats.max < start or (end is not None and stats.min >= end)):
            continue
        chosen.append(g)
    return chosen
