"""Data files written from the driver, committed as Delta ``add`` actions.

Records a producer (or a transaction, a heartbeat, an offset commit) has
in hand are already an Arrow table on the driver. Writing them through a
Spark job costs a job (~0.1-0.3 s here) per commit; writing one Parquet file
per partition with pyarrow (or, for a file of consecutive records without headers, put
together directly: :mod:`engine.commit.direct_parquet`) and handing Delta the ``add``
actions costs a few milliseconds. The files follow Delta's layout for a table partitioned by
``topic`` and ``partition`` (Hive-style directories, partition columns not
stored in the file) and carry the statistics Spark would collect for
``delta.dataSkippingStatsColumns = offset,timestamp``, in Delta's stats JSON
format (timestamps in ms with a ``Z``, as Delta's own writer emits them), so
Delta's and delta-rs' readers prune them like any other file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.engine.arrow_columns import to_numpy
from lakelog.engine.commit.actions import AddFile, stats_time
from lakelog.engine.commit.direct_parquet import (
    consecutive_offsets,
    encode_log_file,
    encode_records_file,
    first_offset_at,
    first_offset_bytes,
)
from lakelog.engine.offsets import FileStats
from lakelog.engine.schema import LOG_ARROW_SCHEMA, PARTITION_COLUMNS, STATS_COLUMNS
from lakelog.engine.storage.object_store import filesystem, is_s3, make_directories, sync_all, write_new_file
from lakelog.engine.storage.unique_ids import new_uuid
from lakelog.engine.topics import TopicMetadata, TopicPartition

log = logging.getLogger(__name__)

# Row groups small enough that a seek into a large (OPTIMIZEd) file reads
# little more than it needs: the offset statistics of each group prune it.
ROW_GROUP_ROWS = 65_536
# What a local data file's writes are gathered into before they reach the file.
_WRITE_BUFFER_BYTES = 1 << 20
# Rows up to this size are encoded in memory and written with one call; larger ones (a
# rewrite, a Spark task's run) stream through the buffer above, so memory never holds a
# large file twice.
_IN_MEMORY_BYTES = 8 << 20

_FILE_COLUMNS = [f.name for f in LOG_ARROW_SCHEMA if f.name not in PARTITION_COLUMNS]
# Parquet min/max statistics where a reader prunes by them; computing them over keys,
# values and headers would cost a fifth of the write and prune nothing.
_STATISTICS = [name for name in _FILE_COLUMNS if name not in ("key", "value", "headers")]
# Dictionary-encoded only where a file's values repeat (one producer id and epoch, a timestamp
# type, keys and header names drawn from few): values, offsets, sequences and timestamps are
# nearly all distinct, and hashing each of them into a dictionary the writer then gives up
# on cost a fifth to a third of a data file's encoding (100-byte values, pyarrow 26)
# and made the file larger, not smaller.
_DICTIONARY = ["timestamp_type", "key", "headers.list.element.key", "producer_id", "producer_epoch"]


# A renumberable file's offset column: Parquet's DELTA_BINARY_PACKED (a header with the first
# value, then deltas: consecutive offsets are all deltas of 1, a few bytes per 256 records) in
# one uncompressed page with no statistics, so the file holds its first offset in one place and
# nowhere else; smaller than the column written plain and compressed.
_RENUMBERABLE_COMPRESSION = {name: "none" if name == "offset" else "snappy" for name in _FILE_COLUMNS}
_RENUMBERABLE_STATISTICS = [name for name in _STATISTICS if name != "offset"]


def _encode(columns: pa.Table, sink: Any, *, renumberable: bool = False) -> pq.FileMetaData:
    """Write ``columns`` (a data file's) as Parquet into ``sink``; ``renumberable``: with the
    offset column laid out so :meth:`DataFileWriter.renumber` can rewrite it in place. Returns
    the file's footer (as the writer made it: nothing is read back)."""
    footer: list[pq.FileMetaData] = []
    pq.write_table(
        columns,
        sink,
        compression=_RENUMBERABLE_COMPRESSION if renumberable else "snappy",
        row_group_size=ROW_GROUP_ROWS,
        write_statistics=_RENUMBERABLE_STATISTICS if renumberable else _STATISTICS,
        use_dictionary=_DICTIONARY,
        column_encoding={"offset": "DELTA_BINARY_PACKED"} if renumberable else None,
        # One page per row group (parquet-cpp starts a page every 20,000 rows by default): its
        # header is the one place that holds the first offset.
        max_rows_per_page=ROW_GROUP_ROWS if renumberable else None,
        metadata_collector=footer,
    )
    return footer[0]


def _first_offset_position(data: pa.Buffer, metadata: pq.FileMetaData, first: int, count: int) -> int | None:
    """Where the Parquet file ``data`` (written by :func:`_encode` with ``renumberable``, its
    footer ``metadata``, its records numbered ``first`` .. ``first + count - 1``) holds its
    first offset: the byte position of that value in its offset column's one page, or None
    when the file does not hold the offsets so (more than one row group or page, another
    layout), looked up in its footer and checked byte for byte."""
    if metadata.num_row_groups != 1:
        return None
    group = metadata.row_group(0)
    leaf = next((i for i in range(group.num_columns) if group.column(i).path_in_schema == "offset"), None)
    if leaf is None:
        return None
    chunk = group.column(leaf)
    if chunk.compression != "UNCOMPRESSED" or chunk.has_dictionary_page or chunk.statistics is not None:
        return None
    # One page: its header and definition levels, then the values, which end the column chunk.
    values = consecutive_offsets(first, count)
    end = chunk.data_page_offset + chunk.total_compressed_size
    start = end - len(values)
    if start < chunk.data_page_offset or not data.slice(start, len(values)).equals(pa.py_buffer(values)):
        return None
    return start + first_offset_at(count)


# lakelog's data files are named with this prefix, so a reader can tell them from files
# another writer appended when two files hold the same offset (engine.commit.partition_reader).
FILE_PREFIX = "lakelog-"


# A file holding only consumer-group offset commits is named ``lakelog-offsets-*``: a member
# following its group's membership skips such files (engine.groups.coordinator).
OFFSETS_LABEL = "offsets-"


def holds_only_offsets(path: str) -> bool:
    """Whether the data file at ``path`` was written by lakelog holding offset commits only."""
    return path.rsplit("/", 1)[-1].startswith(FILE_PREFIX + OFFSETS_LABEL)


def written_by_lakelog(path: str) -> bool:
    """Whether the data file at ``path`` (an ``add`` action's path) was written by lakelog's
    own writer. Files a plain Delta OPTIMIZE wrote are not, yet hold lakelog's records."""
    return path.rsplit("/", 1)[-1].startswith(FILE_PREFIX)


@dataclass(frozen=True)
class DataFile:
    """A written, not yet committed data file: its ``add`` action and its offsets. A local file
    written with ``synced=False`` is made durable together with the commit that adds it
    (:meth:`engine.commit.log_files.LogFiles.put_commit`'s ``with_files``)."""

    add: AddFile
    stats: FileStats
    full_path: str
    synced: bool = True
    # Where the file holds the first of its consecutive offsets, the one value it numbers them
    # from: it can be renumbered in place (DataFileWriter.renumber). None for every other file.
    offsets_at: int | None = None


def file_stats_json(part: pa.Table) -> str:
    """Delta's ``stats`` for one file's rows (``offset`` and ``timestamp`` columns)."""
    return _file_stats(part)[0]


def _file_stats(part: pa.Table) -> tuple[str, dict[str, tuple[int, int]]]:
    """:func:`file_stats_json` and the bounds it holds, as :class:`FileStats` reads them
    back: the offsets', the timestamps' in ms (the low rounded down, the high up); a column
    without a value has none."""
    columns = {name: part.column(name) for name in STATS_COLUMNS}
    return _stats(part.num_rows, {name: (_bounds(c), c.null_count) for name, c in columns.items()})


def _stats(
    num_rows: int, found: Mapping[str, tuple[tuple[int | None, int | None], int]]
) -> tuple[str, dict[str, tuple[int, int]]]:
    """:func:`_file_stats` of a file of ``num_rows`` rows whose STATS_COLUMNS have these
    bounds (a timestamp's in microseconds; None for none) and null counts."""
    mins: dict[str, object] = {}
    maxs: dict[str, object] = {}
    nulls: dict[str, int] = {}
    bounds: dict[str, tuple[int, int]] = {}
    for name, ((lo, hi), null_count) in found.items():
        nulls[name] = null_count
        if lo is None or hi is None:
            continue
        if name == "timestamp":
            # Delta truncates to ms; a max that lost its micros would exclude its own row.
            lo, hi = lo // 1000, -(-hi // 1000)
            mins[name], maxs[name] = stats_time(lo), stats_time(hi)
        else:
            mins[name], maxs[name] = lo, hi
        bounds[name] = lo, hi
    text = json.dumps(
        {"numRecords": num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )
    return text, bounds


def _bounds(column: pa.Array | pa.ChunkedArray) -> tuple[int | None, int | None]:
    """The least and the greatest value of an integer or timestamp column (a timestamp as the
    integer of its unit), None for both when it holds no value."""
    if column.null_count == 0:
        if not len(column):
            return None, None
        # NumPy over the column's buffer: a compute kernel's call costs several times more for
        # the few hundred rows of an agent's produce group.
        values = to_numpy(column)
        return int(values.min()), int(values.max())
    bounds = pc.min_max(column)
    if pa.types.is_timestamp(column.type):
        # .value, not as_py(): a zoned timestamp's as_py() imports pandas.
        return bounds["min"].value, bounds["max"].value
    return bounds["min"].as_py(), bounds["max"].as_py()


def _data_file(
    tp: TopicPartition,
    relative: str,
    full: str,
    size: int,
    num_rows: int,
    stats_json: str,
    bounds: Mapping[str, tuple[int, int]],
    data_change: bool,
    modification_time_ms: int | None,
    offsets_at: int | None,
) -> DataFile:
    """The :class:`DataFile` of a file just written: its ``add`` action and, without reading
    the JSON just made back, the :class:`FileStats` ``add.file_stats()`` would read."""
    modified = int(time.time() * 1000) if modification_time_ms is None else modification_time_ms
    values = {"topic": tp.topic, "partition": str(tp.partition)}
    add = AddFile(relative, values, size, modified, data_change, stats_json)
    offsets, stamps = bounds.get("offset", (None, None)), bounds.get("timestamp", (None, None))
    stats = FileStats(relative, tp, num_rows, *offsets, data_change, size, modified, *stamps)
    return DataFile(add, stats, full, offsets_at=offsets_at)


def _binary_array(column: pa.Array) -> pa.Array:
    """``column`` as the file's binary type (a column of nulls alone has the null type)."""
    return column if column.type == pa.binary() else column.cast(pa.binary())


def _at_most(table: pa.Table, limit: int) -> bool:
    """Whether ``table``'s rows take at most ``limit`` bytes. Asked first of the buffers it
    refers to (a bound, read in a microsecond), then of its rows (``nbytes``: ~30 us for a
    produce group, as it looks at every buffer's slice)."""
    return table.get_total_buffer_size() <= limit or table.nbytes <= limit


def partition_runs(table: pa.Table | pa.RecordBatch) -> list[tuple[TopicPartition, int, int]]:
    """The runs of consecutive rows of one (topic, partition): (tp, first row, row count)."""
    n = table.num_rows
    if n == 0:
        return []
    topics = table.column("topic")
    partitions = table.column("partition")
    if isinstance(topics, pa.ChunkedArray):
        topics, partitions = topics.combine_chunks(), partitions.combine_chunks()
    encoded = pc.dictionary_encode(topics)
    names = encoded.dictionary.to_pylist()
    codes = (to_numpy(encoded.indices).astype(np.int64) << 32) | to_numpy(partitions).astype(np.int64)
    starts = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1])
    ends = np.append(starts[1:], n)
    return [
        (TopicPartition(names[int(codes[a]) >> 32], int(codes[a]) & 0xFFFFFFFF), int(a), int(b - a))
        for a, b in zip(starts, ends, strict=True)
    ]


class DataFileWriter:
    """Writes Parquet files into a log table's partition directories."""

    def __init__(self, uri: str) -> None:
        self._fs, self._root = filesystem(uri)
        self._local = not is_s3(uri) and "://" not in uri

    def write(
        self,
        table: pa.Table,
        *,
        data_change: bool = True,
        modification_time_ms: int | None = None,
        label: str = "",
        sync: bool = True,
        renumberable: bool = False,
        runs: Sequence[tuple[TopicPartition, int, int]] | None = None,
    ) -> list[DataFile]:
        """One file per (topic, partition) of ``table`` (log columns, rows grouped
        by partition in offset order); nothing is committed.

        ``data_change=False`` marks files that only rearrange records already
        in the table (OPTIMIZE); ``modification_time_ms`` replaces the ``add``
        action's write time (a rewrite keeps its sources' age, as Kafka's log
        cleaner keeps a cleaned segment's last-modified time); ``label`` goes
        into the file names after lakelog's prefix (:data:`OFFSETS_LABEL`).

        Local files are synced, and so are their directories (new ones into
        their parents too), before this returns: a commit is durable only if
        the files it references are. With ``sync=False`` the files and their
        directory entries are synced by the put of the commit that adds them,
        together with the commit file (one round of syncs instead of two;
        :attr:`DataFile.synced` says so); new directories are still synced into
        their parents here. ``renumberable``: local files written unsynced whose
        offsets are consecutive, in one row group, are laid out so that
        :meth:`renumber` can move them (:attr:`DataFile.offsets_at`); the offset
        column of such a file has no Parquet statistics (Delta's ``stats`` has its
        range). ``runs``: the table's :func:`partition_runs`, when the caller knows them
        already. Raises OSError; the files of a failed call are deleted.
        """
        written: list[DataFile] = []
        renumberable = renumberable and not sync and self._local
        try:
            for tp, start, count in partition_runs(table) if runs is None else runs:
                part = table.slice(start, count)
                written.append(self._write_one(tp, part, data_change, modification_time_ms, label, renumberable))
            if sync:
                self._sync(written)
            elif self._local:
                written = [dataclasses.replace(f, synced=False) for f in written]
        except BaseException:
            self.discard(written)  # never committed: a failed write leaves nothing behind
            raise
        return written

    def write_stream(self, batches: Iterable[pa.RecordBatch], label: str = "") -> Iterator[DataFile]:
        """Files for a stream of log-column batches whose rows come grouped by partition
        (each partition's rows in one run, in offset order): one file per run, each
        yielded when its run ends (synced with its directory, as :meth:`write`). What a
        Spark task writing a shuffled partition runs. ``label`` goes into the file names
        after lakelog's prefix."""
        current: TopicPartition | None = None
        pending: list[pa.RecordBatch] = []
        for batch in batches:
            batch = batch.cast(LOG_ARROW_SCHEMA) if batch.schema != LOG_ARROW_SCHEMA else batch
            for tp, start, count in partition_runs(batch):
                if current is not None and tp != current:
                    yield self._durable(self._write_one(current, pa.Table.from_batches(pending), True, None, label))
                    pending = []
                current = tp
                pending.append(batch.slice(start, count))
        if current is not None and pending:
            yield self._durable(self._write_one(current, pa.Table.from_batches(pending), True, None, label))

    def _write_one(
        self,
        tp: TopicPartition,
        part: pa.Table,
        data_change: bool,
        modification_time_ms: int | None,
        label: str = "",
        renumberable: bool = False,
    ) -> DataFile:
        relative, full = self._name(tp, label)
        columns = part.select(_FILE_COLUMNS)
        offsets_at = None
        if self._local and _at_most(part, _IN_MEMORY_BYTES):
            # Encoded in memory, then created and written in one go: three system calls, each
            # of which gives up the GIL (in the agent, every one waits to take it back behind
            # the event loop; pyarrow's file stream made six, a directory check one more).
            offsets = to_numpy(part.column("offset")) if renumberable and 0 < part.num_rows <= ROW_GROUP_ROWS else None
            # Only consecutive offsets are held by their first alone (rows come in offset order).
            consecutive = offsets is not None and int(offsets[-1]) - int(offsets[0]) == len(offsets) - 1
            # A renumberable file without headers (the agent's produce groups) is put together
            # directly, a third of the time pyarrow's writer takes (direct_parquet).
            encoded = encode_log_file(columns, int(offsets[0])) if consecutive and offsets is not None else None
            data: pa.Buffer | bytes
            if encoded is not None:
                data, offsets_at = encoded
            else:
                sink = pa.BufferOutputStream()
                footer = _encode(columns, sink, renumberable=consecutive)
                data = sink.getvalue()
                if consecutive:
                    assert offsets is not None
                    offsets_at = _first_offset_position(data, footer, int(offsets[0]), len(offsets))
            view = memoryview(data)
            size = view.nbytes
            self._create(full, view)
        elif self._local:
            make_directories(os.path.dirname(full))
            try:
                # Through a buffer: the Parquet writer's many small writes (and the position
                # lookups after each) become a few system calls.
                with pa.output_stream(full, buffer_size=_WRITE_BUFFER_BYTES) as sink:
                    _encode(columns, sink)
                    size = sink.tell()
            except BaseException:
                with contextlib.suppress(OSError):  # a part written before a full disk said no
                    os.unlink(full)
                raise
        else:
            self._fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)
            with self._fs.open(full, "wb") as handle:
                _encode(columns, handle)
            size = self._fs.size(full)
        stats_json, bounds = _file_stats(part)
        return _data_file(
            tp, relative, full, size, part.num_rows, stats_json, bounds, data_change, modification_time_ms, offsets_at
        )

    def write_records(
        self,
        tp: TopicPartition,
        first_offset: int,
        timestamps_ms: np.ndarray,
        keys: pa.Array,
        values: pa.Array,
        producer_ids: np.ndarray,
        producer_epochs: np.ndarray,
        sequences: np.ndarray,
    ) -> DataFile | None:
        """What :meth:`write` of their rows writes with ``sync=False, renumberable=True``, for
        records of ``tp`` numbered ``first_offset`` on, without headers, their timestamps
        CreateTime (``timestamps_ms`` int64, ``producer_ids`` int64, ``producer_epochs`` and
        ``sequences`` int32, one per record; ``keys`` and ``values`` binary), written from
        these columns without a table of the rows (the agent's produce groups, a producer's
        batches written ahead of their commit's turn: building the table cost about as much as
        encoding it). None, nothing written, on a store that is
        not local or for more records than a file encoded in memory holds (the caller writes
        the rows: they stream). Raises OSError, leaving no file."""
        count = len(timestamps_ms)
        held = keys.get_total_buffer_size() + values.get_total_buffer_size()
        if not self._local or not 0 < count <= ROW_GROUP_ROWS or held > _IN_MEMORY_BYTES:
            return None
        relative, full = self._name(tp, "")
        timestamps_us = np.asarray(timestamps_ms, dtype=np.int64) * 1000
        keys, values = _binary_array(keys), _binary_array(values)
        data, offsets_at = encode_records_file(
            first_offset, timestamps_us, keys, values, producer_ids, producer_epochs, sequences
        )
        self._create(full, memoryview(data))
        stamps = (int(timestamps_us.min()), int(timestamps_us.max()))
        stats_json, bounds = _stats(
            count, {"offset": ((first_offset, first_offset + count - 1), 0), "timestamp": (stamps, 0)}
        )
        written = _data_file(tp, relative, full, len(data), count, stats_json, bounds, True, None, offsets_at)
        return dataclasses.replace(written, synced=False)

    def _name(self, tp: TopicPartition, label: str) -> tuple[str, str]:
        """A new data file's path in ``tp``'s directory: relative to the table, and full."""
        name = f"{FILE_PREFIX}{label}{new_uuid()}.c000.snappy.parquet"
        relative = f"topic={quote(tp.topic, safe='')}/partition={tp.partition}/{name}"
        return relative, f"{self._root}/{relative}"

    def renumber(self, file: DataFile, first: int) -> DataFile:
        """``file`` -- written by :meth:`write` with ``renumberable`` and not committed -- with
        its records numbered from ``first`` on: the one value the file numbers them from
        rewritten in place (nothing else in it changes), its ``add`` statistics to match,
        unsynced (the commit that adds it syncs it); ``file`` itself when it starts at
        ``first`` already. What a commit that found the ends moved does instead of writing the
        same records again. Raises ValueError for a file that cannot be renumbered, or not to
        ``first`` (whose encoding is longer or shorter: about once as a partition's offsets grow
        128-fold), OSError when it cannot be written (it is then not to be committed)."""
        stats = file.stats
        if first == stats.min_offset:
            return file
        if file.offsets_at is None or not stats.has_offset_stats:
            raise ValueError(f"{file.add.path} was not written to be renumbered")
        assert stats.min_offset is not None and stats.num_records is not None
        encoded, was = first_offset_bytes(first), first_offset_bytes(stats.min_offset)
        if len(encoded) != len(was):
            raise ValueError(f"{file.add.path} cannot be renumbered from {first}: its size would change")
        fd = os.open(file.full_path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if os.pwrite(fd, encoded, file.offsets_at) != len(encoded):
                raise OSError(f"short write renumbering {file.full_path}")
        finally:
            os.close(fd)
        count = stats.num_records
        values = json.loads(file.add.stats or "{}")
        values["minValues"]["offset"], values["maxValues"]["offset"] = first, first + count - 1
        add = dataclasses.replace(file.add, stats=json.dumps(values, separators=(",", ":")))
        return dataclasses.replace(file, add=add, stats=add.file_stats(), synced=False)

    def _create(self, full: str, data: memoryview) -> None:
        """Create the local file ``full`` holding ``data``, its directory too if it is missing
        (looked for only then). Raises OSError, leaving no file behind."""
        try:
            write_new_file(full, data, sync=False)
        except FileNotFoundError:
            make_directories(os.path.dirname(full))
            write_new_file(full, data, sync=False)

    def _sync(self, files: Sequence[DataFile]) -> None:
        """Sync newly written local files and their directories (once each): their records and
        their names must be on disk before a commit that references them is."""
        if self._local:
            sync_all([f.full_path for f in files], sorted({os.path.dirname(f.full_path) for f in files}))

    def _durable(self, written: DataFile) -> DataFile:
        try:
            self._sync([written])
        except BaseException:
            self.discard([written])
            raise
        return written

    def discard(self, files: list[DataFile]) -> None:
        """Delete files that are certain never to have been committed."""
        for f in files:
            with contextlib.suppress(OSError):  # VACUUM removes what is left
                if self._local:
                    os.unlink(f.full_path)  # not through fsspec: importing it costs a commit ~40 ms
                else:
                    self._fs.rm(f.full_path)


class FilesAhead:
    """Data files written before their commit attempt (:meth:`DataFileWriter.write` with
    ``renumberable``, or :meth:`DataFileWriter.write_records`; unsynced), their records numbered
    from ``ends`` for ``topics`` (the topics they belong to, as they were then). The producer's
    committer writes them before its turn, the agent while the commit before is in flight; one
    attempt takes them or they are deleted."""

    def __init__(
        self,
        writer: DataFileWriter,
        files: list[DataFile],
        ends: Mapping[TopicPartition, int],
        topics: Mapping[str, TopicMetadata | None],
    ) -> None:
        self._writer, self._files, self._ends, self._topics = writer, files, dict(ends), dict(topics)

    @property
    def files(self) -> list[DataFile]:
        return list(self._files)

    def take(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], numbered: Callable[[], object]
    ) -> list[DataFile] | None:
        """The files for an attempt numbering from ``ends`` that sees ``topics``: these,
        renumbered in place where the ends moved (``numbered()`` called first, so what holds
        the records numbers them as the files will); None, the files deleted, when a topic
        changed or a file cannot be renumbered. Taken once: later calls get no files."""
        files, self._files = self._files, []
        try:
            if any(topics.get(name) != meta for name, meta in self._topics.items()):
                raise ValueError("the topics changed")
            if any(ends.get(tp, 0) != end for tp, end in self._ends.items()):
                numbered()
                files = [self._writer.renumber(f, ends.get(f.stats.tp, 0)) for f in files]
        except (OSError, ValueError) as exc:
            log.debug("files written ahead are written again: %s", exc)
            self._writer.discard(files)
            return None
        return files

    def discard(self) -> None:
        """Delete the files (never committed) unless an attempt took them."""
        files, self._files = self._files, []
        self._writer.discard(files)
