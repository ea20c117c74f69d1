"""``Store.write(df)``: append a DataFrame with the Kafka sink's columns.

Two Spark jobs and one commit (:meth:`engine.commit.Committer.append`), or two small
commits around them (:meth:`engine.commit.Committer.append_reserved`) when other writers
append to the same partitions; no shuffle and no Python worker:

1. the count job places every row (explicit ``partition`` column, else
   murmur2 of the key with lakelog's JVM function, bit-identical to Kafka's
   and the producer's, else sticky per Spark task), refuses unknown topics
   and partitions, and counts the rows per (Spark task, partition). An
   optimistic keyless write of no more Spark tasks than partitions needs no
   count: each task fills a partition of its own, numbered from that
   partition's end, and the commit learns the counts from the files. It reads
   no more of the input than placing needs -- not the values: computing the
   input twice was the largest cost of a write. The write job checks every
   row as ``send()`` would (over ``max.message.bytes``, timestamp out of
   range, null header key). Either way ``raise_error`` fails the job and the
   driver turns the marked message back into the LakelogError;
2. optimistic: the offsets follow the partitions' ends as the count saw them;
   reserved: one commit takes them first (producers append after them,
   readers wait at them);
3. the write job numbers the rows without a shuffle: each task sorts its
   rows by (topic, partition, input position) -- the order Delta's writer
   needs for partition directories anyway -- and a row's offset is its
   position in that order plus a per-(task, partition) base read from an
   array literal in the plan (a broadcast join when the table is large);
   Delta's own writer (``TransactionalWrite.writeFiles``)
   writes the files with Delta's statistics, and the driver receives their
   ``add`` actions. No Delta transaction commits. A failed job's files are
   found by the write's id in their footers and removed;
4. one commit adds the files. An optimistic one conflicts with any other
   append to its partitions (its files are then given up once and the write
   reserves); a reserved one rebases over every other append, so however
   busy the partitions are, the files are written at most twice.

Both jobs must see the same rows per task: the commit checks the files tile
the planned ranges exactly, and a write whose input changed in between (a
plan that is not deterministic) is aborted and written again from Spark's
cache (``Store.write``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession
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
from lakelog.engine.commit.data_files import DataFile
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import (
    InvalidRecordError,
    InvalidTopicError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    error_from_text,
    marked,
)
from lakelog.engine.records import MAX_TIMESTAMP_MS
from lakelog.engine.schema import check_sink_columns
from lakelog.engine.storage.object_store import filesystem, is_s3, sync_all
from lakelog.engine.topics import TIMESTAMP_TYPE_CODES, TopicMetadata, TopicPartition, validate_topic_name
from lakelog.spark_connector.frames import sql_string

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
    """One ``Store.write`` call, as an :class:`engine.commit.AppendBatch` for
    :meth:`engine.commit.Committer.append` (optimistic: offsets planned from the ends the
    count saw) or :meth:`engine.commit.Committer.append_reserved` (offsets reserved first):
    counted by one Spark job, written by another (keyless rows of an optimistic write, each
    Spark task filling a partition of its own, by one job).

    Rows are placed (and refused for their topic or partition) by the count job and
    checked as ``send()`` checks them (size, timestamp, header keys) by the write job: a
    refused optimistic append commits nothing; a refused reserved one aborts its reservation.
    """

    operation = "write"
    app_transactions = ()
    commit_when_empty = False

    def __init__(
        self, spark: SparkSession, df: DataFrame, topic: str | None, uri: str, *, optimistic: bool = False
    ) -> None:
        self._spark = spark
        self._uri = uri
        register_functions(spark)
        self._topic = topic
        # Tags this write's files (a field's metadata in their Parquet footers): the files of a
        # failed write job are told from other writers' by it and removed.
        self.write_id = uuid.uuid4().hex
        self._has_headers = "headers" in df.columns
        # Rows with neither key nor partition may go anywhere: each Spark task's
        # rows then fill one partition (the sticky idea at task granularity).
        self._keyless = topic is not None and "key" not in df.columns and "partition" not in df.columns
        self._source = normalize_sink_frame(df, topic)
        self._counted: _Counted | None = None
        self._tasks: int | None = None  # the input's Spark tasks, once asked
        # What the write job numbers from: the count's result, or one partition per task.
        self._plan: _Counted | _OnePartitionPerTask | None = None
        # Appended optimistically (Committer.append), the rows may skip the count when each
        # Spark task fills a partition of its own; reserving offsets needs the counts.
        self._count_first = not optimistic

    def count_first(self) -> None:
        """Count the rows before writing them from now on: before the write reserves its
        offsets (:meth:`engine.commit.Committer.append_reserved`), which needs the counts."""
        self._count_first = True

    def persist(self) -> None:
        """Keep the input in Spark's cache, so that the count and the write see the same rows
        (for an input whose plan is not deterministic); counting starts over."""
        self._source = self._source.persist()
        self._counted = None

    def unpersist(self) -> None:
        """Drop the input from Spark's cache (after :meth:`persist`; else nothing to drop)."""
        self._source.unpersist()

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        """The record count per partition, from a Spark job that places every row (and
        refuses the write, before anything is written, for a row the topics refuse); None for
        an optimistic write whose Spark tasks each fill a partition of their own (keyless
        rows, no more tasks than partitions): the files then tell the counts."""
        if self._topic is not None and self._topic not in view.topics:
            raise UnknownTopicOrPartitionError(f"topic {self._topic!r} does not exist")
        names = [self._topic] if self._topic is not None else sorted(view.topics)
        sticky = self._sticky_partitions(view) if self._keyless else None
        if sticky is not None and not self._count_first:
            assert self._topic is not None
            self._plan = _OnePartitionPerTask(self._topic, sticky, self._placed(view, names, sticky))
            return None
        shape = tuple((n, view.topics[n].partitions, view.topics[n].max_message_bytes) for n in names)
        if self._counted is None or self._counted.shape != shape:
            self._counted = self._count(view, names, shape, sticky)
        self._plan = self._counted
        return self._counted.totals()

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        """A DataFrame write is never fenced."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        names = [self._topic] if self._topic is not None else sorted(view.topics)
        return [TopicPartition(name, p) for name in names for p in range(view.topics[name].partitions)]

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> list[DataFile]:
        """Number the rows from ``ends`` and write them as data files with Delta's own writer
        (Spark's Parquet writer on the executors); the files' descriptions. Nothing is committed."""
        assert self._plan is not None, "prepare() places the rows first"
        rows = self.numbered(ends, topics, append_time_ms)
        started = time.time()
        try:
            return write_delta_files(self._spark, self._uri, rows)
        except Exception as exc:
            # Tasks that finished before the job failed left their files: only this write's.
            remove_files_of_write(self._uri, sorted({tp.topic for tp in ends}), self.write_id, since=started)
            message = _spark_message(exc)
            error = error_from_text(message)
            if error is not None:
                raise error from None
            raise DataWriteError(f"writing data files failed, nothing was committed: {message}") from exc

    # -- placing and counting -------------------------------------------------------------

    def _count(self, view: TableState, names: list[str], shape: tuple, sticky: list[int] | None) -> _Counted:
        placed = self._placed(view, names, sticky)
        # Grouped by one BIGINT per (task, partition): with primitive keys and counts only,
        # Spark's aggregate takes its fast hash map (a string key -- the topic -- does not).
        slots = _Slots({n: view.topics[n].partitions for n in names})
        # Only the slot is used: Spark prunes the value, timestamp and header columns (and
        # the checks inside them, which the write job runs), computing what placing needs.
        # The input is not cached for the write job: building Spark's cache costs as much as
        # computing the rows again (measured, 1M × 100 B rows).
        counting = placed.groupBy(F.expr(slots.sql()).alias("_slot")).agg(F.count(F.lit(1)).alias("count"))
        try:
            rows = counting.collect()
        except Exception as exc:
            message = _spark_message(exc)
            error = error_from_text(message)
            if error is not None:
                raise error from None
            raise
        counts = {slots.decode(int(r["_slot"])): int(r["count"]) for r in rows}
        return _Counted(shape, placed, counts)

    def _placed(self, view: TableState, names: list[str], sticky: list[int] | None) -> DataFrame:
        """Every row checked and placed: the log table's data columns plus ``_task`` (the Spark
        task it is in) and ``_seq`` (its position in the input). Refused rows fail the job.
        With ``sticky``, task i's rows all go to partition ``sticky[i]``."""
        topics = view.topics
        count = _topic_lookup({n: str(topics[n].partitions) for n in names}, "INT")
        limit = _topic_lookup({n: str(topics[n].max_message_bytes) for n in names}, "INT")
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
        topic_checked = f"CASE WHEN topic IS NULL THEN {null_topic} WHEN {count} IS NULL THEN {unknown_topic}"
        if sticky is not None:
            # At most as many tasks as partitions: task i's rows fill the i-th least-filled one.
            chosen = "array(" + ", ".join(str(p) for p in sticky) + ")"
            placement = f"element_at({chosen}, spark_partition_id() + 1)"
        else:
            placement = (
                f"coalesce(partition, CASE WHEN key IS NOT NULL THEN {KAFKA_PARTITION_FUNCTION}(key, {count}) "
                f"ELSE CAST(pmod(monotonically_increasing_id(), {count}) AS INT) END)"
            )
        # One projection; later items use earlier aliases (lateral column aliases).
        return self._source.selectExpr(
            f"{placement} AS _p",
            f"{topic_checked} ELSE topic END AS _topic",
            # The topic's checks come first here too: the count job groups by the partition
            # (its slot) and need not evaluate the topic column before it.
            f"{topic_checked} WHEN _p IS NULL OR _p < 0 OR _p >= {count} THEN {bad_partition} "
            "ELSE _p END AS _partition",
            "key",
            self._checked_value(limit),
            "headers",
            "timestamp",
            "spark_partition_id() AS _task",
            "monotonically_increasing_id() AS _seq",
        ).withColumnsRenamed({"_topic": "topic", "_partition": "partition"})

    def _sticky_partitions(self, view: TableState) -> list[int] | None:
        """For keyless rows of at most as many Spark tasks as partitions: the partitions the
        tasks fill, least filled first; else None (rows go round-robin)."""
        if self._tasks is None:
            # Planning the input to learn its task count costs a query plan: once per write.
            self._tasks = self._source.rdd.getNumPartitions()
        tasks = self._tasks
        partitions = view.topics[self._topic].partitions  # type: ignore[index]
        if tasks > partitions:
            return None
        fill = sorted(range(partitions), key=lambda p: (view.end_offset(TopicPartition(self._topic, p)), p))  # type: ignore[arg-type]
        return fill[:tasks]

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

    # -- numbering ----------------------------------------------------------------------

    def numbered(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> DataFrame:
        """The rows as log-table rows, each partition's numbered from its offset in ``ends``.

        No shuffle: the count job gave every (task, partition) its number of rows, so task
        t's rows of partition p take the offsets after those of tasks before t (a task that
        fills a partition alone starts at its end). Within a
        task the rows are sorted by (topic, partition, input position) -- the order Delta's
        writer needs anyway -- and a row's offset is its position in that order plus one
        lookup per (task, partition) in a broadcast table.
        """
        assert self._plan is not None
        bases = self._plan.bases(ends)
        names = sorted({tp.topic for _, tp in bases})
        ordered = self._plan.placed.sortWithinPartitions("topic", "partition", "_seq").withColumn(
            "_pos", F.expr("monotonically_increasing_id() - shiftleft(CAST(spark_partition_id() AS BIGINT), 33)")
        )
        base = _base_lookup(bases, {n: topics[n].partitions for n in names})
        if base is not None:
            numbered = ordered.withColumn("offset", F.col("_pos") + F.expr(base))
        else:
            lookup = self._spark.createDataFrame(
                [(task, tp.topic, tp.partition, b) for (task, tp), b in bases.items()],
                "_task INT, topic STRING, partition INT, _base BIGINT",
            )
            numbered = ordered.join(F.broadcast(lookup), ["_task", "topic", "partition"]).withColumn(
                "offset", F.col("_pos") + F.col("_base")
            )
        log_append = [sql_string(n) for n in names if topics[n].log_append_time]
        is_log_append = f"topic IN ({', '.join(log_append)})" if log_append else "false"
        append_ts = f"timestamp_micros({append_time_ms * 1000}L)"
        tagged = F.col("offset").alias("offset", metadata={WRITE_ID_KEY: self.write_id})
        numbered = numbered.withColumn("offset", tagged)
        return numbered.selectExpr(
            "topic",
            "partition",
            "offset",
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


@dataclass(frozen=True)
class _Counted:
    """What the count job found: rows per (Spark task, partition) of the placed input."""

    shape: tuple
    placed: DataFrame
    counts: Mapping[tuple[int, TopicPartition], int]

    def totals(self) -> dict[TopicPartition, int]:
        totals: dict[TopicPartition, int] = {}
        for (_, tp), n in self.counts.items():
            totals[tp] = totals.get(tp, 0) + n
        return totals

    def bases(self, firsts: Mapping[TopicPartition, int]) -> dict[tuple[int, TopicPartition], int]:
        """Per (task, partition), the offset of the task's first row of that partition minus
        that row's position among the task's rows sorted by (topic, partition): the tasks'
        rows of a partition follow each other in task order from ``firsts``."""
        bases = {}
        taken = dict(firsts)
        for task, tp in sorted(self.counts, key=lambda k: (k[0], k[1])):
            bases[(task, tp)] = taken[tp]
            taken[tp] += self.counts[(task, tp)]
        # Subtract each (task, partition)'s position within its task's sorted rows.
        position: dict[int, int] = {}
        for task, tp in sorted(self.counts, key=lambda k: (k[0], k[1])):
            before = position.get(task, 0)
            bases[(task, tp)] -= before
            position[task] = before + self.counts[(task, tp)]
        return bases


@dataclass(frozen=True)
class _OnePartitionPerTask:
    """Keyless rows of at most as many Spark tasks as partitions: task i's rows fill
    partition ``partitions[i]`` alone, so they are numbered from its end with no count."""

    topic: str
    partitions: list[int]
    placed: DataFrame

    def bases(self, firsts: Mapping[TopicPartition, int]) -> dict[tuple[int, TopicPartition], int]:
        """Per (task, partition), the offset of the task's first row: the partition's end."""
        return {
            (task, TopicPartition(self.topic, p)): firsts[TopicPartition(self.topic, p)]
            for task, p in enumerate(self.partitions)
        }


class _Slots:
    """(Spark task, topic, partition) as one number, ``task * width + first(topic) + partition``,
    where ``width`` is the partitions of all the write's topics: a key Spark groups by and
    indexes with as a primitive, in place of a string column."""

    def __init__(self, partitions: Mapping[str, int]) -> None:
        self.names = sorted(partitions)
        self.firsts: dict[str, int] = {}
        self.width = 0
        for name in self.names:
            self.firsts[name] = self.width
            self.width += partitions[name]
        self._topic_of = [name for name in self.names for _ in range(partitions[name])]

    def sql(self) -> str:
        """SQL for a row's slot from its ``_task``, ``topic`` and ``partition`` (a BIGINT)."""
        first = "0" if len(self.names) == 1 else _topic_lookup({n: str(f) for n, f in self.firsts.items()}, "INT")
        return f"CAST(_task AS BIGINT) * {self.width} + {first} + partition"

    def decode(self, slot: int) -> tuple[int, TopicPartition]:
        task, index = divmod(slot, self.width)
        topic = self._topic_of[index]
        return task, TopicPartition(topic, index - self.firsts[topic])

    def slot(self, task: int, tp: TopicPartition) -> int:
        return task * self.width + self.firsts[tp.topic] + tp.partition


# Largest (task, partition) table numbered by an array literal in the plan (each task gets
# the plan); a larger one is a broadcast join.
MAX_LITERAL_BASES = 4096


def _base_lookup(bases: Mapping[tuple[int, TopicPartition], int], partitions: Mapping[str, int]) -> str | None:
    """SQL for a row's base offset from its ``_task``, ``topic`` and ``partition``: one array
    literal indexed by its slot (:class:`_Slots`) -- no join, no hashing per row; None when the
    array would be larger than MAX_LITERAL_BASES."""
    slots = _Slots(partitions)
    tasks = 1 + max((task for task, _ in bases), default=0)
    if not bases or tasks * slots.width > MAX_LITERAL_BASES:
        return None
    table = [0] * (tasks * slots.width)
    for (task, tp), base in bases.items():
        table[slots.slot(task, tp)] = base
    values = ", ".join(f"{v}L" for v in table)
    # A row of a (task, partition) the count did not see (an input that changed) gets base 0:
    # the commit's check of the files against the reservation refuses it.
    return f"coalesce(try_element_at(array({values}), CAST({slots.sql()} AS INT) + 1), 0L)"


def write_delta_files(spark: SparkSession, uri: str, rows: DataFrame) -> list[DataFile]:
    """Write ``rows`` (the log table's columns) as data files of the table at ``uri`` with Delta's
    own writer (``TransactionalWrite.writeFiles``: Spark's Parquet writer, Delta's statistics
    and partition directories) without committing them; their descriptions.

    Files of tasks that finished before a failed job are left behind unreferenced, as a
    failed Delta write leaves them; VACUUM removes them.
    """
    delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)  # type: ignore[union-attr]
    actions = delta_log.startTransaction().writeFiles(rows._jdf)
    files = []
    found = actions.iterator()
    while found.hasNext():
        action = json.loads(found.next().json())
        if "add" not in action:
            continue
        add = AddFile.from_json(action["add"])
        files.append(DataFile(add, add.file_stats(), _full_path(uri, add.path)))
    if not is_s3(uri) and "://" not in uri:
        # Spark's writer does not sync: the records and their names (partition directories
        # Delta created, and their parents) reach the disk before a commit references them.
        partitions = {os.path.dirname(f.full_path) for f in files}
        sync_all([f.full_path for f in files], sorted(partitions | {os.path.dirname(d) for d in partitions} | {uri}))
    return files


# The key of the ``offset`` field's metadata that names the write in a file's Parquet footer
# (Spark keeps a field's metadata in ``org.apache.spark.sql.parquet.row.metadata``).
WRITE_ID_KEY = "lakelog.write"
_SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
# File times on another clock (an object store's) may lag the driver's a little.
_CLOCK_SLACK_S = 5.0


def remove_files_of_write(uri: str, topics: list[str], write_id: str, *, since: float) -> list[str]:
    """Delete the data files of the topics' partition directories that write ``write_id`` left
    (written since ``since``, epoch seconds, tagged with it in their footers); their paths.

    A failed Spark job leaves the files of its tasks that finished, as a failed Delta write
    does; they are referenced by no commit. Other writers' files -- in flight or committed --
    carry another tag or none and are never touched. Best effort: what cannot be listed or
    deleted now VACUUM removes later.
    """
    import pyarrow.parquet as pq

    fs, root = filesystem(uri)
    removed = []
    for topic in topics:
        try:
            found = fs.glob(f"{root}/topic={topic}/partition=*/*.parquet")
        except OSError:
            continue
        for path in found:
            try:
                if fs.modified(path).timestamp() < since - _CLOCK_SLACK_S:
                    continue
                with fs.open(path, "rb") as f:
                    footer = pq.read_metadata(f).metadata or {}
                fields = json.loads(footer.get(_SPARK_SCHEMA_KEY, b"{}")).get("fields", [])
                if any(field.get("metadata", {}).get(WRITE_ID_KEY) == write_id for field in fields):
                    fs.rm(path)
                    removed.append(path)
            except (OSError, ValueError):
                continue
    return removed


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
