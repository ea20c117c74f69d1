"""``df.write`` / ``df.writeStream`` ``.format("lakelog")``: the Kafka sink's columns into topics.

Executors only convert their rows to Arrow (``value``, optional ``key``,
``topic``, ``partition``, ``headers``, ``timestamp``) and send them to the
driver in the commit message; the driver's commit assigns partitions (the
key's murmur2 hash as Kafka's default partitioner, else sticky), offsets,
writes one Parquet file per partition and commits them in one Delta commit
through the commit core; a micro-batch that loses a race to another commit
reserves its offsets instead and writes its files once more, numbered inside
the reservation (:meth:`engine.commit.Committer.append_or_reserve`), so it
lands beside busy producers. A batch is all or nothing:
a record the topic refuses (unknown topic or partition, over
``max.message.bytes``) fails it before anything is committed. A topic that
does not exist is created first (``num.partitions``, the ``topic.*``
settings) when the setting ``auto.create.topics.enable`` is true, as a
Kafka broker with that setting creates it; the settings are those of the
Python worker committing (lakelog's settings file, ``LAKELOG_*`` variables).

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

import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import LongType, StructType

from lakelog.engine.commit import AppendResult, AppTransaction, Committer, RetryPolicy, TableLog, TableState
from lakelog.engine.context import auto_create_topics
from lakelog.engine.errors import InvalidTopicError, StoreError, UnknownTopicOrPartitionError
from lakelog.engine.produce.placement import RECORD_SCHEMA, PlacedBatch, place_records
from lakelog.engine.schema import HEADERS_ARROW, check_sink_columns
from lakelog.engine.settings import Settings, load_settings
from lakelog.engine.storage.object_store import StoreAccess
from lakelog.engine.topics import validate_topic_name
from lakelog.spark_connector.options import SinkOptions

log = logging.getLogger("lakelog.sink")

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY
POLICY = RetryPolicy(retries=50, backoff_ms=20, backoff_max_ms=1000)


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
        schema=RECORD_SCHEMA,
    )


@dataclass
class RecordsMessage(WriterCommitMessage):
    """One task's records (Arrow IPC stream, lz4) and the streaming query's id."""

    data: bytes
    rows: int
    query_id: str | None


def encode(tables: list[pa.Table]) -> RecordsMessage:
    table = pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()
    sink = io.BytesIO()
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.ipc.new_stream(sink, RECORD_SCHEMA, options=options) as writer:
        writer.write_table(table)
    return RecordsMessage(sink.getvalue(), table.num_rows, _query_id())


def decode(message: RecordsMessage) -> pa.Table:
    return pa.ipc.open_stream(message.data).read_all()


def _query_id() -> str | None:
    from pyspark import TaskContext

    context = TaskContext.get()
    return None if context is None else context.getLocalProperty(QUERY_ID_PROPERTY)


def commit_records(
    access: StoreAccess,
    tables: list[pa.Table],
    *,
    client_id: str,
    app: AppTransaction | None,
    settings: Settings | None = None,
) -> AppendResult | None:
    """Append the records in one Delta commit to the store ``access`` reaches; None when
    ``app`` already committed them. Topics that do not exist are created first when
    ``settings`` (default: this process's, :func:`engine.settings.load_settings`) enable
    ``auto.create.topics.enable``; otherwise UnknownTopicOrPartitionError names the first."""
    access.install()  # this Python worker's environment need not know the store's endpoint
    committer = Committer(TableLog(access.uri), client_id)
    view = committer.latest()
    if app is not None and view.app_version(app.app_id) >= app.version:
        log.info("batch %s of %s is already committed; nothing to add", app.version, app.app_id)
        return None
    missing = unknown_topics(view, tables)
    if missing:
        settings = settings if settings is not None else load_settings()
        if not settings.auto_create_topics_enable:
            raise UnknownTopicOrPartitionError(
                f"topic {missing[0]!r} does not exist; create it first (lakelog topics create) or set "
                "auto.create.topics.enable=true to have the sink create it"
            )
        auto_create_topics(committer, missing, settings, POLICY)
        view = committer.latest()
    records = place_records(view, tables)
    if not len(records):
        return None
    # Beside a busy producer a large micro-batch's files take longer to write than the gap
    # between its commits: after one lost race, the batch reserves its offsets and writes once.
    return committer.append_or_reserve(PlacedBatch(records, app), POLICY)


def unknown_topics(view: TableState, tables: list[pa.Table]) -> list[str]:
    """The topics the records name that ``view`` does not have, in first-seen order."""
    names: dict[str, None] = {}
    for table in tables:
        for name in pc.unique(table.column("topic")).to_pylist():
            if name is not None and name not in view.topics:
                names.setdefault(name, None)
    return list(names)


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
