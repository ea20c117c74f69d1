"""A partition's files in offset order as a table state keeps them: built from a snapshot's
columns without one Python object per file, and extended by a commit without copying them.

A log of N one-record commits has N live files until OPTIMIZE merges them. Building a
:class:`~engine.offsets.FileStats` for each of them when a process opens the store cost
more than everything else the open does at 20,000 versions, and extending a tuple of them
copied all N on every commit. Here the snapshot's files stay columns (:class:`FileColumns`)
and a file is built the first time it is looked at (:class:`LazyFiles`: a seek bisects the
offsets and builds the few files it reads); a :class:`Run` is a sequence of chunks, so an
append copies at most one chunk of :data:`CHUNK` items.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.arrow_columns import scalar, to_numpy
from lakelog.engine.offsets import FileStats
from lakelog.engine.topics import TopicPartition

T = TypeVar("T")
# Items appended to a run go into tuples of at most this many (one is copied per append).
CHUNK = 512


class _Items(Sequence[T]):
    """An immutable sequence whose items :meth:`_at` finds (0 <= index < len); equal to any
    sequence with the same items, as a tuple is."""

    __slots__ = ()

    def _at(self, index: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        n = len(self)
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(n))]
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(index)
        return self._at(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Sequence[T]) -> tuple[T, ...]:
        return (*self, *other)


class Ints(_Items[int]):
    """A one-dimensional integer array read as a sequence of Python ints."""

    __slots__ = ("_values",)

    def __init__(self, values: np.ndarray) -> None:
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    def _at(self, index: int) -> int:
        return int(self._values[index])

    def __iter__(self) -> Iterator[int]:
        return iter(self._values.tolist())


class Run(_Items[T]):
    """An immutable sequence kept as chunks (any sequences); :meth:`extended` shares every
    chunk but the last."""

    __slots__ = ("_chunks", "_len", "_starts")

    def __init__(self, chunks: Sequence[Sequence[T]] = ()) -> None:
        self._chunks = tuple(c for c in chunks if len(c))
        self._starts: list[int] = []
        n = 0
        for chunk in self._chunks:
            self._starts.append(n)
            n += len(chunk)
        self._len = n

    def __len__(self) -> int:
        return self._len

    def _at(self, index: int) -> T:
        k = bisect.bisect_right(self._starts, index) - 1
        return self._chunks[k][index - self._starts[k]]

    def __iter__(self) -> Iterator[T]:
        for chunk in self._chunks:
            yield from chunk

    def __repr__(self) -> str:
        return f"Run({list(self)!r})"

    def extended(self, items: Sequence[T]) -> Run[T]:
        """This run followed by ``items``."""
        if not items:
            return self
        chunks = list(self._chunks)
        if chunks and isinstance(chunks[-1], tuple) and len(chunks[-1]) < CHUNK:
            chunks[-1] = chunks[-1] + tuple(items)
        else:
            chunks.append(tuple(items))
        return Run(chunks)


@dataclass(frozen=True)
class IntColumn:
    """A column of ints that may be None: ``values`` (int64; anything where not ``valid``)."""

    values: np.ndarray
    valid: np.ndarray

    @classmethod
    def of(cls, items: Sequence[int | None]) -> IntColumn:
        valid = np.fromiter((v is not None for v in items), dtype=bool, count=len(items))
        values = np.fromiter((0 if v is None else v for v in items), dtype=np.int64, count=len(items))
        return cls(values, valid)

    @classmethod
    def of_arrow(cls, column: pa.Array | pa.ChunkedArray | None, rows: int) -> IntColumn:
        """An integer Arrow column (None: a column the table lacks, ``rows`` nulls)."""
        if column is None:
            return cls(np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=bool))
        column = combined(column)
        valid = to_numpy(pc.is_valid(column))
        return cls(to_numpy(pc.fill_null(column.cast(pa.int64()), scalar(0, pa.int64()))), valid)

    def __getitem__(self, row: int) -> int | None:
        return int(self.values[row]) if self.valid[row] else None


class RowColumn:
    """An Arrow column read a row at a time, each value passed through ``convert``."""

    def __init__(self, column: pa.Array | pa.ChunkedArray | None, convert: Callable[[Any], Any] | None = None) -> None:
        self._column = None if column is None else combined(column)
        self._convert = convert

    def __getitem__(self, row: int) -> Any:
        if self._column is None:
            return None
        value = self._column[row].as_py()
        return value if self._convert is None or value is None else self._convert(value)


def combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of a column's chunks."""
    if isinstance(column, pa.Array):
        return column
    return column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks or [pa.nulls(0, column.type)])


def encoded_topics(column: pa.Array | pa.ChunkedArray | None, rows: int) -> tuple[list[str], np.ndarray]:
    """A string column's distinct values and each row's index among them (-1: null)."""
    if column is None:
        return [], np.full(rows, -1, dtype=np.int64)
    encoded = combined(column).dictionary_encode()
    ids = to_numpy(pc.fill_null(encoded.indices.cast(pa.int64()), scalar(-1, pa.int64())))
    return encoded.dictionary.to_pylist(), ids


@dataclass(frozen=True)
class FileColumns:
    """Live data files as columns, one row per file (a snapshot's add actions). ``topic_ids``
    index ``topic_names`` (-1: no topic); ``paths`` and the ``extra`` columns (``size``,
    ``modification_time``, ``min_timestamp_ms``, ``max_timestamp_ms``) are anything indexable
    by row giving str / int or None, read only for the files built."""

    paths: Sequence[str]
    topic_names: Sequence[str]
    topic_ids: np.ndarray
    partitions: IntColumn
    num_records: IntColumn
    min_offsets: IntColumn
    max_offsets: IntColumn
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.topic_ids)

    def by_partition(self) -> list[tuple[TopicPartition, np.ndarray]]:
        """The rows of each topic partition, in row order; rows naming no topic or partition
        (a foreign layout) are left out."""
        rows = np.flatnonzero((self.topic_ids >= 0) & self.partitions.valid)
        if not len(rows):
            return []
        topics, partitions = self.topic_ids[rows], self.partitions.values[rows]
        # Rows already grouped (one partition, or each partition's files together) need no sort.
        grouped = np.all(topics[1:] >= topics[:-1]) and np.all(
            (topics[1:] != topics[:-1]) | (partitions[1:] >= partitions[:-1])
        )
        if not grouped:
            order = np.lexsort((partitions, topics))  # stable: row order within a partition
            rows, topics, partitions = rows[order], topics[order], partitions[order]
        cuts = np.flatnonzero((topics[1:] != topics[:-1]) | (partitions[1:] != partitions[:-1])) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), len(rows)]
        return [
            (TopicPartition(self.topic_names[int(topics[a])], int(partitions[a])), rows[a:b])
            for a, b in zip(starts, ends, strict=True)
        ]

    def in_offset_order(self, rows: np.ndarray) -> tuple[Sequence[int], Sequence[int], list[int]]:
        """Of ``rows``: those with offset statistics and records by (first offset, last offset,
        path) -- how a partition orders its files --, the largest last offset up to each of
        them, and the others (no statistics, or empty) as given."""
        lo, hi, nr = self.min_offsets, self.max_offsets, self.num_records
        listed = lo.valid[rows] & hi.valid[rows] & nr.valid[rows] & (nr.values[rows] > 0)
        chosen, other = rows[listed], rows[~listed]
        first = lo.values[chosen]
        # A checkpoint holds a partition's files by offset already, newest first as delta-rs
        # writes them: reversing it is the sort (its first offsets distinct, no tie to break).
        if len(chosen) > 1 and not np.all(first[1:] > first[:-1]):
            newest_first = np.all(first[1:] < first[:-1])
            chosen = chosen[::-1] if newest_first else chosen[np.lexsort((hi.values[chosen], first))]
            first = lo.values[chosen]
        last = hi.values[chosen]
        if len(chosen) > 1 and bool(np.any((first[1:] == first[:-1]) & (last[1:] == last[:-1]))):
            # Files with the same offset range (another writer's copy) go by path.
            paths = self.paths
            ordered = sorted(chosen.tolist(), key=lambda row: (lo[row], hi[row], paths[row]))
            chosen = np.asarray(ordered, dtype=np.int64)
        reach = np.maximum.accumulate(last) if len(chosen) else np.zeros(0, dtype=np.int64)
        # As arrays read as ints: 20,000 Python ints each cost a new process ~0.4 ms to make.
        return Ints(chosen), Ints(reach), other.tolist()

    def file(self, row: int, tp: TopicPartition) -> FileStats:
        extra = {name: column[row] for name, column in self.extra.items()}
        return FileStats(
            self.paths[row],
            tp,
            self.num_records[row],
            self.min_offsets[row],
            self.max_offsets[row],
            True,
            **extra,
        )


class LazyFiles(_Items[FileStats]):
    """The files of ``rows`` of ``columns`` (all of partition ``tp``), each built the first
    time it is looked at."""

    __slots__ = ("_built", "_columns", "_rows", "_tp")

    def __init__(self, columns: FileColumns, rows: Sequence[int], tp: TopicPartition) -> None:
        self._columns = columns
        self._rows = rows
        self._tp = tp
        self._built: list[FileStats | None] = [None] * len(rows)

    def __len__(self) -> int:
        return len(self._rows)

    def _at(self, index: int) -> FileStats:
        found = self._built[index]
        if found is None:
            found = self._built[index] = self._columns.file(self._rows[index], self._tp)
        return found

    def __iter__(self) -> Iterator[FileStats]:
        for i in range(len(self._rows)):
            yield self._at(i)
