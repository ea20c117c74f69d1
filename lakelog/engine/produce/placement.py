"""Placing records in partitions, column-wise: Kafka's default partitioner over Arrow columns.

A batch of records given as columns (the streaming sink's micro-batch,
``Producer.send_batch``) is placed exactly as the producer places records
sent one by one -- an explicit partition, else the key's murmur2 hash, else
sticky keyless partitioning -- and refused with the error the producer would
raise for its first refused record. :class:`PlacedBatch` commits placed
records as one append through the commit core, the rows built from the
columns without a per-record Python step. :func:`outgoing_record` places one
record of ``send`` (and of a transaction) the same way.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.arrow_columns import array, empty_table, scalar, to_numpy
from lakelog.engine.commit import AppTransaction
from lakelog.engine.commit.data_files import DataFile, DataFileWriter
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import InvalidRecordError, InvalidTopicError, LakelogError, UnknownTopicOrPartitionError
from lakelog.engine.produce.batches import (
    SEQUENCE_WRAP,
    RecordBatch,
    check_partition,
    check_record,
    check_size,
    log_rows,
    number_records,
    partition_ids,
    records_file_partition,
    topic_ids_of,
)
from lakelog.engine.produce.partitioner import KeylessPartitioner, partition_for_key, partitions_for_keys
from lakelog.engine.records import (
    MAX_TIMESTAMP_MS,
    Headers,
    check_timestamps_ms,
    record_size,
    to_bytes,
    to_headers,
    to_timestamp_ms,
)
from lakelog.engine.schema import HEADERS_ARROW
from lakelog.engine.topics import TopicMetadata, TopicPartition

# The columns of records to place: what the Kafka sink takes, timestamps in ms.
RECORD_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADERS_ARROW),
        ("timestamp_ms", pa.int64()),
    ]
)


@dataclass(frozen=True, eq=False)
class PlacedRecords:
    """A sink commit's records with their partitions, as columns; record i is row i of
    the task tables in order (its producer sequence is i)."""

    tps: list[TopicPartition]  # partition id -> partition, in order of first record
    tp_ids: np.ndarray  # int64: each record's partition id
    keys: pa.Array
    values: pa.Array
    headers: pa.Array
    timestamps_ms: np.ndarray  # int64
    sizes: np.ndarray  # int64: what each record counts against max.message.bytes

    def __len__(self) -> int:
        return len(self.tp_ids)


@dataclass(frozen=True, eq=False)
class RecordProducers:
    """Per record (in record order), the producer fields its row keeps: producer id (-1:
    none), epoch and sequence -- for records of several producers in one commit."""

    producer_ids: np.ndarray  # int64
    epochs: np.ndarray  # int32
    sequences: np.ndarray  # int32


class PlacedBatch:
    """Placed records as one :class:`engine.commit.AppendBatch`: refused as a whole if the
    topics refuse any record; rows built from the placed Arrow columns."""

    commit_when_empty = False

    def __init__(
        self,
        records: PlacedRecords,
        app_transaction: AppTransaction | None,
        *,
        operation: str = "stream_write",
        producer_id: int = -1,
        producer_epoch: int = 0,
        base_sequence: int = 0,
        producers: RecordProducers | None = None,
    ) -> None:
        self.records = records
        self.app_transaction = app_transaction
        self.operation = operation
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        # Record i's sequence is base_sequence + i (Kafka's producer sequence, for one partition),
        # unless ``producers`` gives each record its own producer fields.
        self.base_sequence = base_sequence
        self.producers = producers
        self.offsets: np.ndarray | None = None  # each record's offset, once built
        self.log_append_time_ms: dict[str, int] = {}

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        """The record count per partition; raises the error of the first record (in
        record order) the topics refuse as of ``view`` -- they may have changed since
        the records were placed (UnknownTopicOrPartitionError, RecordTooLargeError)."""
        records = self.records
        errors: list[LakelogError | None] = []
        max_bytes = np.zeros(len(records.tps), dtype=np.int64)
        for tp_id, tp in enumerate(records.tps):
            topic = view.topics.get(tp.topic)
            errors.append(check_partition(topic, tp.topic, tp.partition))
            max_bytes[tp_id] = topic.max_message_bytes if topic is not None else 0
        bad_tp = np.array([e is not None for e in errors], dtype=bool)
        refused = bad_tp[records.tp_ids] | (records.sizes > max_bytes[records.tp_ids])
        if refused.any():
            first = int(np.argmax(refused))
            tp = records.tps[records.tp_ids[first]]
            raise errors[records.tp_ids[first]] or check_size(
                view.topics[tp.topic], tp.topic, int(records.sizes[first])
            )
        counts = np.bincount(records.tp_ids, minlength=len(records.tps))
        return {tp: int(counts[i]) for i, tp in enumerate(records.tps)}

    @property
    def app_transactions(self) -> tuple[AppTransaction, ...]:
        return () if self.app_transaction is None else (self.app_transaction,)

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        """A sink batch is never fenced: its app transaction only makes replays no-ops."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        return sorted(self.records.tps)

    def number(self, ends: Mapping[TopicPartition, int]) -> tuple[np.ndarray, np.ndarray]:
        """Number the records from each partition's end in ``ends`` (:attr:`offsets`), no rows
        built: the row order (grouped by partition, record order within each) and each row's
        offset."""
        records = self.records
        if len(records.tps) == 1:  # one partition: the records' own order, numbered on
            order = np.arange(len(records), dtype=np.int64)
            self.offsets = order + ends.get(records.tps[0], 0)
            return order, self.offsets
        starts = np.array([ends.get(tp, 0) for tp in records.tps], dtype=np.int64)
        order, offsets = number_records(records.tp_ids, np.ones(len(records), dtype=bool), starts)
        self.offsets = np.empty(len(records), dtype=np.int64)
        self.offsets[order] = offsets
        return order, offsets

    def write_unsynced(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], files: DataFileWriter
    ) -> list[DataFile] | None:
        """The records numbered from ``ends`` (:attr:`offsets`, as :meth:`number`) and written
        as :meth:`DataFileWriter.write` writes :meth:`build`'s rows with ``sync=False,
        renumberable=True`` -- the same bytes -- straight from the placed columns, without the
        rows: for one partition's records without headers of a topic that keeps their
        CreateTime, on a local store. None, nothing numbered or written, for any other batch
        (the caller builds the rows). Raises OSError (nothing written, nothing numbered)."""
        records = self.records
        n = len(records)
        tp = records_file_partition(records.tps, n, records.headers.null_count, topics)
        if tp is None:
            return None
        # One partition: the rows are the records in their order.
        producer_ids, epochs, sequences = self.producer_columns(np.arange(n, dtype=np.int64))
        written = files.write_records(
            tp, ends.get(tp, 0), records.timestamps_ms, records.keys, records.values, producer_ids, epochs, sequences
        )
        if written is None:
            return None
        self.number(ends)
        self.log_append_time_ms = {}
        return [written]

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> pa.Table:
        """Rows grouped by partition (in order of first record), record order within each."""
        records = self.records
        n = len(records)
        order, offsets = self.number(ends)
        self.log_append_time_ms = {
            t: append_time_ms for t in {tp.topic for tp in records.tps} if topics[t].log_append_time
        }
        headers = records.headers
        if len(records.tps) == 1 or (n and bool(np.all(order[1:] > order[:-1]))):
            # Already grouped by partition (one partition, or sticky runs): no reordering copy.
            keys, values, headers = records.keys, records.values, headers
            timestamps, row_tps = records.timestamps_ms, records.tp_ids
        else:
            take = array(order, pa.int64())
            keys, values = records.keys.take(take), records.values.take(take)
            headers = headers if headers.null_count == n else headers.take(take)
            timestamps, row_tps = records.timestamps_ms[order], records.tp_ids[order]
        producer_ids, epochs, sequences = self.producer_columns(order)
        table, _ = log_rows(
            records.tps,
            row_tps,
            offsets,
            timestamps,
            keys=keys,
            values=values,
            headers=pa.nulls(n, HEADERS_ARROW) if headers.null_count == n else headers,
            sequences=array(sequences, pa.int32()),
            producer_id=producer_ids,
            producer_epoch=epochs,
            topics=topics,
            append_time_ms=append_time_ms,
        )
        return table

    def producer_columns(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The producer id (int64), epoch and sequence (int32) of the rows holding the records
        in ``order``: ``producers``' fields, else the batch's one producer's, record i's sequence
        ``base_sequence + i`` wrapped to 0 past 2**31 - 1 as Kafka's producer numbers records
        (SEQUENCE_WRAP)."""
        producers = self.producers
        if producers is not None:
            return producers.producer_ids[order], producers.epochs[order], producers.sequences[order]
        n = len(order)
        return (
            np.full(n, self.producer_id, dtype=np.int64),
            np.full(n, self.producer_epoch, dtype=np.int32),
            ((order + self.base_sequence) % SEQUENCE_WRAP).astype(np.int32),
        )


def join_placed(parts: Sequence[PlacedRecords]) -> PlacedRecords:
    """The records of ``parts`` (at least one), in order, as one placement: each record keeps the
    partition it was placed in, partition ids numbered in order of each partition's first
    record, as :func:`place_records` numbers them. For records with explicit partitions (a Kafka
    client's batches) that is what placing the parts' tables together gives, without checking
    and placing every record a second time. Raises ValueError for no parts."""
    if not parts:
        raise ValueError("no placed records to join")
    if len(parts) == 1:
        return parts[0]
    index: dict[TopicPartition, int] = {}
    tp_ids = []
    for part in parts:
        remap = np.array([index.setdefault(tp, len(index)) for tp in part.tps], dtype=np.int64)
        tp_ids.append(remap[part.tp_ids] if len(part) else np.zeros(0, dtype=np.int64))
    return PlacedRecords(
        list(index),
        np.concatenate(tp_ids),
        pa.concat_arrays([p.keys for p in parts]),
        pa.concat_arrays([p.values for p in parts]),
        pa.concat_arrays([p.headers for p in parts]),
        np.concatenate([p.timestamps_ms for p in parts]),
        np.concatenate([p.sizes for p in parts]),
    )


def columns_for_batch(
    topic: str, values: Any, keys: Any, partition: int | None, headers: Any, timestamps: Any
) -> pa.Table:
    """``Producer.send_batch``'s arguments as records to place (:data:`RECORD_SCHEMA`).

    Raises InvalidRecordError for columns of the wrong type or length or
    timestamps outside what the table holds, and UnknownTopicOrPartitionError
    for a partition that is not an int.
    """
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise UnknownTopicOrPartitionError(f"partition must be an int, got {partition!r}")
    value_column = _binary_column(values, "values")
    n = len(value_column)

    def optional(data: Any, name: str, kind: pa.DataType) -> pa.Array:
        if data is None:
            return pa.nulls(n, kind)
        column = _binary_column(data, name) if kind == pa.binary() else _typed_column(data, name, kind)
        if len(column) != n:
            raise InvalidRecordError(f"{name} has {len(column)} entries for {n} values")
        return column

    stamps = (
        array(np.full(n, int(time.time() * 1000), dtype=np.int64), pa.int64())
        if timestamps is None
        else optional(timestamps, "timestamps", pa.int64())
    )
    check_timestamps_ms(stamps)
    return pa.Table.from_arrays(
        [
            array([topic], pa.string()).take(array(np.zeros(n, dtype=np.int32), pa.int32())),
            pa.nulls(n, pa.int32()) if partition is None else array(np.full(n, partition, dtype=np.int32), pa.int32()),
            optional(keys, "keys", pa.binary()),
            value_column,
            optional(headers, "headers", HEADERS_ARROW),
            stamps,
        ],
        schema=RECORD_SCHEMA,
    )


def _binary_column(data: Any, name: str) -> pa.Array:
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    if isinstance(data, pa.Array):
        if pa.types.is_binary(data.type) or pa.types.is_large_binary(data.type):
            return data.cast(pa.binary())
        if pa.types.is_string(data.type) or pa.types.is_large_string(data.type):
            return data.cast(pa.string()).cast(pa.binary())
        raise InvalidRecordError(f"{name} must be binary or string, got Arrow type {data.type}")
    try:
        return array([v.encode() if isinstance(v, str) else v for v in data], pa.binary())
    except (TypeError, OverflowError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidRecordError(f"{name} must hold bytes, str or None: {exc}") from exc


def _typed_column(data: Any, name: str, kind: pa.DataType) -> pa.Array:
    try:
        column = data.combine_chunks() if isinstance(data, pa.ChunkedArray) else data
        return column.cast(kind) if isinstance(column, pa.Array) else array(column, kind)
    except (TypeError, ValueError, OverflowError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidRecordError(f"{name} must be {kind}: {exc}") from exc


def place_records(view: TableState, tables: list[pa.Table]) -> PlacedRecords:
    """The records placed in partitions exactly as the producer places records sent one by one.

    Partition: the ``partition`` column if set; else the key's murmur2 hash
    (Kafka's default partitioner); else sticky keyless partitioning by one
    :class:`KeylessPartitioner` for the call, records taken in row order. A null
    ``timestamp_ms`` becomes now. Raises, for the first refused record in row
    order, what the producer raises for it: InvalidTopicError (null topic),
    InvalidRecordError (null header key, timestamp outside [1970, 9999]),
    UnknownTopicOrPartitionError (unknown topic, partition out of range),
    RecordTooLargeError (over the topic's ``max.message.bytes``); a null entry
    in a headers list gives the per-record path's TypeError.
    """
    table = (
        pa.concat_tables([t.select(RECORD_SCHEMA.names) for t in tables]).combine_chunks()
        if tables
        else empty_table(RECORD_SCHEMA)
    )
    n = table.num_rows
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        key, value, headers = (pa.nulls(0, RECORD_SCHEMA.field(name).type) for name in ("key", "value", "headers"))
        return PlacedRecords([], none, key, value, headers, none, none)
    column = {name: table.column(name).chunk(0) for name in RECORD_SCHEMA.names}
    encoded = column["topic"].dictionary_encode()
    names: list[str] = encoded.dictionary.to_pylist()
    # Null topics get the id len(names), whose per-topic entries say "no such topic".
    topic_ids = to_numpy(encoded.indices.fill_null(scalar(len(names), encoded.indices.type))).astype(np.int64)
    metas = [view.topics.get(name) for name in names]
    exists = np.array([m is not None for m in metas] + [False], dtype=bool)
    counts = np.array([m.partitions if m else 0 for m in metas] + [0], dtype=np.int64)
    max_bytes = np.array([m.max_message_bytes if m else 0 for m in metas] + [0], dtype=np.int64)

    given = _valid(column["partition"])
    partitions = to_numpy(column["partition"].fill_null(scalar(0, pa.int32()))).astype(np.int64)
    keys = column["key"]
    header_sizes, header_refused = _header_sizes(column["headers"])
    sizes = _lengths(keys) + _lengths(column["value"]) + header_sizes
    timestamps = to_numpy(column["timestamp_ms"].fill_null(scalar(int(time.time() * 1000), pa.int64()))).astype(
        np.int64
    )

    row_counts = counts[topic_ids]
    refused = (
        ~exists[topic_ids]
        | header_refused
        | (timestamps < 0)
        | (timestamps > MAX_TIMESTAMP_MS)
        | (given & ((partitions < 0) | (partitions >= row_counts)))
        | (sizes > max_bytes[topic_ids])
    )
    if refused.any():
        first = int(np.argmax(refused))
        _raise_refusal(view, table.slice(first, 1))
        raise AssertionError(f"record {first} was found refused but passes the producer's checks")

    partitions = choose_partitions(
        np.where(given, partitions, -1), topic_ids, names, counts, keys, sizes, KeylessPartitioner()
    )
    tps, tp_ids = partition_ids(topic_ids, names, partitions)
    return PlacedRecords(tps, tp_ids, keys, column["value"], column["headers"], timestamps, sizes)


def choose_partitions(
    partitions: np.ndarray,
    topic_ids: np.ndarray,
    names: Sequence[str],
    counts: np.ndarray,
    keys: pa.Array,
    sizes: np.ndarray,
    keyless: KeylessPartitioner,
    *,
    ignore_keys: bool = False,
) -> np.ndarray:
    """Each record's partition as Kafka's default partitioner chooses it, as int64.

    Record i of topic ``names[topic_ids[i]]`` (``counts[topic_ids[i]]`` partitions)
    keeps ``partitions[i]`` when it is >= 0; else its key's murmur2 hash places it
    (:func:`partitions_for_keys`, bit for bit the Java client's choice), else -- no key,
    or ``ignore_keys`` (``partitioner.ignore.keys``) -- sticky keyless runs of
    ``keyless``, drawn in record order as one :meth:`KeylessPartitioner.partition` call
    per record would draw them. Every topic of an unplaced record has at least one
    partition.
    """
    result = np.array(partitions, dtype=np.int64)
    unset = result < 0
    if not unset.any():
        return result
    has_key = np.zeros(len(result), dtype=bool) if ignore_keys else _valid(keys)
    keyed = np.flatnonzero(unset & has_key)
    if len(keyed):
        result[keyed] = partitions_for_keys(keys.take(array(keyed, pa.int64())), counts[topic_ids[keyed]])
    keyless_rows = np.flatnonzero(unset & ~has_key)
    if len(keyless_rows):
        result[keyless_rows] = _keyless_partitions(keyless_rows, topic_ids, names, counts, sizes, keyless)
    return result


def place_queued(
    batch: RecordBatch,
    topics: Mapping[str, TopicMetadata],
    keyless: KeylessPartitioner,
    next_sequences: dict[TopicPartition, int],
    *,
    ignore_keys: bool,
) -> None:
    """Place the records ``Producer.send`` queued in ``batch`` (:meth:`RecordBatch.place`), as
    it leaves the queue: an explicit partition stays, the others are chosen by
    :func:`choose_partitions` from ``topics`` (the producer's metadata now) and the
    producer's ``keyless`` partitioner; sequences continue ``next_sequences``. A record whose
    topic is no longer in ``topics`` fails alone with UnknownTopicOrPartitionError."""
    given = batch.column("partition")
    n = len(given)
    if None not in given:  # every partition explicit: nothing to choose
        batch.place(np.fromiter(given, dtype=np.int64, count=n), next_sequences)
        return
    names_of = batch.column("topic")
    names, topic_ids = topic_ids_of(names_of)
    metas = [topics.get(name) for name in names]
    counts = np.array([m.partitions if m is not None else 0 for m in metas], dtype=np.int64)
    partitions = to_numpy(array(given, pa.int64()).fill_null(scalar(-1, pa.int64()))).astype(np.int64)
    gone = np.flatnonzero((partitions < 0) & (counts[topic_ids] == 0))
    refused = {int(i): UnknownTopicOrPartitionError(f"topic {names_of[i]!r} does not exist") for i in gone}
    partitions[gone] = 0  # placed nowhere: refused
    chosen = choose_partitions(
        partitions,
        topic_ids,
        names,
        counts,
        array(batch.column("key"), pa.binary()),
        np.fromiter(batch.column("size"), dtype=np.int64, count=n),
        keyless,
        ignore_keys=ignore_keys,
    )
    batch.place(chosen, next_sequences, refused)


def place_partition_records(
    view: TableState,
    topic: str,
    partition: int,
    keys: Sequence[bytes | None] | pa.Array,
    values: Sequence[bytes | None] | pa.Array,
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
    timestamps_ms: Sequence[int] | np.ndarray,
) -> PlacedRecords:
    """Records for one given partition, as a Kafka Produce request carries them (keys and
    values bytes or None, headers (key, value) pairs or None per record, timestamps in ms),
    placed: the same :class:`PlacedRecords` and the same refusals as :func:`place_records`
    over :func:`columns_for_batch`'s table of them, built with a handful of Arrow calls
    instead of a pass per column and check (the agent places every Produce request so, on
    its event loop). Keys and values may come as ``pa.binary()`` arrays and timestamps as an
    int64 array (the agent's record reader makes them so); ``headers`` None means no record
    has headers. Raises what :func:`columns_for_batch` and :func:`place_records` raise."""
    n = len(values)
    meta = view.topics.get(topic)
    bare = headers is None or headers.count(None) == n  # no record has headers (most often)
    placeable = (
        0 < n == len(keys) == len(timestamps_ms)
        and (headers is None or len(headers) == n)
        and meta is not None
        and 0 <= partition < meta.partitions
        and (bare or not any(key is None for row in headers if row for key, _ in row))  # type: ignore[union-attr]
    )
    if placeable:
        stamps = (
            timestamps_ms
            if isinstance(timestamps_ms, np.ndarray)
            else np.fromiter(timestamps_ms, dtype=np.int64, count=n)
        )
        try:
            key_column, value_column = array(keys, pa.binary()), array(values, pa.binary())
        except (TypeError, OverflowError):
            placeable = False  # the general path says what is wrong with them
    if placeable:
        if bare:  # sizes from the columns' lengths: no pass over the records in Python
            sizes = _binary_lengths(value_column) + (0 if key_column.null_count == n else _binary_lengths(key_column))
        else:
            each = zip(_listed(keys), _listed(values), headers, strict=True)  # type: ignore[arg-type]
            sizes = np.fromiter((record_size(k, v, h) for k, v, h in each), dtype=np.int64, count=n)
        placeable = (
            int(sizes.max()) <= meta.max_message_bytes  # type: ignore[union-attr]
            and int(stamps.min()) >= 0
            and int(stamps.max()) <= MAX_TIMESTAMP_MS
        )
    if not placeable:
        # Something is refused (or there is nothing): the general path says what, as it would.
        keys, values = _listed(keys), _listed(values)
        stamps_list = timestamps_ms.tolist() if isinstance(timestamps_ms, np.ndarray) else timestamps_ms
        rows = [None if row is None else [{"key": k, "value": v} for k, v in row] for row in headers or [None] * n]
        table = columns_for_batch(topic, values, keys, partition, rows, stamps_list)
        return place_records(view, [table])
    header_column = pa.nulls(n, HEADERS_ARROW) if bare else array(list(headers), HEADERS_ARROW)  # type: ignore[arg-type]
    return PlacedRecords(
        [TopicPartition(topic, partition)],
        np.zeros(n, dtype=np.int64),
        key_column,
        value_column,
        header_column,
        stamps,
        sizes,
    )


def _listed(values: Sequence[Any] | pa.Array) -> Sequence[Any]:
    return values.to_pylist() if isinstance(values, pa.Array) else values


def _valid(column: pa.Array) -> np.ndarray:
    return to_numpy(column.is_valid())


def _lengths(column: pa.Array) -> np.ndarray:
    """Byte length of each entry (UTF-8 bytes for strings), 0 for nulls."""
    lengths = pc.binary_length(column)
    return to_numpy(lengths.fill_null(scalar(0, lengths.type))).astype(np.int64)


def _binary_lengths(column: pa.Array) -> np.ndarray:
    """:func:`_lengths` of a binary column, read off its offsets when it has no nulls."""
    if column.null_count:
        return _lengths(column)
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=4 * column.offset)
    # Not np.diff: its checks cost several times the subtraction for a request's few hundred records.
    return (offsets[1:] - offsets[:-1]).astype(np.int64)


def _header_sizes(headers: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the bytes of its header keys and values, and whether the producer
    refuses its headers (a null header or header key)."""
    lengths = pc.list_value_length(headers)
    per_record = to_numpy(lengths.fill_null(scalar(0, lengths.type))).astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(per_record)])
    # flatten() drops the entries of null lists, so header j belongs to the record
    # whose bounds hold j; the struct's own nulls become null keys.
    header_keys, header_values = headers.flatten().flatten()
    sizes = np.concatenate([[0], np.cumsum(_lengths(header_keys) + _lengths(header_values))])
    refused = np.concatenate([[0], np.cumsum(to_numpy(header_keys.is_null()))])
    return sizes[bounds[1:]] - sizes[bounds[:-1]], (refused[bounds[1:]] - refused[bounds[:-1]]) > 0


def _keyless_partitions(
    rows: np.ndarray,
    topic_ids: np.ndarray,
    names: Sequence[str],
    counts: np.ndarray,
    sizes: np.ndarray,
    keyless: KeylessPartitioner,
) -> np.ndarray:
    """Partitions of the keyless records ``rows`` (ascending), as ``keyless`` given them one
    by one in row order would choose.

    A sticky run is placed in one step; runs start in row order across topics,
    since each draws the partitioner's shared counter.
    """
    result = np.empty(len(rows), dtype=np.int64)
    by_topic = np.argsort(topic_ids[rows], kind="stable")
    groups = np.split(by_topic, np.flatnonzero(np.diff(topic_ids[rows][by_topic])) + 1)
    placed = [0] * len(groups)
    pending = [(int(rows[group[0]]), g) for g, group in enumerate(groups)]
    heapq.heapify(pending)
    while pending:
        _, g = heapq.heappop(pending)
        group, start = groups[g], placed[g]
        topic = int(topic_ids[rows[group[0]]])
        partition, count = keyless.sticky_run(names[topic], int(counts[topic]), sizes[rows[group[start:]]])
        result[group[start : start + count]] = partition
        placed[g] = start + count
        if placed[g] < len(group):
            heapq.heappush(pending, (int(rows[group[placed[g]]]), g))
    return result


def _raise_refusal(view: TableState, row: pa.Table) -> None:
    """Raise what the producer raises for this one record, if anything (the exact
    error and message of the per-record path)."""
    record = row.to_pylist()[0]
    topic = record["topic"]
    if topic is None:
        raise InvalidTopicError("a record has a null topic (set option('topic', ...) or fill the column)")
    headers = record["headers"]
    outgoing = outgoing_record(
        topic,
        view.topics.get(topic),
        record["value"],
        record["key"],
        record["partition"],
        None if headers is None else [(h["key"], h["value"]) for h in headers],
        record["timestamp_ms"],
        keyless=KeylessPartitioner(),  # errors do not depend on the keyless choice
        ignore_keys=False,
    )
    if outgoing.error is not None:
        raise outgoing.error


class OutgoingRecord(NamedTuple):
    """A ``send`` call's arguments, converted and checked, with its place."""

    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp_ms: int
    size: int
    partition: int | None  # None: the topic does not exist
    error: LakelogError | None  # why the topic refuses the record


# Built with tuple.__new__ from the values: send() makes one per record, and a frozen
# dataclass's __init__ (or a NamedTuple's Python __new__) was a quarter of its time.
_new_outgoing = partial(tuple.__new__, OutgoingRecord)


def outgoing_record(
    topic: str,
    meta: TopicMetadata | None,
    value: Any,
    key: Any,
    partition: int | None,
    headers: Any,
    timestamp: Any,
    *,
    keyless: KeylessPartitioner,
    ignore_keys: bool,
) -> OutgoingRecord:
    """Convert ``send``'s arguments and place the record as Kafka's default partitioner does.

    Raises InvalidRecordError / UnknownTopicOrPartitionError for arguments of
    the wrong type; a record the topic refuses carries that error instead.
    """
    # bytes and None, the common arguments, need no conversion (nor a call to find that out).
    key_bytes = key if key is None or type(key) is bytes else to_bytes(key, "key")
    value_bytes = value if value is None or type(value) is bytes else to_bytes(value, "value")
    header_list = to_headers(headers)
    timestamp_ms = to_timestamp_ms(timestamp)
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise UnknownTopicOrPartitionError(f"partition must be an int, got {partition!r}")
    size = record_size(key_bytes, value_bytes, header_list)
    if partition is None and meta is not None:
        if key_bytes is not None and not ignore_keys:
            partition = partition_for_key(key_bytes, meta.partitions)
        else:
            partition = keyless.partition(topic, meta.partitions, size)
    error = check_record(meta, topic, partition if partition is not None else 0, size)
    return _new_outgoing((key_bytes, value_bytes, header_list, timestamp_ms, size, partition, error))
