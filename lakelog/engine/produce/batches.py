"""A producer batch: records gathered column by column, committed together.

As in Kafka's Java client, one result object is shared by all records of a
batch (``ProduceRequestResult``) and a record's future is that object plus
the record's index (``FutureRecordMetadata``): completing a batch of 100k
records sets one event and one offsets array, not 100k futures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from lakelog.engine.arrow_columns import array, key_value_lists, repeated_string, to_numpy
from lakelog.engine.commit import AppTransaction
from lakelog.engine.commit.data_files import DataFile, DataFileWriter
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import DeliveryTimeoutError, LakelogError, RecordTooLargeError, UnknownTopicOrPartitionError
from lakelog.engine.produce.record_queue import FIELDS, QueuedRecords
from lakelog.engine.records import Headers, RecordMetadata
from lakelog.engine.schema import HEADERS_ARROW, LOG_ARROW_SCHEMA
from lakelog.engine.topics import TIMESTAMP_TYPE_CODES, TopicMetadata, TopicPartition

_WIDTH = len(FIELDS)

# Kafka's producer sequences are non-negative int32s that wrap to 0 after Integer.MAX_VALUE
# (DefaultRecordBatch.incrementSequence; its broker takes 0 after Integer.MAX_VALUE as the next,
# ProducerAppendInfo.inSequence); the log table's sequence column is an int32.
SEQUENCE_WRAP = 1 << 31


class RecordBatch(QueuedRecords):
    """Records of one future commit, queued under the producer's lock.

    Record i's :data:`FIELDS` -- topic, partition (None: the partitioner chooses it), key,
    value, timestamp (ms, an int), size (what it counts
    against ``max.message.bytes`` and ``buffer.memory``) -- are ``fields[6 * i : 6 * i + 6]``,
    its values already converted and checked; its headers are ``headers_at[i]`` when it has any.
    ``Producer.send`` queues a record with one ``fields.extend`` of a tuple (the cheapest
    append a per-record call can make; the tuple is freed at once, so the cyclic GC never
    sees a queued record), and a column is a strided slice of ``fields``. :meth:`place`
    fixes every record's partition and sequence once, when the batch leaves the queue,
    and makes the columns :class:`ProducerBatch` builds Arrow arrays from.
    """

    def __init__(self) -> None:
        super().__init__()
        self._given_sequences: list[int] = []  # add()'s sequences, in record order
        # Set by place(): each record's partition and partition id (-1: refused when placed).
        self.placed = False
        self.tps: list[TopicPartition] = []
        self.tp_ids = np.zeros(0, dtype=np.int64)
        self.partitions: np.ndarray | None = None
        self.sequences = np.zeros(0, dtype=np.int64)
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Headers | None] = []
        self.timestamps = np.zeros(0, dtype=np.int64)
        self.sizes = np.zeros(0, dtype=np.int64)
        # Filled when the batch completes.
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.record_errors: dict[int, BaseException] = {}
        self.offsets: np.ndarray | None = None
        self.log_append_time_ms: dict[str, int] = {}
        self._callbacks: list[tuple[int, Callable[[RecordMetadata], Any] | None, Callable[[BaseException], Any] | None]]
        self._callbacks = []

    def add(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp_ms: int,
        size: int,
        sequence: int,
    ) -> int:
        """Queue a record already placed in ``tp`` with its producer ``sequence``; its index."""
        index = len(self)
        self.fields.extend((tp.topic, tp.partition, key, value, timestamp_ms, size))
        if headers is not None:
            self.headers_at[index] = headers
        self._given_sequences.append(sequence)
        self.bytes += size
        return index

    def column(self, field: str) -> list[Any]:
        """One of :data:`FIELDS` of every record, in record order."""
        return self.fields[FIELDS.index(field) :: _WIDTH]

    def place(
        self,
        partitions: np.ndarray | None = None,
        next_sequences: dict[TopicPartition, int] | None = None,
        refused: Mapping[int, BaseException] | None = None,
    ) -> None:
        """Fix each record's partition and producer sequence (once, before :class:`ProducerBatch`).

        ``partitions``: every record's partition (int64; the queued ones when None, which
        must then all be set); records in ``refused`` fail with their error and are
        placed nowhere. ``next_sequences``: each partition's next sequence, continued in
        record order and advanced (Kafka's per-partition producer sequence, wrapping at
        2**31 as its ``DefaultRecordBatch.incrementSequence`` does); None: the sequences
        :meth:`add` was given. Kafka's producer, too, numbers a batch when it leaves the queue
        (apache/kafka ``RecordAccumulator.drainBatchesForOneNode``: ``setProducerState`` with
        ``transactionManager.sequenceNumber(tp)``, then ``incrementSequenceNumber``).
        """
        if self.placed:
            raise RuntimeError("a record batch is placed once")
        n = len(self)
        fields = self.fields
        self.keys, self.values = fields[2::_WIDTH], fields[3::_WIDTH]
        self.headers = [None] * n
        for index, headers in self.headers_at.items():
            self.headers[index] = headers
        self.timestamps = np.fromiter(fields[4::_WIDTH], dtype=np.int64, count=n)
        self.sizes = np.fromiter(fields[5::_WIDTH], dtype=np.int64, count=n)
        if partitions is None:
            partitions = np.fromiter(fields[1::_WIDTH], dtype=np.int64, count=n)  # TypeError if one is None
        refused = refused or {}
        self.partitions = partitions
        names, topic_ids = topic_ids_of(fields[0::_WIDTH])
        unplaced = np.array(sorted(refused), dtype=np.int64)
        self.tps, self.tp_ids = partition_ids(topic_ids, names, partitions, unplaced)
        self.record_errors.update(refused)
        if next_sequences is None:
            self.sequences = np.array(self._given_sequences, dtype=np.int64)
        else:
            placed = self.tp_ids >= 0
            starts = np.array([next_sequences.get(tp, 0) for tp in self.tps], dtype=np.int64)
            order, numbers = number_records(self.tp_ids, placed, starts)
            self.sequences = np.zeros(n, dtype=np.int64)
            self.sequences[order] = numbers % SEQUENCE_WRAP
            counts = np.bincount(self.tp_ids[placed], minlength=len(self.tps))
            for tp_id, tp in enumerate(self.tps):
                next_sequences[tp] = int((starts[tp_id] + counts[tp_id]) % SEQUENCE_WRAP)
        self.placed = True

    # -- completion -----------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    def metadata(self, index: int) -> RecordMetadata:
        topic, partition, key, value, timestamp_ms, _ = self.fields[_WIDTH * index : _WIDTH * index + _WIDTH]
        if partition is None:
            assert self.partitions is not None
            partition = int(self.partitions[index])
        assert self.offsets is not None
        return RecordMetadata(
            topic,
            partition,
            int(self.offsets[index]),
            self.log_append_time_ms.get(topic, int(timestamp_ms)),
            len(key) if key is not None else -1,
            len(value) if value is not None else -1,
        )

    def error_of(self, index: int) -> BaseException | None:
        return self.record_errors.get(index) or self.error

    def on_done(
        self,
        index: int,
        callback: Callable[[RecordMetadata], Any] | None,
        errback: Callable[[BaseException], Any] | None,
    ) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append((index, callback, errback))
                return
        _call(self, index, callback, errback)

    def complete(self, offsets: np.ndarray, log_append_time_ms: Mapping[str, int]) -> None:
        """The commit landed: ``offsets[i]`` is record i's offset (ignored for failed records)."""
        self.offsets = offsets
        self.log_append_time_ms = dict(log_append_time_ms)
        self._finish()

    def fail(self, error: BaseException) -> None:
        """The whole batch failed (nothing of it was committed)."""
        self.error = error
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for index, callback, errback in callbacks:
            _call(self, index, callback, errback)


def _call(batch: RecordBatch, index: int, callback: Any, errback: Any) -> None:
    error = batch.error_of(index)
    if error is None and callback is not None:
        callback(batch.metadata(index))
    elif error is not None and errback is not None:
        errback(error)


@dataclass(frozen=True)
class BatchMetadata:
    """Where the records of one ``send_batch`` call are: record i is in ``partitions[i]`` at
    ``offsets[i]`` (numpy arrays, in the order the records were given)."""

    topic: str
    partitions: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)


class BatchFuture:
    """The eventual :class:`BatchMetadata` of one ``send_batch`` call (all records or none)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self._done = threading.Event()
        self._error = error
        self._metadata: BatchMetadata | None = None
        if error is not None:
            self._done.set()

    def complete(self, placed: Any) -> None:
        """The commit landed (``placed``: the committed :class:`engine.produce.placement.PlacedBatch`)."""
        records = placed.records
        partitions = np.array([tp.partition for tp in records.tps], dtype=np.int32)[records.tp_ids]
        topic = records.tps[0].topic if records.tps else ""
        self._metadata = BatchMetadata(topic, partitions, placed.offsets)
        self._done.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def exception(self) -> BaseException | None:
        return self._error if self._done.is_set() else None

    def get(self, timeout: float | None = None) -> BatchMetadata:
        """Block until the batch is committed; raise its error if it failed (DeliveryTimeoutError
        when ``timeout`` seconds pass first: it may still be committed later)."""
        if not self._done.wait(timeout):
            raise DeliveryTimeoutError(f"batch not acknowledged within {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._metadata is not None
        return self._metadata


class PlacedEntry:
    """A ``send_batch`` call waiting in the producer's queue."""

    def __init__(self, records: Any, size: int) -> None:
        self.records = records
        self.bytes = size
        self.created = time.monotonic()
        self.future = BatchFuture()


def check_record(topic: TopicMetadata | None, name: str, partition: int, size: int) -> LakelogError | None:
    """Why the topic refuses this record, or None."""
    return check_partition(topic, name, partition) or check_size(topic, name, size)


def check_partition(topic: TopicMetadata | None, name: str, partition: int) -> LakelogError | None:
    if topic is None:
        return UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    if not 0 <= partition < topic.partitions:
        return UnknownTopicOrPartitionError(
            f"partition {partition} of topic {name!r} does not exist (the topic has {topic.partitions})"
        )
    return None


def check_size(topic: TopicMetadata | None, name: str, size: int) -> LakelogError | None:
    if topic is not None and size > topic.max_message_bytes:
        return RecordTooLargeError(
            f"record of {size} bytes for topic {name!r} is larger than its max.message.bytes={topic.max_message_bytes}"
        )
    return None


def topic_ids_of(topics: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct names of ``topics`` and each entry's index among them (int64)."""
    n = len(topics)
    if n == 0:
        return [], np.zeros(0, dtype=np.int64)
    if topics.count(topics[0]) == n:  # one topic, the common batch: no encoding
        return [topics[0]], np.zeros(n, dtype=np.int64)
    encoded = array(list(topics), pa.string()).dictionary_encode()
    return encoded.dictionary.to_pylist(), to_numpy(encoded.indices).astype(np.int64)


def partition_ids(
    topic_ids: np.ndarray, names: Sequence[str], partitions: np.ndarray, unplaced: np.ndarray | None = None
) -> tuple[list[TopicPartition], np.ndarray]:
    """Each record's partition id and the partitions by id, numbered in order of each
    partition's first record (what a batch's per-partition arrays are indexed by).

    Record i is in partition ``partitions[i]`` (>= 0) of topic ``names[topic_ids[i]]``;
    the records at the indices ``unplaced`` get id -1 and make no partition.
    """
    n = len(partitions)
    placed = np.ones(n, dtype=bool)
    if unplaced is not None and len(unplaced):
        placed[unplaced] = False
    if not placed.any():
        return [], np.full(n, -1, dtype=np.int64)
    rows = np.flatnonzero(placed)
    width = int(partitions[rows].max()) + 1
    if len(names) * width < 1 << 15:
        # Few (topic, partition) codes: grouped by the same linear sort as number_records.
        codes = topic_ids[rows] * width + partitions[rows]
        order, firsts, lengths = _groups(codes)
        first_rows = order[firsts]  # stable: a group's first row in order is its first record
        unique = codes[first_rows]
        inverse = np.empty(len(rows), dtype=np.int64)
        inverse[order] = np.repeat(np.arange(len(firsts)), lengths)
    else:
        codes = (topic_ids[rows] << 32) | partitions[rows]
        unique, first_rows, inverse = np.unique(codes, return_index=True, return_inverse=True)
        width = 1 << 32
    by_appearance = np.argsort(first_rows, kind="stable")
    tp_id_of = np.empty(len(unique), dtype=np.int64)
    tp_id_of[by_appearance] = np.arange(len(unique))
    tp_ids = np.full(n, -1, dtype=np.int64)
    tp_ids[rows] = tp_id_of[inverse.reshape(-1)]
    tps = [TopicPartition(names[int(unique[u]) // width], int(unique[u]) % width) for u in by_appearance]
    return tps, tp_ids


def _groups(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stable order that groups equal ``ids`` (ascending), each group's first position in
    that order and its length."""
    if len(ids) and ids.min() >= 0 and ids.max() < 1 << 15:
        ids = ids.astype(np.int16)  # numpy's stable sort of 16-bit ints is a radix sort
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    firsts = np.concatenate(([0], np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1))
    lengths = np.diff(np.append(firsts, len(ids)))
    return order, firsts, lengths


def number_records(tp_ids: np.ndarray, accepted: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row order (by partition, send order within each) and each row's offset.

    ``tp_ids[i]`` is record i's partition id, ``starts[t]`` partition t's end
    offset; accepted records of a partition get consecutive offsets from it.
    """
    order, rank = record_order(tp_ids, accepted)
    return order, starts[tp_ids[order]] + rank


def record_order(tp_ids: np.ndarray, accepted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`number_records` without the offsets: the row order and each row's rank within
    its partition (its offset is its partition's start plus its rank)."""
    candidates = np.flatnonzero(accepted)
    if not len(candidates):
        return candidates, np.zeros(0, dtype=np.int64)
    grouping, firsts, lengths = _groups(tp_ids[candidates])
    order = candidates[grouping]
    return order, np.arange(len(order)) - np.repeat(firsts, lengths)


def records_file_partition(
    tps: Sequence[TopicPartition], count: int, null_headers: int, topics: Mapping[str, TopicMetadata]
) -> TopicPartition | None:
    """The partition a batch's file is written for straight from its columns
    (:meth:`DataFileWriter.write_records`): the one of ``tps``, when the batch's ``count`` records
    (at least one) are all there, none has headers (``null_headers`` of them null) and its
    topic keeps the records' CreateTime; else None (the batch's rows are built and written)."""
    if len(tps) != 1 or not count or null_headers != count:
        return None
    meta = topics.get(tps[0].topic)
    return None if meta is None or meta.log_append_time else tps[0]


def log_rows(
    tps: Sequence[TopicPartition],
    row_tps: np.ndarray,
    offsets: np.ndarray,
    timestamps_ms: np.ndarray,
    *,
    keys: pa.Array,
    values: pa.Array,
    headers: pa.Array,
    sequences: pa.Array,
    producer_id: int | np.ndarray,
    producer_epoch: int | np.ndarray,
    topics: Mapping[str, TopicMetadata],
    append_time_ms: int,
) -> tuple[pa.Table, dict[str, int]]:
    """Numbered records as rows of the log table (``LOG_ARROW_SCHEMA``), in the given order.

    Row i is in partition ``tps[row_tps[i]]`` at ``offsets[i]``; the columns
    are already in row order (``producer_id``/``producer_epoch``: one for all
    rows, or one per row). Records of topics with
    ``message.timestamp.type=LogAppendTime`` get ``append_time_ms`` and that
    timestamp type, as a broker stamps them. Returns the table and the append
    time of each such topic (what the records' metadata reports).
    """
    names = sorted({tp.topic for tp in tps})
    # A partition of ``tps`` may have no row (its records refused: its topic may be gone).
    log_append = {t for t in names if (meta := topics.get(t)) is not None and meta.log_append_time}
    topic_of_tp = np.array([names.index(tp.topic) for tp in tps], dtype=np.int32)
    tp_partition = np.array([tp.partition for tp in tps], dtype=np.int32)
    row_tps = np.asarray(row_tps)
    timestamps = np.asarray(timestamps_ms, dtype=np.int64)
    types = np.zeros(len(row_tps), dtype=np.int32)
    if log_append:
        stamped = np.isin(topic_of_tp, [names.index(t) for t in log_append])[row_tps]
        timestamps = np.where(stamped, append_time_ms, timestamps)
        types = np.where(stamped, TIMESTAMP_TYPE_CODES["LogAppendTime"], types).astype(np.int32)
    columns = {
        "topic": _topic_column(names, topic_of_tp[row_tps]),
        "partition": array(tp_partition[row_tps], pa.int32()),
        "offset": array(offsets, pa.int64()),
        "timestamp": array(timestamps * 1000, pa.timestamp("us", tz="UTC")),
        "timestamp_type": array(types, pa.int32()),
        "key": keys,
        "value": values,
        "headers": headers,
        "producer_id": array(np.broadcast_to(np.asarray(producer_id, dtype=np.int64), len(row_tps)), pa.int64()),
        "producer_epoch": array(np.broadcast_to(np.asarray(producer_epoch, dtype=np.int32), len(row_tps)), pa.int32()),
        "sequence": sequences,
    }
    table = pa.Table.from_arrays(
        [
            column if column.type == field.type else column.cast(field.type)
            for field, column in zip(LOG_ARROW_SCHEMA, columns.values(), strict=True)
        ],
        schema=LOG_ARROW_SCHEMA,
    )
    return table, {t: append_time_ms for t in log_append}


def _topic_column(names: list[str], row_names: np.ndarray) -> pa.Array:
    """Row i's topic, ``names[row_names[i]]``, built in C rather than as Python strings: one
    name repeated (a produce group's rows, most often), a take over the names otherwise."""
    if len(names) == 1:
        return repeated_string(names[0], len(row_names))
    return array(names, pa.string()).take(array(row_names, pa.int32()))


class _OrderedRecords(NamedTuple):
    """A producer batch's accepted records in the order of its rows."""

    accepted: np.ndarray
    order: np.ndarray
    rank: np.ndarray  # within the row's partition
    row_tps: np.ndarray
    timestamps_ms: np.ndarray
    keys: pa.Array
    values: pa.Array
    headers: pa.Array
    sequences: pa.Array


_OFFSET_COLUMN = LOG_ARROW_SCHEMA.get_field_index("offset")
_OFFSET_FIELD = LOG_ARROW_SCHEMA.field("offset")


class ProducerBatch:
    """A sealed :class:`RecordBatch` as an :class:`engine.commit.AppendBatch`; offsets are
    assigned on the driver, each partition's records in send order, and the rows are
    written from the driver (one Parquet file per partition)."""

    operation = "produce"
    commit_when_empty = False
    # build() only sets the offset column of rows made once: the committer may write the files
    # before its turn and renumber them in it (engine.commit.committer.AppendBatch).
    renumberable = True

    def __init__(
        self,
        records: RecordBatch,
        producer_id: int,
        app_transaction: AppTransaction | None = None,
        producer_epoch: int = 0,
    ) -> None:
        self.records = records
        self.app_transaction = app_transaction
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        if not records.placed:
            records.place()
        self._accepted = records.tp_ids >= 0
        self._tp_ids = records.tp_ids
        self._offsets = np.full(len(records), -1, dtype=np.int64)
        self._append_time_ms: dict[str, int] = {}
        # Made now, before the commit's turn (engine.storage.turns): only offsets depend on them.
        self._ordered = self._in_row_order(self._accepted)
        # The rows, built the first time build() is asked for them (a batch whose file
        # write_unsynced writes from the columns never needs them); offsets set in build.
        self._rows: pa.Table | None = None

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        """Refuse (per record) what the current topic metadata refuses."""
        records = self.records
        topics = [view.topics.get(tp.topic) for tp in records.tps]
        errors = [check_partition(topic, tp.topic, tp.partition) for topic, tp in zip(topics, records.tps, strict=True)]
        # Per partition id, then per record in a few whole-array steps (not a pass per partition).
        gone = np.array([e is not None for e in errors] + [False], dtype=bool)  # [-1]: placed nowhere
        limit = np.array([t.max_message_bytes if t is not None else 0 for t in topics] + [0], dtype=np.int64)
        ids = self._tp_ids
        refused = self._accepted & (gone[ids] | (records.sizes > limit[ids]))
        for i in np.flatnonzero(refused):
            tp_id = int(ids[i])
            tp, error = records.tps[tp_id], errors[tp_id]
            records.record_errors[int(i)] = error or check_size(topics[tp_id], tp.topic, int(records.sizes[i]))
        self._accepted &= ~refused
        counts = np.bincount(ids[self._accepted], minlength=len(records.tps))
        return {tp: int(counts[i]) for i, tp in enumerate(records.tps) if counts[i]}

    @property
    def app_transactions(self) -> tuple[AppTransaction, ...]:
        return () if self.app_transaction is None else (self.app_transaction,)

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        """A plain producer batch is never fenced."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        tps = self.records.tps
        counts = np.bincount(self._tp_ids[self._accepted], minlength=len(tps))  # not a sort of every id
        return sorted(tps[i] for i in np.flatnonzero(counts))

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> pa.Table:
        records = self.records
        ordered = self._current_order()
        offsets = self.number(ends)
        if not any((meta := topics.get(tp.topic)) is not None and meta.log_append_time for tp in records.tps):
            self._append_time_ms = {}
            if self._rows is None:
                self._rows = self._log_rows(ordered, ordered.rank, {}, 0)[0]
            return self._rows.set_column(_OFFSET_COLUMN, _OFFSET_FIELD, array(offsets, pa.int64()))
        table, self._append_time_ms = self._log_rows(ordered, offsets, topics, append_time_ms)
        return table

    def number(self, ends: Mapping[TopicPartition, int]) -> np.ndarray:
        """Number the accepted records from ``ends`` (each partition's from its end, in send
        order) as :meth:`build` does, without the rows: the offsets, in row order. What
        :meth:`complete` reports is the last numbering, of either."""
        ordered = self._current_order()
        starts = np.array([ends.get(tp, 0) for tp in self.records.tps], dtype=np.int64)
        offsets = starts[ordered.row_tps] + ordered.rank
        self._offsets[ordered.order] = offsets
        return offsets

    def write_unsynced(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], files: DataFileWriter
    ) -> list[DataFile] | None:
        """The accepted records numbered from ``ends`` (:meth:`number`) and written as
        :meth:`DataFileWriter.write` writes :meth:`build`'s rows with ``sync=False,
        renumberable=True`` -- the same bytes -- straight from the batch's columns, without the
        rows: for one partition's records without headers of a topic that keeps their
        CreateTime, on a local store. None, nothing numbered or written, for any other batch
        (the caller builds the rows). Raises OSError (nothing written, nothing numbered)."""
        ordered = self._current_order()
        n = len(ordered.order)
        tp = records_file_partition(self.records.tps, n, ordered.headers.null_count, topics)
        if tp is None:
            return None
        written = files.write_records(
            tp,
            ends.get(tp, 0),
            ordered.timestamps_ms,
            ordered.keys,
            ordered.values,
            np.full(n, self._producer_id, dtype=np.int64),
            np.full(n, self._producer_epoch, dtype=np.int32),
            to_numpy(ordered.sequences),
        )
        if written is None:
            return None
        self.number(ends)
        self._append_time_ms = {}
        return [written]

    def _current_order(self) -> _OrderedRecords:
        """The accepted records in row order, made again (and the rows dropped) when records
        were refused since (:meth:`prepare`)."""
        if not np.array_equal(self._ordered.accepted, self._accepted):
            self._ordered = self._in_row_order(self._accepted)
            self._rows = None
        return self._ordered

    def _log_rows(
        self, ordered: _OrderedRecords, offsets: np.ndarray, topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> tuple[pa.Table, dict[str, int]]:
        return log_rows(
            self.records.tps,
            ordered.row_tps,
            offsets,
            ordered.timestamps_ms,
            keys=ordered.keys,
            values=ordered.values,
            headers=ordered.headers,
            sequences=ordered.sequences,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            topics=topics,
            append_time_ms=append_time_ms,
        )

    def _in_row_order(self, accepted: np.ndarray) -> _OrderedRecords:
        """The ``accepted`` records' columns in row order (by partition, send order within each)."""
        records = self.records
        order, rank = record_order(self._tp_ids, accepted)
        headers = records.headers
        # Every record, already grouped by partition (one partition, a sticky run): no copies.
        same = len(order) == len(records) and bool(np.all(order[1:] > order[:-1]))
        take = None if same else array(order, pa.int64())

        def in_order(column: pa.Array) -> pa.Array:
            return column if take is None else column.take(take)

        row_tps, timestamps_ms = self._tp_ids[order], records.timestamps[order]
        keys = in_order(array(records.keys, pa.binary()))
        values = in_order(array(records.values, pa.binary()))
        header_column = (
            pa.nulls(len(order), HEADERS_ARROW)
            if headers.count(None) == len(headers)
            else in_order(key_value_lists(headers, HEADERS_ARROW))
        )
        sequences = in_order(array(records.sequences, pa.int32()))
        return _OrderedRecords(
            accepted.copy(), order, rank, row_tps, timestamps_ms, keys, values, header_column, sequences
        )

    def complete(self) -> None:
        """The commit landed: every accepted record learns its offset."""
        self.records.complete(self._offsets, self._append_time_ms)

    def fail(self, error: BaseException) -> None:
        self.records.fail(error)
