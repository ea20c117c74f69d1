"""``df.write`` / ``df.writeStream`` ``.format("lakelog")``: the Kafka sink's columns into topics.

Executors only convert their rows to Arrow (``value``, optional ``key``,
``topic``, ``partition``, ``headers``, ``timestamp``) and send them to the
driver in the commit message; the driver's commit assigns partitions (the
key's murmur2 hash as Kafka's default partitioner, else sticky), offsets
and writes one Parquet file per partition, then makes one Delta commit
through the commit core (:class:`engine.commit.Committer`). A batch is all or nothing:
a record the topic refuses (unknown topic or partition, over
``max.message.bytes``) fails it before anything is committed.

Exactly-once for streaming: the commit carries Delta's ``txn`` action with
appId ``lakelog-sink-<queryId>`` (the query id survives restarts from the
checkpoint) and version = batchId. A micro-batch replayed after a crash
finds its batchId already committed and adds nothing -- the same mechanism
as Delta's own sink (``txnAppId``/``txnVersion``). Records of one task keep
their order within a partition.

Deviation from Kafka's sink: the records of a micro-batch pass through the
driver (as Kafka's producer on each executor would pass them to brokers);
micro-batches are bounded by the source's rate limits.
"""

from __future__ import annotations

import heapq
import io
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import LongType, StructType

from engine.commit import AppendResult, AppTransaction, Committer, RetryPolicy, TableLog
from engine.commit.state import TableState
from engine.errors import InvalidTopicError, LakelogError, StoreError
from engine.object_store import StoreAccess
from engine.offsets import TopicPartition
from engine.partitioner import KeylessPartitioner, partitions_for_keys
from engine.producer import outgoing_record
from engine.producer_batch import check_partition, check_size, log_rows, number_records
from engine.schema import HEADERS_ARROW, check_sink_columns
from engine.topics import TopicMetadata, validate_topic_name
from spark_connector.options import SinkOptions

log = logging.getLogger("lakelog.sink")

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY
POLICY = RetryPolicy(retries=50, backoff_ms=20, backoff_max_ms=1000)

_RECORD_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADERS_ARROW),
        ("timestamp_ms", pa.int64()),
    ]
)


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Raise at query start for input the sink cannot write."""
    check_sink_columns({f.name: f.dataType.simpleString() for f in schema.fields})
    if options.topic is not None:
        validate_topic_name(options.topic)
    elif "topic" not in schema.fieldNames():
        raise InvalidTopicError("no topic: set option('topic', ...) or give the DataFrame a 'topic' column")


def to_records(batch: pa.RecordBatch, topic: str | None, timestamp_is_long: bool) -> pa.Table:
    """Rows of the sink's input as the records the commit places (types normalized)."""
    n = batch.num_rows
    names = batch.schema.names

    def column(name: str, kind: pa.DataType) -> pa.Array:
        if name not in names:
            return pa.nulls(n, kind)
        return pc.cast(batch.column(name), kind)

    topics = pa.array([topic] * n, pa.string()) if topic is not None else column("topic", pa.string())
    if "timestamp" not in names:
        stamps = pa.nulls(n, pa.int64())
    elif timestamp_is_long:
        stamps = pc.cast(batch.column("timestamp"), pa.int64())
    else:
        micros = pc.cast(batch.column("timestamp"), pa.timestamp("us", tz="UTC"))
        stamps = pc.divide(pc.cast(micros, pa.int64()), 1000)
    return pa.Table.from_arrays(
        [
            topics,
            column("partition", pa.int32()),
            column("key", pa.binary()),
            column("value", pa.binary()),
            column("headers", HEADERS_ARROW),
            stamps,
        ],
        schema=_RECORD_SCHEMA,
    )


@dataclass
class RecordsMessage(WriterCommitMessage):
    """One task's records (Arrow IPC stream, lz4) and the streaming query's id."""

    data: bytes
    rows: int
    query_id: str | None


def encode(tables: list[pa.Table]) -> RecordsMessage:
    table = pa.concat_tables(tables) if tables else _RECORD_SCHEMA.empty_table()
    sink = io.BytesIO()
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.ipc.new_stream(sink, _RECORD_SCHEMA, options=options) as writer:
        writer.write_table(table)
    return RecordsMessage(sink.getvalue(), table.num_rows, _query_id())


def decode(message: RecordsMessage) -> pa.Table:
    return pa.ipc.open_stream(message.data).read_all()


def _query_id() -> str | None:
    from pyspark import TaskContext

    context = TaskContext.get()
    return None if context is None else context.getLocalProperty(QUERY_ID_PROPERTY)


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


class SinkBatch:
    """A sink's records as one :class:`engine.commit.AppendBatch`: refused as a whole if
    the topics refuse any record; rows built from the placed Arrow columns."""

    operation = "stream_write"
    commit_when_empty = False

    def __init__(self, records: PlacedRecords, app_transaction: AppTransaction | None) -> None:
        self.records = records
        self.app_transaction = app_transaction

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

    def check(self, committed_app_version: int, view: TableState) -> None:
        """A sink batch is never fenced: its app transaction only makes replays no-ops."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        return sorted(self.records.tps)

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> pa.Table:
        """Rows grouped by partition (in order of first record), record order within each."""
        records = self.records
        n = len(records)
        starts = np.array([ends.get(tp, 0) for tp in records.tps], dtype=np.int64)
        order, offsets = number_records(records.tp_ids, np.ones(n, dtype=bool), starts)
        take = pa.array(order)
        headers = records.headers
        table, _ = log_rows(
            records.tps,
            records.tp_ids[order],
            offsets,
            records.timestamps_ms[order],
            keys=records.keys.take(take),
            values=records.values.take(take),
            headers=pa.nulls(n, HEADERS_ARROW) if headers.null_count == n else headers.take(take),
            sequences=pa.array(order, pa.int32()),  # a record's sequence is its row number
            producer_id=-1,
            producer_epoch=0,
            topics=topics,
            append_time_ms=append_time_ms,
        )
        return table


def place_records(view: TableState, tables: list[pa.Table]) -> PlacedRecords:
    """The records placed in partitions exactly as the producer places records sent one by one.

    Partition: the ``partition`` column if set; else the key's murmur2 hash
    (Kafka's default partitioner); else sticky keyless partitioning by one
    :class:`KeylessPartitioner` for the call, records taken in row order. A null
    ``timestamp_ms`` becomes now. Raises, for the first refused record in row
    order, what the producer raises for it: InvalidTopicError (null topic),
    InvalidRecordError (null header key, negative timestamp),
    UnknownTopicOrPartitionError (unknown topic, partition out of range),
    RecordTooLargeError (over the topic's ``max.message.bytes``); a null entry
    in a headers list gives the per-record path's TypeError.
    """
    table = (
        pa.concat_tables([t.select(_RECORD_SCHEMA.names) for t in tables]).combine_chunks()
        if tables
        else _RECORD_SCHEMA.empty_table()
    )
    n = table.num_rows
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        key, value, headers = (pa.array([], _RECORD_SCHEMA.field(name).type) for name in ("key", "value", "headers"))
        return PlacedRecords([], none, key, value, headers, none, none)
    column = {name: table.column(name).chunk(0) for name in _RECORD_SCHEMA.names}
    encoded = column["topic"].dictionary_encode()
    names: list[str] = encoded.dictionary.to_pylist()
    # Null topics get the id len(names), whose per-topic entries say "no such topic".
    topic_ids = encoded.indices.fill_null(len(names)).to_numpy().astype(np.int64)
    metas = [view.topics.get(name) for name in names]
    exists = np.array([m is not None for m in metas] + [False], dtype=bool)
    counts = np.array([m.partitions if m else 0 for m in metas] + [0], dtype=np.int64)
    max_bytes = np.array([m.max_message_bytes if m else 0 for m in metas] + [0], dtype=np.int64)

    given = _valid(column["partition"])
    partitions = column["partition"].fill_null(0).to_numpy().astype(np.int64)
    keys = column["key"]
    header_sizes, header_refused = _header_sizes(column["headers"])
    sizes = _lengths(keys) + _lengths(column["value"]) + header_sizes
    timestamps = column["timestamp_ms"].fill_null(int(time.time() * 1000)).to_numpy().astype(np.int64)

    row_counts = counts[topic_ids]
    refused = (
        ~exists[topic_ids]
        | header_refused
        | (timestamps < 0)
        | (given & ((partitions < 0) | (partitions >= row_counts)))
        | (sizes > max_bytes[topic_ids])
    )
    if refused.any():
        first = int(np.argmax(refused))
        _raise_refusal(view, table.slice(first, 1))
        raise AssertionError(f"record {first} was found refused but passes the producer's checks")

    key_valid = _valid(keys)
    keyed = np.flatnonzero(~given & key_valid)
    if len(keyed):
        partitions[keyed] = partitions_for_keys(keys.take(pa.array(keyed)), row_counts[keyed])
    keyless = np.flatnonzero(~given & ~key_valid)
    if len(keyless):
        partitions[keyless] = _keyless_partitions(keyless, topic_ids, names, counts, sizes)

    # Partition ids in order of each partition's first record, as RecordBatch.add numbers them.
    codes = (topic_ids << 32) | partitions
    unique, first_rows, inverse = np.unique(codes, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first_rows, kind="stable")
    tp_id_of = np.empty(len(unique), dtype=np.int64)
    tp_id_of[by_appearance] = np.arange(len(unique))
    tps = [TopicPartition(names[int(unique[u]) >> 32], int(unique[u]) & 0xFFFFFFFF) for u in by_appearance]
    return PlacedRecords(
        tps, tp_id_of[inverse.reshape(-1)], keys, column["value"], column["headers"], timestamps, sizes
    )


def _valid(array: pa.Array) -> np.ndarray:
    return array.is_valid().to_numpy(zero_copy_only=False)


def _lengths(array: pa.Array) -> np.ndarray:
    """Byte length of each entry (UTF-8 bytes for strings), 0 for nulls."""
    return pc.binary_length(array).fill_null(0).to_numpy().astype(np.int64)


def _header_sizes(headers: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the bytes of its header keys and values, and whether the producer
    refuses its headers (a null header or header key)."""
    per_record = pc.list_value_length(headers).fill_null(0).to_numpy().astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(per_record)])
    # flatten() drops the entries of null lists, so header j belongs to the record
    # whose bounds hold j; the struct's own nulls become null keys.
    header_keys, header_values = headers.flatten().flatten()
    sizes = np.concatenate([[0], np.cumsum(_lengths(header_keys) + _lengths(header_values))])
    refused = np.concatenate([[0], np.cumsum(header_keys.is_null().to_numpy(zero_copy_only=False))])
    return sizes[bounds[1:]] - sizes[bounds[:-1]], (refused[bounds[1:]] - refused[bounds[:-1]]) > 0


def _keyless_partitions(
    rows: np.ndarray, topic_ids: np.ndarray, names: list[str], counts: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Partitions of the keyless records ``rows`` (ascending), as one KeylessPartitioner
    given them one by one in row order would choose.

    A sticky run is placed in one step; runs start in row order across topics,
    since each draws the partitioner's shared counter.
    """
    keyless = KeylessPartitioner()
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


def commit_records(
    access: StoreAccess, tables: list[pa.Table], *, client_id: str, app: AppTransaction | None
) -> AppendResult | None:
    """Append the records in one Delta commit to the store ``access`` reaches; None when
    ``app`` already committed them."""
    access.install()  # this Python worker's environment need not know the store's endpoint
    committer = Committer(TableLog(access.uri), client_id)
    view = committer.latest()
    if app is not None and view.app_version(app.app_id) >= app.version:
        log.info("batch %s of %s is already committed; nothing to add", app.version, app.app_id)
        return None
    records = place_records(view, tables)
    if not len(records):
        return None
    return committer.append(SinkBatch(records, app), POLICY)


class _Writing:
    """What the executor side of both writers does."""

    options: SinkOptions
    timestamp_is_long: bool

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RecordsMessage:
        return encode([to_records(b, self.options.topic, self.timestamp_is_long) for b in iterator])


class LakelogBatchWriter(_Writing, DataSourceArrowWriter):
    """``df.write.format("lakelog")``: all rows in one commit, or none."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.timestamp_is_long = _timestamp_is_long(schema)

    def commit(self, messages: list[RecordsMessage | None]) -> None:
        tables = [decode(m) for m in messages if m is not None]
        commit_records(self.options.access, tables, client_id="lakelog-batch-write", app=None)

    def abort(self, messages: list[RecordsMessage | None]) -> None:
        """Nothing was written before the commit: nothing to undo."""


class LakelogStreamWriter(_Writing, DataSourceStreamArrowWriter):
    """``df.writeStream.format("lakelog")``: each micro-batch exactly once (see the module docstring)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.timestamp_is_long = _timestamp_is_long(schema)

    def commit(self, messages: list[RecordsMessage | None], batchId: int) -> None:
        present = [m for m in messages if m is not None]
        query_ids = {m.query_id for m in present}
        if not present or not any(m.rows for m in present):
            return
        if len(query_ids) != 1 or None in query_ids:
            raise StoreError(f"cannot tell the streaming query's id from its tasks ({query_ids}); nothing committed")
        app = AppTransaction(f"lakelog-sink-{query_ids.pop()}", batchId)
        commit_records(self.options.access, [decode(m) for m in present], client_id=app.app_id, app=app)

    def abort(self, messages: list[RecordsMessage | None], batchId: int) -> None:
        """Nothing was written before the commit: nothing to undo."""


def _timestamp_is_long(schema: StructType) -> bool:
    return "timestamp" in schema.fieldNames() and isinstance(schema["timestamp"].dataType, LongType)
