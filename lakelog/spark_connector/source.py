"""``spark.read`` / ``spark.readStream`` ``.format("lakelog")``: topics with the Kafka source's schema.

Everything here runs in Python workers Spark starts (planning on the
driver's machine, ``read`` in executors), with no SparkSession: the Delta
log is followed by the commit core (:class:`engine.commit.TableLog`), records with
pyarrow (:mod:`engine.commit.partition_reader`). Only committed data is ever seen:
a plan is made from one Delta snapshot, and a Delta commit is atomic.

Guarantees of the streaming source (Spark's Kafka source, plus):

* each record of a subscribed partition is delivered once per query run in
  offset order within its partition; a micro-batch replayed after a failure
  reads the same offsets again (they never change, not under OPTIMIZE or
  log compaction, which only removes records);
* a rate limit never splits one Delta commit (a producer batch, a
  transaction) across micro-batches (:mod:`spark_connector.source_plan`);
* records removed by retention before they were read fail the query with
  :class:`engine.errors.DataLossError` naming topic, partition and range
  (``failOnDataLoss=true``, the default) or are skipped with a warning;
* with ``groupId``, offsets of every completed micro-batch are committed
  to the group in ``__consumer_offsets`` (``lakelog groups describe`` shows
  the query's lag).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lakelog.engine.commit import TableLog, TableState, normalize_uri
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import DataLossError, InvalidConfigError, InvalidOffsetError, UnknownTopicOrPartitionError
from lakelog.engine.offsets import FileStats, PartitionBounds, resolve_offsets
from lakelog.engine.storage.object_store import StoreAccess
from lakelog.engine.topics import TopicPartition
from lakelog.schemas.registry import read_state
from lakelog.schemas.spark_columns import expression
from lakelog.spark_connector.options import SourceOptions, Subscription, query_kind
from lakelog.spark_connector.query_offsets import GroupOffsetsCommitter
from lakelog.spark_connector.source_plan import (
    CommitIndex,
    DataLoss,
    offsets_from_json,
    offsets_to_json,
    plan_by_commits,
    proportional_limit,
    reconcile_start,
    split_ranges,
    total_records,
)

log = logging.getLogger("lakelog.source")

# Records per Spark task unless maxRecordsPerPartition says: a long backlog of one partition is read by
# several tasks.
RECORDS_PER_TASK = 1_000_000


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``headers`` only with includeHeaders)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


# The field metadata key the typed-read rule reads (jvm/src/.../LakelogExtensions.java DECODE).
DECODE_METADATA = "lakelog.decode"


def typed_schema(schema: StructType, options: SourceOptions, raw: Mapping[str, str]) -> StructType:
    """``schema`` with the decoding expression of each column ``keyFormat`` / ``valueFormat`` ask for
    in its field's metadata, for lakelog-jvm.jar's analyzer rule to put on top of the read
    (Python data sources return rows only). The schemas are the store's registry's as of now: a
    streaming query decodes the schema ids registered before it started (restart it to read
    newer ones). Raises InvalidConfigError without lakelog-jvm.jar's provider in front (nothing
    would decode) or when the subject has no schema in the format asked for."""
    if not options.decodings:
        return schema
    if query_kind(raw) is None:
        raise InvalidConfigError(
            'options keyFormat/valueFormat need lakelog-jvm.jar\'s format("lakelog") provider (sessions '
            "lakelog builds have it); this session runs the Python data source alone"
        )
    options.access.install()
    state = read_state(normalize_uri(options.path))
    expressions = {d.column: expression(state, d) for d in options.decodings}
    return StructType(
        [
            StructField(f.name, f.dataType, f.nullable, {DECODE_METADATA: expressions[f.name]})
            if f.name in expressions
            else f
            for f in schema.fields
        ]
    )


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One Spark task: offsets [start, end) of one partition, with the files that hold them."""

    uri: str
    tp: TopicPartition
    start: int
    end: int
    files: tuple[FileStats, ...]
    include_headers: bool
    fail_on_data_loss: bool
    access: StoreAccess


def read_range(part: RangePartition) -> Iterator[pa.RecordBatch]:
    """The records of ``part`` as Arrow batches in the Kafka source's columns, in offset order."""
    part.access.install()  # an executor's environment need not know the store's endpoint
    reader = PartitionReader(part.uri)
    try:
        table = reader.read(part.files, part.tp, part.start, part.end)
    except DataLossError:
        # A file is gone. Files rewritten (OPTIMIZE, compaction) and vacuumed after planning:
        # the same offsets are in the current files, unless retention took them.
        files = TableLog(part.uri).latest().files_of(part.tp)
        log_start = files.start_offset
        if log_start is None or log_start > part.start:
            handle_losses(
                [DataLoss(part.tp, part.start, log_start, "removed from the log while the batch ran")],
                part.fail_on_data_loss,
            )
        table = reader.read(files.all(), part.tp, part.start, part.end)
    columns = ["key", "value", "topic", "partition", "offset", "timestamp", "timestamp_type"]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if part.include_headers:
        columns.append("headers")
        names.append("headers")
    out = table.select(columns).rename_columns(names)
    schema = pa.schema([pa.field(name, out.schema.field(name).type, nullable=True) for name in names])
    yield from out.cast(schema).to_batches(max_chunksize=65_536)


def handle_losses(losses: list[DataLoss], fail_on_data_loss: bool) -> None:
    """Raise DataLossError (failOnDataLoss=true) or log a warning; never silent."""
    if not losses:
        return
    text = "; ".join(loss.describe() for loss in losses)
    if fail_on_data_loss:
        raise DataLossError(
            f"records the query had not read are gone: {text}. Set failOnDataLoss=false to skip them "
            "(a warning is then logged instead)"
        )
    log.warning("skipping records that are gone from the log (failOnDataLoss=false): %s", text)


class TopicLog:
    """The store as a source sees it: snapshots, partition bounds, starting offsets."""

    def __init__(self, options: SourceOptions) -> None:
        options.access.install()
        self.options = options
        self.uri = normalize_uri(options.path)
        self.reader = TableLog(self.uri)
        self.records = PartitionReader(self.uri)

    def snapshot(self) -> TableState:
        return self.reader.latest()

    def bounds(self, snapshot: TableState, *, strict: bool = False) -> dict[TopicPartition, PartitionBounds]:
        """Log start/end offsets of the subscribed partitions in ``snapshot``.

        ``strict`` (at query start): a named topic or assigned partition that
        does not exist is an UnknownTopicOrPartitionError.
        """
        tps = subscribed(self.options.subscription, snapshot.topics, strict=strict)
        return {tp: self.records.bounds(snapshot, tp) for tp in tps}

    def starting_offsets(self, snapshot: TableState, *, streaming: bool) -> dict[TopicPartition, int]:
        """The offsets a new query starts from (startingOffsets / startingTimestamp / ...ByTimestamp)."""
        opts = self.options
        bounds = self.bounds(snapshot, strict=True)
        if opts.starting_timestamp is not None or opts.starting_by_timestamp is not None:
            return self._offsets_for_times(snapshot, bounds, streaming=streaming)
        return resolve_offsets(
            opts.starting, bounds, default="latest" if streaming else "earliest", option="startingOffsets"
        )

    def ending_offsets(self, snapshot: TableState) -> dict[TopicPartition, int]:
        """Where a batch query ends, exclusive (endingOffsets / endingTimestamp /
        endingOffsetsByTimestamp). By timestamp: the first offset whose timestamp is at or
        after it, as Kafka's offsetsForTimes answers; the end of the partition when no
        record is that new, or when the partition has no timestamp given (as Spark's
        Kafka source sets it to latest)."""
        opts = self.options
        bounds = self.bounds(snapshot, strict=True)
        if opts.ending_timestamp is None and opts.ending_by_timestamp is None:
            return resolve_offsets(opts.ending, bounds, default="latest", option="endingOffsets")
        result = {}
        for tp, b in bounds.items():
            ts = _time_for(tp, opts.ending_timestamp, opts.ending_by_timestamp)
            found = None if ts is None else self._offset_for_time(snapshot, tp, ts)
            result[tp] = b.end if found is None else found
        return result

    def _offset_for_time(self, snapshot: TableState, tp: TopicPartition, ts: int) -> int | None:
        hit = self.records.first_at(snapshot.files_of(tp), tp, ts)
        return None if hit is None else hit[0]

    def _offsets_for_times(
        self, snapshot: TableState, bounds: Mapping[TopicPartition, PartitionBounds], *, streaming: bool
    ) -> dict[TopicPartition, int]:
        opts = self.options
        result = {}
        for tp, b in bounds.items():
            ts = _time_for(tp, opts.starting_timestamp, opts.starting_by_timestamp)
            if ts is None:
                result[tp] = b.end if streaming else b.start
                continue
            found = self._offset_for_time(snapshot, tp, ts)
            if found is None:
                if opts.timestamp_strategy == "error":
                    raise InvalidOffsetError(
                        f"no record of {tp} has a timestamp at or after {ts}; set "
                        "startingOffsetsByTimestampStrategy=latest to start at the end instead"
                    )
                found = b.end
            result[tp] = found
        return result

    def plan(
        self,
        snapshot: TableState,
        start: Mapping[TopicPartition, int],
        end: Mapping[TopicPartition, int],
    ) -> list[RangePartition]:
        """Tasks reading [start, end) of every partition in ``end`` (new partitions from their log start)."""
        bounds = self.bounds(snapshot)
        begin, losses = reconcile_start({tp: o for tp, o in start.items() if tp in end}, bounds)
        handle_losses(losses, self.options.fail_on_data_loss)
        ranges = []
        for tp in sorted(end):
            lo = begin.get(tp, bounds[tp].start if tp in bounds else end[tp])
            hi = end[tp]
            if hi < lo:
                raise InvalidOffsetError(f"ending offset {hi} for {tp} is before its starting offset {lo}")
            ranges.append((tp, lo, hi))
        opts = self.options
        per_task = opts.max_records_per_partition or RECORDS_PER_TASK
        return [
            RangePartition(
                self.uri,
                tp,
                lo,
                until,
                tuple(snapshot.files_of(tp).covering(lo, until)),
                opts.include_headers,
                opts.fail_on_data_loss,
                opts.access,
            )
            for tp, lo, until in split_ranges(ranges, opts.min_partitions, per_task)
        ]


def _time_for(
    tp: TopicPartition, every: int | None, by_partition: Mapping[str, Mapping[int, int]] | None
) -> int | None:
    """The timestamp an option gives ``tp``: one for every partition, else its own, if any."""
    if every is not None:
        return every
    return (by_partition or {}).get(tp.topic, {}).get(tp.partition)


def subscribed(subscription: Subscription, topics: Mapping[str, object], *, strict: bool) -> list[TopicPartition]:
    """The partitions a subscription reads now (a pattern picks up new topics as they appear)."""
    tps: list[TopicPartition] = []
    if subscription.pattern is not None:
        pattern = re.compile(subscription.pattern)
        for name, meta in sorted(topics.items()):
            if not meta.internal and pattern.fullmatch(name):
                tps.extend(TopicPartition(name, p) for p in range(meta.partitions))
        return tps
    if subscription.assignment:
        for name, partitions in sorted(subscription.assignment.items()):
            meta = topics.get(name)
            for p in partitions:
                if meta is None or p >= meta.partitions:
                    if strict:
                        raise UnknownTopicOrPartitionError(f"option 'assign' names {name}-{p}, which does not exist")
                    continue
                tps.append(TopicPartition(name, p))
        return tps
    for name in sorted(subscription.topics):
        meta = topics.get(name)
        if meta is None:
            if strict:
                raise UnknownTopicOrPartitionError(f"option 'subscribe' names topic {name!r}, which does not exist")
            continue
        tps.extend(TopicPartition(name, p) for p in range(meta.partitions))
    return tps


class LakelogBatchReader(DataSourceReader):
    """``spark.read.format("lakelog")``: [startingOffsets, endingOffsets) at the latest snapshot."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[RangePartition]:
        topic_log = TopicLog(self.options)
        snapshot = topic_log.snapshot()
        start = topic_log.starting_offsets(snapshot, streaming=False)
        end = topic_log.ending_offsets(snapshot)
        for tp, s in start.items():
            if end[tp] < s:
                raise InvalidOffsetError(f"the ending offset {end[tp]} of {tp} is before its starting offset {s}")
        return topic_log.plan(snapshot, start, end)

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition)


class LakelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("lakelog")``; see the module docstring for its guarantees."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._state: _StreamState | None = None

    def __getstate__(self) -> dict:
        # Executors only need the options (read() is static); the planning
        # state stays in the planner's worker.
        return {"options": self.options, "_state": None}

    @property
    def state(self) -> _StreamState:
        if self._state is None:
            self._state = _StreamState(TopicLog(self.options))
        return self._state

    def initialOffset(self) -> dict:
        topic_log = self.state.log
        return offsets_to_json(topic_log.starting_offsets(topic_log.snapshot(), streaming=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        state = self.state
        self._commit_group(start)
        snapshot = state.log.snapshot()
        bounds = state.log.bounds(snapshot)
        begin, losses = reconcile_start(offsets_from_json(start), bounds)
        handle_losses(losses, self.options.fail_on_data_loss)
        target = {tp: max(begin[tp], b.end) for tp, b in bounds.items()}
        state.latest = dict(target)
        if state.available_now is not None:
            target = {tp: max(begin[tp], min(o, state.available_now.get(tp, begin[tp]))) for tp, o in target.items()}
        end = target
        if not isinstance(limit, ReadAllAvailable):
            end = self._limited(snapshot, begin, target)
        if total_records(begin, end) > 0:
            state.last_trigger_ms = time.time() * 1000
        return offsets_to_json(end)

    def _limited(
        self, snapshot: TableState, begin: dict[TopicPartition, int], target: dict[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        opts = self.options
        state = self.state
        available = total_records(begin, target)
        if opts.min_offsets_per_trigger is not None and available < opts.min_offsets_per_trigger:
            waited = time.time() * 1000 - state.last_trigger_ms
            if waited < opts.max_trigger_delay_ms:
                return dict(begin)
        if opts.max_offsets_per_trigger is None or available <= opts.max_offsets_per_trigger:
            return target
        commits = state.index.covering(snapshot.version, begin, target)
        if commits is None:
            log.warning(
                "commits behind the query's position were removed from the Delta log; "
                "maxOffsetsPerTrigger is shared among partitions without regard to commit boundaries"
            )
            return proportional_limit(begin, target, opts.max_offsets_per_trigger)
        return plan_by_commits(begin, target, commits, opts.max_offsets_per_trigger)

    def reportLatestOffset(self) -> dict | None:
        # The log end before any rate limit: the progress's latestOffset, and what
        # io.lakelog.spark.LakelogMicroBatchStream computes offsets-behind-latest against.
        latest = self.state.latest
        return None if latest is None else offsets_to_json(latest)

    def prepareForTriggerAvailableNow(self) -> None:
        topic_log = self.state.log
        snapshot = topic_log.snapshot()
        self.state.available_now = {tp: b.end for tp, b in topic_log.bounds(snapshot).items()}

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        topic_log = self.state.log
        return topic_log.plan(topic_log.snapshot(), offsets_from_json(start), offsets_from_json(end))

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition)

    def commit(self, end: dict) -> None:
        self._commit_group(end)

    def _commit_group(self, processed: dict) -> None:
        """Commit ``processed`` (offsets of completed batches) to the groupId, once per change.

        Spark calls ``commit`` for batch N only when it plans batch N+1, and
        never for the last batch of an AvailableNow run; but the ``start``
        of every ``latestOffset`` call is the end of a completed batch, so
        both call this and the group's lag is current within one trigger.
        """
        if self.options.group_id is None:
            return
        state = self.state
        offsets = offsets_from_json(processed)
        if offsets == state.group_committed:
            return
        if state.group is None:
            state.group = GroupOffsetsCommitter(state.log.uri, self.options.group_id)
        state.group.commit(offsets)
        state.group_committed = offsets

    def stop(self) -> None:
        self._state = None


class FailedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of a query whose options are wrong: every call raises the error.

    Given when ``streamReader()`` cannot make a :class:`LakelogStreamReader`
    (see LakelogDataSource.streamReader), so the query fails with the
    option's error rather than PySpark's UnboundLocalError.
    """

    def __init__(self, error: Exception) -> None:
        self.error = error

    def _fail(self) -> None:
        raise self.error

    def initialOffset(self) -> dict:
        self._fail()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._fail()

    def getDefaultReadLimit(self) -> ReadLimit:
        self._fail()

    def prepareForTriggerAvailableNow(self) -> None:
        self._fail()

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        self._fail()

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        self._fail()

    def commit(self, end: dict) -> None:
        self._fail()

    def stop(self) -> None:
        """Nothing was opened."""


class _StreamState:
    """What the planner keeps between calls: not sent to executors."""

    def __init__(self, topic_log: TopicLog) -> None:
        self.log = topic_log
        self.index = CommitIndex(topic_log.reader.read_commit)
        self.last_trigger_ms = time.time() * 1000
        self.available_now: dict[TopicPartition, int] | None = None
        self.latest: dict[TopicPartition, int] | None = None
        self.group: GroupOffsetsCommitter | None = None
        self.group_committed: dict[TopicPartition, int] | None = None
