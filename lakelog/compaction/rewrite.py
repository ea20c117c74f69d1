"""The data-moving half of maintenance: rewriting one partition's files.

Each task covers one partition and is a plain picklable value, so the same
function runs in this process or as a Spark task on an executor
(:func:`run_tasks`), reading and writing Parquet with pyarrow. Nothing here
commits: tasks return the files they wrote and the files they replace, and
the driver commits them (:mod:`compaction.step`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.compaction.files import LiveFile
from lakelog.compaction.log_cleaner import keep_mask
from lakelog.engine.commit.data_files import DataFile, DataFileWriter
from lakelog.engine.commit.partition_reader import PartitionReader, with_partition_columns
from lakelog.engine.errors import error_for_os_error, error_from_text, marked
from lakelog.engine.storage.object_store import store_access
from lakelog.engine.topics import TopicPartition


class _StoreTask(Protocol):
    uri: str


T = TypeVar("T", bound=_StoreTask)
R = TypeVar("R")


@dataclass(frozen=True)
class OptimizeTask:
    """Merge each bin (adjacent files of one partition) into one file, records unchanged."""

    uri: str
    tp: TopicPartition
    bins: tuple[tuple[LiveFile, ...], ...]
    end: int | None = None  # the partition's committed end: rows at or past it are not records


@dataclass(frozen=True)
class CompactTask:
    """Log-compact the cleanable prefix of one partition, each bin of files into one file."""

    uri: str
    tp: TopicPartition
    bins: tuple[tuple[LiveFile, ...], ...]
    now_ms: int
    delete_retention_ms: int
    write: bool = True  # False: only count (dry run)


@dataclass
class TaskResult:
    """What a task rewrote: each bin of replaced files (one new file each, unless a dry run)."""

    tp: TopicPartition
    bins: list[tuple[LiveFile, ...]] = field(default_factory=list)
    added: list[DataFile] = field(default_factory=list)
    records_removed: int = 0
    bytes_read: int = 0

    @property
    def removed(self) -> list[LiveFile]:
        return [f for b in self.bins for f in b]


def run_optimize(task: OptimizeTask) -> TaskResult:
    """Write one file per bin holding the bin's records in offset order (``dataChange=false``),
    one per offset and none at or past ``task.end``."""
    reader, writer = PartitionReader(task.uri), DataFileWriter(task.uri)
    result = TaskResult(task.tp)
    try:
        for files in task.bins:
            # Read as every reader reads: one row per offset, none at or past the end (rows
            # another writer appended are left behind with the files they were in).
            table = reader.read([f.file_stats() for f in files], task.tp, 0, task.end)
            written = max(f.modification_time_ms for f in files)
            result.added += writer.write(table, data_change=False, modification_time_ms=written)
            result.bins.append(tuple(files))
            result.bytes_read += sum(f.size for f in files)
    except BaseException:
        writer.discard(result.added)
        raise
    return result


def run_compact(task: CompactTask) -> TaskResult:
    """Rewrite each bin of the cleanable prefix that loses records or holds several files.

    Pass 1 reads offsets, keys and values of every cleanable file to find the
    latest record per key; pass 2 writes one file per changed bin, starting
    with the bin's first record and carrying the newest written time of its
    sources (so no tombstone expires earlier than it would have).
    """
    reader, writer = PartitionReader(task.uri), DataFileWriter(task.uri)
    result = TaskResult(task.tp)
    files = [f for b in task.bins for f in b]
    if not files:
        return result
    parts = [reader.read_file(f.path, ["offset", "key", "value"]).sort_by("offset") for f in files]
    lengths = np.array([p.num_rows for p in parts], dtype=np.int64)
    columns = pa.concat_tables(parts)
    offsets = columns.column("offset").to_numpy()
    bin_lengths = [int(sum(lengths[i : i + len(b)])) for i, b in _bin_starts(task.bins)]
    first_of_bin = np.zeros(len(offsets), dtype=bool)
    first_of_bin[np.cumsum([0, *bin_lengths[:-1]])] = True
    keep = keep_mask(
        offsets,
        columns.column("key").combine_chunks(),
        np.asarray(pc.is_null(columns.column("value")).to_numpy(zero_copy_only=False), dtype=bool),
        first_of_bin,
        np.repeat([f.modification_time_ms for f in files], lengths),
        now_ms=task.now_ms,
        delete_retention_ms=task.delete_retention_ms,
    )
    start = 0
    try:
        for (_, files_of_bin), n in zip(_bin_starts(task.bins), bin_lengths, strict=True):
            kept = keep[start : start + n]
            kept_offsets = offsets[start : start + n][kept]
            start += n
            dropped = int(n - kept.sum())
            if not dropped and len(files_of_bin) == 1:
                continue
            result.records_removed += dropped
            result.bins.append(files_of_bin)
            result.bytes_read += sum(f.size for f in files_of_bin)
            if not task.write:
                continue
            rows = pa.concat_tables([reader.read_file(f.path) for f in files_of_bin]).sort_by("offset")
            mask = pa.array(np.isin(rows.column("offset").to_numpy(), kept_offsets))
            result.added += writer.write(
                with_partition_columns(task.tp, rows.filter(mask)),
                data_change=True,
                modification_time_ms=max(f.modification_time_ms for f in files_of_bin),
            )
    except BaseException:
        writer.discard(result.added)
        raise
    return result


def _bin_starts(bins: Sequence[Sequence[LiveFile]]) -> list[tuple[int, tuple[LiveFile, ...]]]:
    """Each bin with the index of its first file in the flattened file list."""
    out, index = [], 0
    for b in bins:
        out.append((index, tuple(b)))
        index += len(b)
    return out


def run_tasks(tasks: Sequence[T], fn: Callable[[T], R], spark: Any | None = None) -> list[R]:
    """``fn`` over ``tasks``: as Spark tasks when a SparkSession is given (one per task), else here.

    Spark tasks carry this process's endpoint and credentials for each task's
    store (``task.uri``): an executor's environment need not hold them. A
    task's OSError reaches the caller as the StoreError class
    :func:`engine.errors.error_for_os_error` gives (StoreFullError for a full
    disk); run here, it is raised as it is.
    """
    if not tasks:
        return []
    if spark is None:
        return [fn(t) for t in tasks]
    carried = [(store_access(t.uri), t) for t in tasks]
    try:
        return spark.sparkContext.parallelize(carried, len(carried)).map(_InStore(fn)).collect()
    except Exception as exc:
        # A task's storage error crossed the JVM as text (_InStore marked it): the same class here.
        error = error_from_text(str(exc))
        if error is None:
            raise
        raise error from exc


@dataclass(frozen=True)
class _InStore:
    fn: Callable[[Any], Any]

    def __call__(self, carried: tuple[Any, Any]) -> Any:
        access, task = carried
        access.install()
        try:
            return self.fn(task)
        except OSError as exc:
            # A full disk is StoreFullError on the driver too, as when the task runs there.
            error = error_for_os_error(exc, "maintain")
            raise RuntimeError(marked(type(error), str(error))) from exc
