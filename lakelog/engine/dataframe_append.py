"""``LogStore.write(df)``: append a DataFrame with the Kafka sink's columns.

Offsets are assigned inside Spark in one job, without collecting rows:
each row is placed in its partition (explicit ``partition`` column, else
murmur2 of the key, else round-robin), rows are shuffled so that each
partition's rows meet in one task, and there a window numbers them in input
order (``monotonically_increasing_id()`` taken before the shuffle) from the
partition's end offset. The shuffle materializes the input once, so a
nondeterministic source cannot hand two different versions of itself to
the numbering.

The same job writes the data files: each task receives its partitions'
numbered rows (``mapInArrow``) and writes one Parquet file per partition with
:meth:`engine.data_files.DataFileWriter.write_stream` -- the writer producers
use -- returning only the files' ``add`` actions to the driver, which commits
them through the commit core. No Delta transaction is involved.

Unknown topics, partitions outside a topic and records over
``max.message.bytes`` fail the job (``raise_error``) before anything is
committed; the driver turns the marked message back into the right
LakelogError. How many records each partition got is read from the written
files' statistics, and the commit loop checks they tile the offsets from
each end offset without gap or overlap before it commits.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from lakelog.engine.commit import DataWriteError
from lakelog.engine.commit.actions import AddFile
from lakelog.engine.commit.state import TableState
from lakelog.engine.data_files import FILE_PREFIX, DataFile, DataFileWriter
from lakelog.engine.errors import (
    InvalidRecordError,
    InvalidTopicError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    error_from_text,
    marked,
)
from lakelog.engine.object_store import StoreAccess, filesystem, store_access
from lakelog.engine.offsets import TopicPartition
from lakelog.engine.reads import sql_string
from lakelog.engine.records import MAX_TIMESTAMP_MS
from lakelog.engine.schema import check_sink_columns
from lakelog.engine.topics import TIMESTAMP_TYPE_CODES, TopicMetadata, validate_topic_name

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


KAFKA_PARTITION_FUNCTION = "lakelog_kafka_partition"
KAFKA_PARTITION_CLASS = "io.lakelog.udf.KafkaPartition"


def register_functions(spark: SparkSession) -> None:
    """Register lakelog's JVM functions (from lakelog-jvm.jar) in the session, once."""
    if not spark.catalog.functionExists(KAFKA_PARTITION_FUNCTION):
        spark.udf.registerJavaFunction(KAFKA_PARTITION_FUNCTION, KAFKA_PARTITION_CLASS, IntegerType())


def normalize_sink_frame(df: DataFrame, topic: str | None) -> DataFrame:
    """The input as (topic, partition, key, value, headers, timestamp), types checked.

    ``topic`` (when given) overrides a topic column, as the Kafka sink's
    ``topic`` option does.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    check_sink_columns({name: kind.simpleString() for name, kind in fields.items()})
    if topic is not None:
        topic_col = F.lit(validate_topic_name(topic))
    elif "topic" in fields:
        topic_col = F.col("topic")
    else:
        raise InvalidTopicError("no topic: pass topic=... or give the DataFrame a 'topic' column")

    def column(name: str, cast: str) -> Column:
        return F.col(name).cast(cast) if name in fields else F.lit(None).cast(cast)

    # Refused as send() refuses them, in the job's first projection: the job fails before it
    # writes a file (nothing to clean up but what other tasks of it wrote, see build()).
    if "timestamp" in fields and isinstance(fields["timestamp"], LongType):
        out_of_range = f"timestamp < 0 OR timestamp > {MAX_TIMESTAMP_MS}"
        timestamp = F.expr(
            f"CASE WHEN {out_of_range} THEN {_timestamp_refused('CAST(timestamp AS STRING)')} "
            "ELSE timestamp_millis(timestamp) END"
        )
    else:
        micros = "unix_micros(CAST(timestamp AS TIMESTAMP))"
        out_of_range = f"{micros} < 0 OR {micros} > {MAX_TIMESTAMP_MS * 1000 + 999}"
        refused = _timestamp_refused("CAST(CAST(timestamp AS TIMESTAMP) AS STRING)")
        timestamp = (
            F.expr(f"CASE WHEN {out_of_range} THEN {refused} ELSE CAST(timestamp AS TIMESTAMP) END")
            if "timestamp" in fields
            else F.lit(None).cast("timestamp")
        )
    if "headers" in fields:
        null_key = _fail(InvalidRecordError, "a header key is null (header keys must be strings)")
        # A higher-order function turns whole-stage codegen off: only when there are headers.
        headers = F.expr(f"CASE WHEN exists(headers, h -> h.key IS NULL) THEN {null_key} ELSE headers END")
    else:
        headers = F.lit(None).cast(HEADERS_TYPE)
    return df.select(
        topic_col.alias("topic"),
        column("partition", "int").alias("partition"),
        column("key", "binary").alias("key"),
        column("value", "binary").alias("value"),
        headers.alias("headers"),
        timestamp.alias("timestamp"),
    )


def _timestamp_refused(shown: str) -> str:
    return _fail(
        InvalidRecordError,
        "timestamp ",
        shown,
        f": a timestamp must lie in [0, {MAX_TIMESTAMP_MS}] ms (1970-01-01 to 9999-12-31 UTC)",
    )


class DataFrameAppend:
    """One ``LogStore.write`` call, as an :class:`engine.commit.AppendBatch`."""

    operation = "write"
    app_transaction = None
    commit_when_empty = False

    def __init__(self, spark: SparkSession, df: DataFrame, topic: str | None, uri: str) -> None:
        self._spark = spark
        self._uri = uri
        register_functions(spark)
        self._topic = topic
        self._has_headers = "headers" in df.columns
        # Rows with neither key nor partition may go anywhere: each Spark task's
        # rows then fill one partition (the sticky idea at task granularity).
        self._keyless = topic is not None and "key" not in df.columns and "partition" not in df.columns
        self._source = normalize_sink_frame(df, topic)
        self._tasks: int | None = None
        # In the names of the files this write's tasks create, so that a failed job's are found.
        self._label = f"write-{uuid.uuid4().hex[:12]}-"

    def prepare(self, view: TableState) -> None:
        """Counts are only known once Spark has written the files."""
        if self._topic is not None and self._topic not in view.topics:
            raise UnknownTopicOrPartitionError(f"topic {self._topic!r} does not exist")
        return None

    def check(self, committed_app_version: int, view: TableState) -> None:
        """A DataFrame write is never fenced."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        names = [self._topic] if self._topic is not None else sorted(view.topics)
        return [TopicPartition(name, p) for name in names for p in range(view.topics[name].partitions)]

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> list[DataFile]:
        """Number the rows and write them as data files on the executors; the files' descriptions."""
        rows = self.numbered(ends, topics, append_time_ms)
        writer = _FileWriterTask(self._uri, store_access(self._uri), self._label)
        try:
            written = rows.mapInArrow(writer, "add STRING").collect()
        except Exception as exc:
            # Tasks that finished before one failed wrote files nobody will commit.
            self._discard_written(sorted({tp.topic for tp in ends}))
            message = _spark_message(exc)
            error = error_from_text(message)
            if error is not None:
                raise error from None
            raise DataWriteError(f"writing data files failed, nothing was committed: {message}") from exc
        files = []
        for row in written:
            add = AddFile.from_json(json.loads(row.add)["add"])
            files.append(DataFile(add, add.file_stats(), _full_path(self._uri, add.path)))
        return files

    def _discard_written(self, topics: list[str]) -> None:
        fs, root = filesystem(self._uri)
        for topic in topics:
            for path in fs.glob(f"{root}/topic={quote(topic, safe='')}/partition=*/{FILE_PREFIX}{self._label}*"):
                with contextlib.suppress(FileNotFoundError):
                    fs.rm(path)

    def numbered(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> DataFrame:
        """The rows as log-table rows, each partition's numbered from its end offset in ``ends``."""
        # Expressions go to Spark as SQL text: a few py4j calls per batch instead
        # of one per Column operation.
        names = sorted({tp.topic for tp in ends})
        firsts = {
            n: "array(" + ", ".join(f"{ends[TopicPartition(n, p)]}L" for p in range(topics[n].partitions)) + ")"
            for n in names
        }
        first = f"element_at({_topic_lookup(firsts, 'ARRAY<BIGINT>')}, partition + 1)"
        limit = _topic_lookup({n: str(topics[n].max_message_bytes) for n in names}, "INT")
        if self._keyless:
            if self._tasks is None:
                self._tasks = self._source.rdd.getNumPartitions()
            partitions = topics[self._topic].partitions
            if self._tasks <= partitions:
                numbered = self._sticky_numbering(ends, partitions, limit)
                return self._final(numbered, first, names, topics, append_time_ms)
        return self._final(self._shuffled_numbering(ends, topics, names, limit), first, names, topics, append_time_ms)

    def _sticky_numbering(self, ends: Mapping[TopicPartition, int], partitions: int, limit: str) -> DataFrame:
        """Keyless rows, at most as many Spark tasks as partitions: task i's rows fill
        the i-th least-filled partition, numbered in task order. No shuffle."""
        fill = sorted(range(partitions), key=lambda p: (ends[TopicPartition(self._topic, p)], p))
        chosen = "array(" + ", ".join(str(p) for p in fill[: self._tasks]) + ")"
        placed = self._source.selectExpr(
            "topic",
            f"element_at({chosen}, spark_partition_id() + 1) AS partition",
            "key",
            "value",
            "headers",
            "timestamp",
            "monotonically_increasing_id() - shiftleft(CAST(spark_partition_id() AS BIGINT), 33) + 1 AS _n",
        )
        return placed.selectExpr("topic", "partition", "key", self._checked_value(limit), "headers", "timestamp", "_n")

    def _shuffled_numbering(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], names: list[str], limit: str
    ) -> DataFrame:
        """Rows placed by partition column, key or round-robin, then shuffled so that each
        partition's rows meet in one task and numbered there in input order."""
        count = _topic_lookup({n: str(topics[n].partitions) for n in names}, "INT")
        null_topic = _fail(InvalidRecordError, "a row has a null topic")
        unknown_topic = _fail(UnknownTopicOrPartitionError, "topic '", "topic", "' does not exist")
        bad_partition = _fail(
            UnknownTopicOrPartitionError,
            "partition ",
            "coalesce(CAST(_p AS STRING), 'null')",
            " of topic '",
            "topic",
            "' does not exist (partitions: ",
            f"CAST({count} AS STRING)",
            ")",
        )
        # One projection; later items use earlier aliases (lateral column aliases).
        checked = self._source.selectExpr(
            f"coalesce(partition, CASE WHEN key IS NOT NULL THEN {KAFKA_PARTITION_FUNCTION}(key, {count}) "
            f"ELSE CAST(pmod(monotonically_increasing_id(), {count}) AS INT) END) AS _p",
            f"CASE WHEN topic IS NULL THEN {null_topic} WHEN {count} IS NULL THEN {unknown_topic} "
            "ELSE topic END AS _topic",
            f"CASE WHEN _p IS NULL OR _p < 0 OR _p >= {count} THEN {bad_partition} ELSE _p END AS _partition",
            "key",
            self._checked_value(limit),
            "headers",
            "timestamp",
            "monotonically_increasing_id() AS _seq",
        ).withColumnsRenamed({"_topic": "topic", "_partition": "partition"})
        # A constant topic (topic=...) is folded away by the optimizer; keying
        # the shuffle on it too would make Spark shuffle twice.
        keys = ["partition"] if self._topic is not None else ["topic", "partition"]
        tasks = max(1, min(len(ends), max(8, 4 * self._spark.sparkContext.defaultParallelism)))
        return (
            checked.repartition(tasks, *keys)
            .sortWithinPartitions(*keys, "_seq")
            .withColumn("_n", F.row_number().over(Window.partitionBy(*keys).orderBy("_seq")))
        )

    def _checked_value(self, limit: str) -> str:
        """``value``, failing the job on a record over its topic's max.message.bytes."""
        size = _record_size_sql(self._has_headers)
        too_large = _fail(
            RecordTooLargeError,
            "a record of ",
            f"CAST({size} AS STRING)",
            " bytes for topic '",
            "topic",
            "' is larger than its max.message.bytes=",
            f"CAST({limit} AS STRING)",
        )
        return f"CASE WHEN {size} > {limit} THEN {too_large} ELSE value END AS value"

    @staticmethod
    def _final(
        numbered: DataFrame, first: str, names: list[str], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> DataFrame:
        """The log table's columns; ``_n`` (1-based) numbers each partition's rows."""
        log_append = [sql_string(n) for n in names if topics[n].log_append_time]
        is_log_append = f"topic IN ({', '.join(log_append)})" if log_append else "false"
        append_ts = f"timestamp_micros({append_time_ms * 1000}L)"
        return numbered.selectExpr(
            "topic",
            "partition",
            f"{first} + _n - 1 AS offset",
            f"CASE WHEN {is_log_append} THEN {append_ts} ELSE coalesce(timestamp, {append_ts}) END AS timestamp",
            f"CASE WHEN {is_log_append} THEN {TIMESTAMP_TYPE_CODES['LogAppendTime']} "
            f"ELSE {TIMESTAMP_TYPE_CODES['CreateTime']} END AS timestamp_type",
            "key",
            "value",
            "headers",
            "CAST(NULL AS BIGINT) AS producer_id",
            "CAST(NULL AS INT) AS producer_epoch",
            "CAST(NULL AS INT) AS sequence",
        )


def _topic_lookup(values: Mapping[str, str], value_type: str) -> str:
    """SQL for the value of the row's topic in a map literal (values are SQL); null if absent."""
    if not values:
        return f"CAST(NULL AS {value_type})"
    pairs = ", ".join(f"{sql_string(k)}, {v}" for k, v in sorted(values.items()))
    return f"try_element_at(map({pairs}), topic)"


def _fail(error: type, *parts: str) -> str:
    """SQL that fails the job with a marked error message.

    ``parts`` alternate between literal text (even positions) and SQL
    expressions (odd positions).
    """
    pieces = [sql_string(marked(error, ""))]
    for i, part in enumerate(parts):
        pieces.append(sql_string(part) if i % 2 == 0 else part)
    pieces.append(sql_string("; nothing was committed"))
    return f"raise_error(concat({', '.join(pieces)}))"


def _record_size_sql(has_headers: bool) -> str:
    """Bytes counted against max.message.bytes: key, value, header keys and values."""
    size = "coalesce(length(key), 0) + coalesce(length(value), 0)"
    if has_headers:
        # A higher-order function turns whole-stage codegen off, so only when there are headers.
        size += " + coalesce(aggregate(headers, 0L, (acc, h) -> acc + octet_length(h.key)"
        size += " + coalesce(length(h.value), 0)), 0)"
    return size


@dataclass(frozen=True)
class _FileWriterTask:
    """What each Spark task of a ``LogStore.write`` runs: write its rows (grouped by
    partition, in offset order) as data files; one ``add`` action per file back."""

    uri: str
    access: StoreAccess
    label: str

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        self.access.install()  # an executor's environment need not know the store's endpoint
        for written in DataFileWriter(self.uri).write_stream(batches, self.label):
            text = json.dumps(written.add.to_json(), separators=(",", ":"))
            yield pa.RecordBatch.from_pydict({"add": [text]})


def _full_path(uri: str, path: str) -> str:
    _, root = filesystem(uri)
    return f"{root}/{unquote(path)}"


def _spark_message(error: BaseException) -> str:
    """The JVM's message of a failed Spark job (the text a marked error travels in)."""
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    if java is not None:
        try:
            return str(java.getMessage() or java.toString())
        except Exception:
            pass
    return str(error)
