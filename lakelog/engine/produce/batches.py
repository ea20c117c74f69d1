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
from typing import Any

import numpy as np
import pyarrow as pa

from lakelog.engine.arrow_columns import array, key_value_lists
from lakelog.engine.commit import AppTransaction
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import DeliveryTimeoutError, LakelogError, RecordTooLargeError, UnknownTopicOrPartitionError
from lakelog.engine.records import Headers, RecordMetadata
from lakelog.engine.schema import HEADERS_ARROW, LOG_ARROW_SCHEMA
from lakelog.engine.topics import TIMESTAMP_TYPE_CODES, TopicMetadata, TopicPartition


class RecordBatch:
    """Records of one future commit, stored as columns. ``add`` under the producer's lock."""

    def __init__(self) -> None:
        self.created = time.monotonic()
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Headers | None] = []
        self.timestamps: list[int] = []
        self.sizes: list[int] = []
        self.sequences: list[int] = []
        self.tp_ids: list[int] = []
        self.tps: list[TopicPartition] = []  # tp id -> partition
        self._tp_index: dict[TopicPartition, int] = {}
        self.bytes = 0
        # Filled when the batch completes.
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.record_errors: dict[int, BaseException] = {}
        self.offsets: np.ndarray | None = None
        self.log_append_time_ms: dict[str, int] = {}
        self._callbacks: list[tuple[int, Callable[[RecordMetadata], Any] | None, Callable[[BaseException], Any] | None]]
        self._callbacks = []

    def __len__(self) -> int:
        return len(self.values)

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
        tp_id = self._tp_index.get(tp)
        if tp_id is None:
            tp_id = self._tp_index[tp] = len(self.tps)
            self.tps.append(tp)
        self.tp_ids.append(tp_id)
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.timestamps.append(timestamp_ms)
        self.sizes.append(size)
        self.sequences.append(sequence)
        self.bytes += size
        return len(self.values) - 1

    # -- completion -----------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    def metadata(self, index: int) -> RecordMetadata:
        tp = self.tps[self.tp_ids[index]]
        assert self.offsets is not None
        key, value = self.keys[index], self.values[index]
        return RecordMetadata(
            tp.topic,
            tp.partition,
            int(self.offsets[index]),
            self.log_append_time_ms.get(tp.topic, self.timestamps[index]),
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


class RecordFuture:
    """The eventual :class:`RecordMetadata` of one sent record."""

    __slots__ = ("_batch", "_error", "_index")

    def __init__(self, batch: RecordBatch | None = None, index: int = -1, error: BaseException | None = None) -> None:
        self._batch = batch
        self._index = index
        self._error = error

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Block until the record is committed; raise its error if it failed.

        ``timeout`` in seconds; DeliveryTimeoutError when it passes first
        (the record may still be committed later).
        """
        error = self._wait(timeout)
        if error is not None:
            raise error
        assert self._batch is not None
        return self._batch.metadata(self._index)

    def _wait(self, timeout: float | None) -> BaseException | None:
        if self._error is not None:
            return self._error
        assert self._batch is not None
        if not self._batch.wait(timeout):
            raise DeliveryTimeoutError(f"record not acknowledged within {timeout} s")
        return self._batch.error_of(self._index)

    def done(self) -> bool:
        return self._error is not None or (self._batch is not None and self._batch.done)

    def succeeded(self) -> bool:
        return self.done() and self.exception() is None

    def failed(self) -> bool:
        return self.done() and self.exception() is not None

    def exception(self) -> BaseException | None:
        """The record's error once it is done (None while pending or after success)."""
        if self._error is not None:
            return self._error
        if self._batch is None or not self._batch.done:
            return None
        return self._batch.error_of(self._index)

    def add_callback(self, fn: Callable[[RecordMetadata], Any]) -> RecordFuture:
        """Call ``fn(metadata)`` when the record is committed (at once if it already is)."""
        if self._error is None and self._batch is not None:
            self._batch.on_done(self._index, fn, None)
        return self

    def add_errback(self, fn: Callable[[BaseException], Any]) -> RecordFuture:
        """Call ``fn(error)`` if the record fails (at once if it already did)."""
        if self._error is not None:
            fn(self._error)
        elif self._batch is not None:
            self._batch.on_done(self._index, None, fn)
        return self


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


def number_records(tp_ids: np.ndarray, accepted: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row order (by partition, send order within each) and each row's offset.

    ``tp_ids[i]`` is record i's partition id, ``starts[t]`` partition t's end
    offset; accepted records of a partition get consecutive offsets from it.
    """
    candidates = np.nonzero(accepted)[0]
    ids = tp_ids[candidates]
    if len(ids) and ids.max() < 1 << 15:
        ids = ids.astype(np.int16)  # numpy's stable sort of 16-bit ints is a radix sort
    order = candidates[np.argsort(ids, kind="stable")]
    sorted_tp = tp_ids[order]
    group_first = np.searchsorted(sorted_tp, sorted_tp, side="left")
    return order, starts[sorted_tp] + (np.arange(len(order)) - group_first)


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
    log_append = {t for t in {tp.topic for tp in tps} if topics[t].log_append_time}
    names = sorted({tp.topic for tp in tps})
    topic_of_tp = np.array([names.index(tp.topic) for tp in tps], dtype=np.int32)
    tp_partition = np.array([tp.partition for tp in tps], dtype=np.int32)
    row_tps = np.asarray(row_tps)
    timestamps = np.asarray(timestamps_ms, dtype=np.int64)
    types = np.zeros(len(row_tps), dtype=np.int32)
    if log_append:
        stamped = np.isin(topic_of_tp, [names.index(t) for t in log_append])[row_tps]
        timestamps = np.where(stamped, append_time_ms, timestamps)
        types = np.where(stamped, TIMESTAMP_TYPE_CODES["LogAppendTime"], types).astype(np.int32)
    # Built in C (take over the few distinct names), not as a million Python strings.
    topic_column = array(names, pa.string()).take(array(topic_of_tp[row_tps], pa.int32()))
    table = pa.table(
        {
            "topic": topic_column,
            "partition": array(tp_partition[row_tps], pa.int32()),
            "offset": array(offsets, pa.int64()),
            "timestamp": array(timestamps * 1000, pa.timestamp("us", tz="UTC")),
            "timestamp_type": array(types, pa.int32()),
            "key": keys,
            "value": values,
            "headers": headers,
            "producer_id": array(np.broadcast_to(np.asarray(producer_id, dtype=np.int64), len(row_tps)), pa.int64()),
            "producer_epoch": array(
                np.broadcast_to(np.asarray(producer_epoch, dtype=np.int32), len(row_tps)), pa.int32()
            ),
            "sequence": sequences,
        },
        schema=LOG_ARROW_SCHEMA,
    )
    return table, {t: append_time_ms for t in log_append}


class ProducerBatch:
    """A sealed :class:`RecordBatch` as an :class:`engine.commit.AppendBatch`; offsets are
    assigned on the driver, each partition's records in send order, and the rows are
    written from the driver (one Parquet file per partition)."""

    operation = "produce"
    commit_when_empty = False

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
        self._accepted = np.ones(len(records), dtype=bool)
        self._tp_ids = np.asarray(records.tp_ids, dtype=np.int64)
        self._offsets = np.full(len(records), -1, dtype=np.int64)
        self._append_time_ms: dict[str, int] = {}

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        """Refuse (per record) what the current topic metadata refuses."""
        records = self.records
        sizes = np.asarray(records.sizes, dtype=np.int64)
        for tp_id, tp in enumerate(records.tps):
            topic = view.topics.get(tp.topic)
            members = self._tp_ids == tp_id
            error = check_partition(topic, tp.topic, tp.partition)
            if error is not None:
                for i in np.nonzero(members & self._accepted)[0]:
                    records.record_errors[int(i)] = error
                self._accepted &= ~members
                continue
            for i in np.nonzero(members & self._accepted & (sizes > topic.max_message_bytes))[0]:
                records.record_errors[int(i)] = check_size(topic, tp.topic, int(sizes[i]))
                self._accepted[i] = False
        counts = np.bincount(self._tp_ids[self._accepted], minlength=len(records.tps))
        return {tp: int(counts[i]) for i, tp in enumerate(records.tps) if counts[i]}

    @property
    def app_transactions(self) -> tuple[AppTransaction, ...]:
        return () if self.app_transaction is None else (self.app_transaction,)

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        """A plain producer batch is never fenced."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        return sorted({self.records.tps[i] for i in np.unique(self._tp_ids[self._accepted])})

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> pa.Table:
        records = self.records
        starts = np.array([ends.get(tp, 0) for tp in records.tps], dtype=np.int64)
        order, offsets = number_records(self._tp_ids, self._accepted, starts)
        sorted_tp = self._tp_ids[order]
        self._offsets[order] = offsets

        take = array(order, pa.int64())
        headers = records.headers
        header_column = (
            pa.nulls(len(order), HEADERS_ARROW)
            if not any(h is not None for h in headers)
            else key_value_lists(headers, HEADERS_ARROW).take(take)
        )
        table, self._append_time_ms = log_rows(
            records.tps,
            sorted_tp,
            offsets,
            np.asarray(records.timestamps, dtype=np.int64)[order],
            keys=array(records.keys, pa.binary()).take(take),
            values=array(records.values, pa.binary()).take(take),
            headers=header_column,
            sequences=array(records.sequences, pa.int32()).take(take),
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            topics=topics,
            append_time_ms=append_time_ms,
        )
        return table

    def complete(self) -> None:
        """The commit landed: every accepted record learns its offset."""
        self.records.complete(self._offsets, self._append_time_ms)

    def fail(self, error: BaseException) -> None:
        self.records.fail(error)
