"""Reading a partition's records from its Parquet files with pyarrow, without Spark.

Consumers poll a few hundred records at a time; a Spark job per poll would
cost more than the records. The files of a partition are chosen by their
Delta offset statistics (the same pruning a Spark read does), read with
pyarrow, and cut to the wanted offsets.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.engine.arrow_columns import array, empty_table, scalar, to_numpy
from lakelog.engine.commit.data_files import written_by_lakelog
from lakelog.engine.commit.state import PartitionFiles, TableState, overlapping
from lakelog.engine.errors import CorruptLogError, DataLossError, ForeignRowsWarning, LakelogError, error_for_os_error
from lakelog.engine.offsets import FileStats, PartitionBounds
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.storage.object_store import filesystem, is_local
from lakelog.engine.topics import TopicPartition

_DATA_COLUMNS = [f.name for f in LOG_ARROW_SCHEMA if f.name not in ("topic", "partition")]
_DATA_SCHEMA = pa.schema([LOG_ARROW_SCHEMA.field(n) for n in _DATA_COLUMNS])


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
        self._local = is_local(uri)

    def _open(self, path: str) -> pa.NativeFile | BinaryIO:
        # A local file as Arrow's own file, not fsspec's (importing it is ~60 ms of a short-lived
        # consumer's start) nor Python's: the pages Arrow reads from a Python file are Python
        # buffers, and a decoding thread of Arrow's pool may drop the last of them after the read
        # returned; if the interpreter is finalizing by then that thread cannot take the GIL and
        # the process aborts ("terminate called without an active exception", exit -6; seen at
        # the exit of a short script that polled once, cf. apache/arrow#34314).
        full = f"{self._root}/{unquote(path)}"
        return pa.OSFile(full) if self._local else self._fs.open(full, "rb")

    def _decode_threads(self) -> bool:
        """Whether Arrow's pool may decode columns: only for Arrow's own files (see :meth:`_open`);
        a remote file's bytes are Python buffers, decoded on the calling thread."""
        return self._local

    def read(
        self,
        files: PartitionFiles | Iterable[FileStats],
        tp: TopicPartition,
        start: int,
        end: int | None = None,
        max_records: int | None = None,
    ) -> pa.Table:
        """Records of ``tp`` with start <= offset < end, in offset order (log columns), one
        row per offset.

        Correct for any layout of files a Delta writer may leave (overlapping,
        unsorted, split or merged offset ranges, files without statistics).
        Rows that did not come through lakelog are left out with a
        :class:`ForeignRowsWarning`: those at or past the partition's committed
        end or below the log start retention or DeleteRecords recorded (``files.end`` and
        ``files.start`` of a :class:`PartitionFiles`), and a second row at an
        offset (the row of lakelog's own file wins, else the earliest written).
        With ``max_records``, files are read in order of their first offset, a
        row group at a time (Kafka's consumer fetches a bounded slice too), only
        until that many records are in hand, and the result stops before the
        first offset of the first row group or file left unread: a record there
        or after may sit in it, so nothing is ever skipped (the result may hold
        more than ``max_records``).
        """
        parts = []
        held, top = 0, -1
        in_order = True  # every part ascending, each after the one before: no sort needed
        if isinstance(files, PartitionFiles):
            if files.start is not None and start < files.start:
                start = files.start
                # DeleteRecords leaves lakelog's own rows below the start in the file it cut
                # through (deleted records, as in a Kafka segment); another writer's are foreign.
                below = (f for f in files.ordered if f.min_offset < start)  # type: ignore[operator]
                if any(not written_by_lakelog(f.path) for f in below):
                    _warn_foreign(tp, f"rows below its log start offset {files.start}")
            if files.end is not None:
                end = files.end if end is None else min(end, files.end)
                if files.past_end:
                    _warn_foreign(tp, f"rows at or past its end offset {files.end}")
            # A partition's files from a table state are found by bisection (a long log
            # costs a seek no more than a short one).
            candidates = files.covering(start, end)
        else:
            candidates = files_for_range(files, tp, start, end)
        limit = end
        # A file without statistics may hold any offset: then every candidate is read.
        may_stop = max_records is not None and all(f.has_offset_stats for f in candidates[-1:])
        ranks = _preference(candidates) if overlapping(candidates) else None
        for i, f in enumerate(candidates):
            rest = candidates[i + 1 :]
            stop = False
            for part, unread in self._pieces(f, start, end, by_row_group=may_stop):
                part, ascending = _within(part, start, end)
                in_order = in_order and ascending and (not part.num_rows or part.column("offset")[0].as_py() > top)
                if ranks is not None:
                    part = part.append_column(_RANK, pa.repeat(scalar(ranks[f.path], pa.int32()), part.num_rows))
                parts.append(part)
                held += part.num_rows
                if part.num_rows:
                    offsets = part.column("offset")
                    top = max(top, offsets[-1].as_py() if ascending else pc.max(offsets).as_py())
                # Everything below the first offset left unread (the next row group of this
                # file, the next file) is in hand; stop once that is enough (a merged file's
                # rows may all lie past it: then read on).
                edges = [b for b in (unread, rest[0].min_offset if rest else None) if b is not None]
                if may_stop and edges:
                    bound = min(edges) if end is None else min(end, *edges)
                    below = (
                        held
                        if top < bound
                        else sum(
                            pc.sum(pc.less(p.column("offset"), scalar(bound, pa.int64()))).as_py() or 0 for p in parts
                        )
                    )
                    if below >= max_records:  # type: ignore[operator]
                        limit, stop = bound, True
                        break
            if stop:
                break
        if not parts:
            table = empty_table(_DATA_SCHEMA)
        elif ranks is None:
            table = pa.concat_tables(parts)
            if not in_order:
                table = table.sort_by("offset")
        else:
            table = _one_per_offset(pa.concat_tables(parts), tp)
        if limit is not None and limit != end and table.num_rows:
            table, _ = _within(table, 0, limit)
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
        if len(offsets):
            end = max(end, int(offsets[-1].as_py()) + 1)
        stable = min(end, state.stable_end(tp))  # a pending reservation holds readers back
        start = int(offsets[0].as_py()) if len(offsets) else end
        return PartitionBounds(min(start, stable), stable, len(files))

    def _pieces(
        self, held: FileStats, start: int, end: int | None, *, by_row_group: bool
    ) -> Iterator[tuple[pa.Table, int | None]]:
        """The rows of one data file that may hold offsets in [start, end): whole, or a row
        group at a time in order of their first offset, each with the first offset of the
        row groups still unread (None when none are left). Row groups without statistics
        are read with the first piece, so what is left unread is always bounded."""
        path = held.path
        if not by_row_group:
            yield self.read_file(path, offsets=(start, end), held=held), None
            return
        try:
            handle = self._open(path)
            parquet = pq.ParquetFile(handle)
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise data_file_error(exc, path, held) from exc
        with handle:
            groups = _row_groups(parquet.metadata, start, end)
            firsts = _group_firsts(parquet.metadata, groups)
            unknown = [g for g in groups if firsts[g] is None]
            known = sorted((g for g in groups if firsts[g] is not None), key=lambda g: firsts[g])  # type: ignore[arg-type,return-value]
            batches = [unknown + known[:1], *([g] for g in known[1:])] if known else [unknown]
            for i, batch in enumerate(batches):
                following = known[i + 1] if i + 1 < len(known) else None
                rows = parquet.read_row_groups(batch, columns=_DATA_COLUMNS, use_threads=self._decode_threads())
                yield _normalized(rows), None if following is None else firsts[following]

    def read_file(
        self,
        path: str,
        columns: Sequence[str] | None = None,
        offsets: tuple[int, int | None] | None = None,
        *,
        held: FileStats | None = None,
    ) -> pa.Table:
        """The rows of one data file (its ``add`` action's path), without the partition columns.

        Raises DataLossError when the file is missing, CorruptLogError when it is not
        the log's Parquet (see :func:`data_file_error`; ``held``, the file's ``add``
        statistics, names the topic-partition and offsets it held).

        With ``offsets`` = (start, end), only the row groups whose offset
        statistics overlap [start, end) are read (the rows may still hold
        more): a seek into a large file costs a row group, not the file,
        as Kafka's offset index makes a seek cost one index lookup.
        """
        wanted = list(columns) if columns is not None else _DATA_COLUMNS
        try:
            with self._open(path) as handle:
                # ParquetFile, not pq.read_table: that one goes through pyarrow.dataset, whose
                # import imports pandas.
                parquet = pq.ParquetFile(handle)
                if offsets is None:
                    table = parquet.read(columns=wanted, use_threads=self._decode_threads())
                else:
                    groups = _row_groups(parquet.metadata, *offsets)
                    table = parquet.read_row_groups(groups, columns=wanted, use_threads=self._decode_threads())
        except (OSError, pa.ArrowException, ValueError, KeyError) as exc:
            raise data_file_error(exc, path, held) from exc
        return _normalized(table)

    def first_at(self, files: PartitionFiles, tp: TopicPartition, timestamp_ms: int) -> tuple[int, int] | None:
        """Kafka's ``offsetsForTimes`` for one partition: the earliest offset whose timestamp
        is >= ``timestamp_ms`` and that timestamp (ms), or None when every record is older.

        Files whose timestamp statistics say all their records are older are not read;
        the others are read two columns at a time. Where files overlap (another writer's
        rows may repeat an offset) the partition is read as :meth:`read` reads it.
        """
        threshold = scalar(timestamp_ms * 1000, pa.timestamp("us", tz="UTC"))
        if files.past_end or overlapping(files.covering(0, files.end)):
            records = self.read(files, tp, 0)
            stamps = records.column("timestamp").cast(pa.timestamp("us", tz="UTC"))
            newer = records.filter(pc.greater_equal(stamps, threshold))
            if not newer.num_rows:
                return None
            return int(newer.column("offset")[0].as_py()), int(
                newer.column("timestamp").cast(pa.int64())[0].as_py()
            ) // 1000
        best: tuple[int, int] | None = None
        for f in files.covering(0, files.end):
            if best is not None and f.has_offset_stats and f.min_offset >= best[0]:
                break
            if f.max_timestamp_ms is not None and f.max_timestamp_ms < timestamp_ms:
                continue
            part = self.read_file(f.path, ["offset", "timestamp"], held=f)
            stamps = part.column("timestamp").cast(pa.timestamp("us", tz="UTC"))
            newer = part.filter(pc.greater_equal(stamps, threshold))
            if not newer.num_rows:
                continue
            first = pc.min(newer.column("offset")).as_py()
            if best is None or first < best[0]:
                row = newer.filter(pc.equal(newer.column("offset"), scalar(first, pa.int64())))
                best = (int(first), int(row.column("timestamp").cast(pa.int64())[0].as_py()) // 1000)
        return best

    def max_timestamp(self, files: PartitionFiles, tp: TopicPartition) -> tuple[int, int] | None:
        """The offset and timestamp (ms) of the record with the largest timestamp, the
        earliest such offset on a tie, as Kafka's ListOffsets answers for MAX_TIMESTAMP
        (-3, KIP-734); None when the partition holds no record.

        Only the files whose timestamp statistics reach the highest maximum (and files
        without statistics) are read. Where files overlap the partition is read as
        :meth:`read` reads it.
        """
        if files.past_end or overlapping(files.covering(0, files.end)):
            return _first_of_max(self.read(files, tp, 0))
        candidates = list(files.covering(0, files.end))
        known = [f.max_timestamp_ms for f in candidates if f.max_timestamp_ms is not None]
        top = max(known, default=None)
        best: tuple[int, int] | None = None
        for f in candidates:
            if f.max_timestamp_ms is not None and top is not None and f.max_timestamp_ms < top:
                continue
            found = _first_of_max(self.read_file(f.path, ["offset", "timestamp"], held=f))
            if found is not None and (best is None or (found[1], -found[0]) > (best[1], -best[0])):
                best = found
        return best


def _first_of_max(rows: pa.Table) -> tuple[int, int] | None:
    """(offset, timestamp ms) of the earliest row holding the largest timestamp of ``rows``."""
    if not rows.num_rows:
        return None
    stamps = rows.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    top = pc.max(stamps)
    offset = pc.min(rows.column("offset").filter(pc.equal(stamps, top))).as_py()
    return int(offset), int(top.as_py()) // 1000


def data_file_error(exc: BaseException, path: str, held: FileStats | None = None) -> LakelogError:
    """The named error for a data file the log references that cannot be read: missing
    (DataLossError), not Parquet or not the log's columns (CorruptLogError), or refused by
    the storage (:func:`engine.errors.error_for_os_error`). The message names the file and,
    given its ``add`` statistics ``held``, the topic-partition and offsets it held."""
    where = f"data file {unquote(path)}{held_by(held)}"
    if isinstance(exc, FileNotFoundError):
        return DataLossError(
            f"{where} is missing from the store: its records are lost "
            "(lakelog check --repair --drop-missing-files records the loss and drops the file)"
        )
    if isinstance(exc, OSError) and not isinstance(exc, pa.ArrowException):
        return error_for_os_error(exc, f"reading {where}")
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return CorruptLogError(f"{where} cannot be read as the log's Parquet: {first} (see lakelog check)")


def held_by(held: FileStats | None) -> str:
    """What a data file held, as an error message names it: " (t-0 offsets 2..4)"."""
    if held is None:
        return ""
    if held.min_offset is None or held.max_offset is None:
        return f" ({held.tp}, offsets unknown: the file has no statistics)"
    return f" ({held.tp} offsets {held.min_offset}..{held.max_offset})"


# Which of two rows at one offset a read keeps (lower wins); dropped before returning.
_RANK = "__lakelog_rank"


def _preference(files: Sequence[FileStats]) -> dict[str, int]:
    """Per file, the rank of its rows when two files hold the same offset: lakelog's own
    files first (another writer's row can only repeat an offset lakelog had committed),
    then by when the file was written (the earlier one held the offset first)."""
    others = sorted(
        (f for f in files if not written_by_lakelog(f.path)),
        key=lambda f: (f.modification_time is None, f.modification_time or 0, f.path),
    )
    ranks = {f.path: 0 for f in files if written_by_lakelog(f.path)}
    ranks.update({f.path: i + 1 for i, f in enumerate(others)})
    return ranks


def _within(rows: pa.Table, start: int, end: int | None) -> tuple[pa.Table, bool]:
    """The rows whose offsets lie in [start, end), and whether they are in ascending offset
    order. lakelog writes each file's rows in offset order: then the range is a slice (no
    copy); rows another writer left unordered are filtered."""
    column = rows.column("offset")
    if not column.null_count:
        offsets = to_numpy(column)
        if bool(np.all(offsets[1:] > offsets[:-1])):
            first = int(np.searchsorted(offsets, start, side="left"))
            last = len(offsets) if end is None else int(np.searchsorted(offsets, end, side="left"))
            return rows.slice(first, max(0, last - first)), True
    keep = pc.greater_equal(column, scalar(start, pa.int64()))
    if end is not None:
        keep = pc.and_(keep, pc.less(column, scalar(end, pa.int64())))
    return rows.filter(keep), False


def _one_per_offset(rows: pa.Table, tp: TopicPartition) -> pa.Table:
    """``rows`` (with a rank column) in offset order, the best-ranked row of each offset."""
    rows = rows.sort_by([("offset", "ascending"), (_RANK, "ascending")])
    offsets = to_numpy(rows.column("offset"))
    keep = np.ones(len(offsets), dtype=bool)
    keep[1:] = offsets[1:] != offsets[:-1]
    if not keep.all():
        _warn_foreign(tp, "a second row at an offset lakelog had already committed")
        rows = rows.filter(array(keep, pa.bool_()))
    return rows.drop_columns([_RANK])


def _warn_foreign(tp: TopicPartition, what: str) -> None:
    # One text per partition and kind, so the default warning filter shows it once, not once per poll.
    warnings.warn(
        ForeignRowsWarning(
            f"{tp}: the log table holds {what}, written by something other than lakelog "
            "(a plain Delta append?); those rows are left out and move no offset"
        ),
        stacklevel=3,
    )


def with_partition_columns(tp: TopicPartition, rows: pa.Table) -> pa.Table:
    """``rows`` of one data file (no partition columns) with ``topic`` and ``partition`` in front."""
    n = rows.num_rows
    return rows.add_column(0, "topic", pa.repeat(scalar(tp.topic, pa.string()), n)).add_column(
        1, "partition", pa.repeat(scalar(tp.partition, pa.int32()), n)
    )


def _normalized(table: pa.Table) -> pa.Table:
    # Spark writes timestamps without a time zone (and maybe in ns); normalize to the log schema.
    return table.cast(pa.schema([LOG_ARROW_SCHEMA.field(n) for n in table.column_names]))


def _offset_leaf(metadata: pq.FileMetaData) -> int | None:
    first = metadata.row_group(0)
    return next((i for i in range(first.num_columns) if first.column(i).path_in_schema == "offset"), None)


def _group_firsts(metadata: pq.FileMetaData, groups: Sequence[int]) -> dict[int, int | None]:
    """The smallest offset of each of ``groups`` by its statistics (None without them)."""
    leaf = _offset_leaf(metadata) if metadata.num_row_groups else None
    firsts: dict[int, int | None] = {}
    for g in groups:
        stats = None if leaf is None else metadata.row_group(g).column(leaf).statistics
        firsts[g] = int(stats.min) if stats is not None and stats.has_min_max else None
    return firsts


def _row_groups(metadata: pq.FileMetaData, start: int, end: int | None) -> list[int]:
    """Row groups that may hold offsets in [start, end) by their ``offset`` statistics."""
    if metadata.num_row_groups == 0:
        return []
    leaf = _offset_leaf(metadata)
    chosen = []
    for g in range(metadata.num_row_groups):
        stats = None if leaf is None else metadata.row_group(g).column(leaf).statistics
        if stats is not None and stats.has_min_max and (stats.max < start or (end is not None and stats.min >= end)):
            continue
        chosen.append(g)
    return chosen
