"""Store: a lakelog store -- one Delta log table plus its topic metadata -- as a user opens it.

The top of the package: a façade over the engine's clients (producers, consumers, admin),
transactions and the Spark connector's parts (session, reads, ``write(df)``). The log table
is partitioned by ``topic`` and ``partition``; topic metadata lives in its Delta properties
(:mod:`engine.topics`). Every write goes through the commit core
(:class:`engine.commit.Committer`), and everything but DataFrames works without Spark: a
store is opened, topics administered, records produced and consumed without starting a
JVM. Spark starts on first use of :attr:`Store.spark` -- when a DataFrame is asked for
(``read``, ``write(df)``, ``history()``, streaming). Clients get the store's
:class:`engine.context.StoreContext` (:attr:`Store.context`), never the façade.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# The admin modules (delete_records, list_offsets, history, time_travel) are imported by the
# methods that use them: opening a store to produce or consume does not need them.
from lakelog.engine.commit import (
    AppendResult,
    RetryPolicy,
    TableLog,
    TableState,
    create_table,
    is_delta_table,
    normalize_uri,
)
from lakelog.engine.commit.partition_reader import data_file_error
from lakelog.engine.commit.reservations import DEFAULT_TIMEOUT_MS
from lakelog.engine.context import StoreContext, commit_topic_creation
from lakelog.engine.errors import (
    InconsistentWriteError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidRecordError,
    StoreError,
    StoreNotFoundError,
    error_for_os_error,
)
from lakelog.engine.offsets import OffsetRange, parse_offset_spec, read_ranges, resolve_offsets
from lakelog.engine.produce import Producer
from lakelog.engine.schema import LOG_SCHEMA_JSON, PARTITION_COLUMNS, STATS_COLUMNS
from lakelog.engine.settings import Settings, load_settings
from lakelog.engine.storage.object_store import is_s3
from lakelog.engine.topic_changes import plan_alter_config, plan_create_partitions, plan_delete
from lakelog.engine.topics import (
    STORE_FORMAT_PROPERTY,
    STORE_FORMAT_VERSION,
    TopicMetadata,
    TopicPartition,
    require_topic,
    resolve_topic_names,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakelog.engine.admin.history import HistoryEntry, PartitionChange
    from lakelog.engine.admin.list_offsets import OffsetAndTimestamp
    from lakelog.engine.consume import Consumer
    from lakelog.transactions import TransactionalProducer

log = logging.getLogger(__name__)

TABLE_PROPERTIES = {
    STORE_FORMAT_PROPERTY: STORE_FORMAT_VERSION,
    "delta.dataSkippingStatsColumns": ",".join(STATS_COLUMNS),
    # Serializable: a concurrent blind append to a partition we read still
    # conflicts with us (WriteSerializable would let it through).
    "delta.isolationLevel": "Serializable",
    # Producer ids (idempotence) and transactional ids are Delta app
    # transactions; without a retention they would pile up in every snapshot.
    "delta.setTransactionRetentionDuration": "interval 7 days",
    # A checkpoint is written off the commit path (engine.commit.committer);
    # every 50 commits keeps a new reader's replay of commit files short.
    "delta.checkpointInterval": "50",
    # Checkpoints hold each file's statistics and partition values as typed columns
    # (add.stats_parsed, add.partitionValues_parsed; Delta protocol, "Checkpoint Schema"):
    # a new process reads a partition's offsets from them without parsing JSON per file
    # (engine.commit.checkpoint_state).
    "delta.checkpoint.writeStatsAsStruct": "true",
}


@dataclass(frozen=True)
class WriteResult:
    """What a ``Store.write`` committed: the Delta version and each partition's offsets."""

    version: int | None
    ranges: dict[TopicPartition, OffsetRange]

    @property
    def records(self) -> int:
        return sum(r.count for r in self.ranges.values())


# How long, after an optimistic write(df) lost a race to another writer of its topic, this
# process's writes to it reserve their offsets first (rather than write their files twice).
CONTENDED_WRITE_S = 60.0


class Store:
    """A store of Kafka-style topics in one Delta table. Thread-safe."""

    def __init__(self, context: StoreContext, spark: SparkSession | None) -> None:
        # What every client of the store shares: the table's log as this process follows it,
        # the settings, committers (engine.context).
        self.context = context
        self._spark = spark
        self._owns_spark = spark is None
        self._lock = threading.Lock()
        # Per topic (None: a topic column), until when write(df) reserves its offsets first.
        self._contended_writes: dict[str | None, float] = {}

    @property
    def uri(self) -> str:
        """The store's URI (``file:///...`` for a local path, ``s3a://...``)."""
        return self.context.uri

    @property
    def settings(self) -> Settings:
        """The store's resolved settings (see :mod:`engine.settings`)."""
        return self.context.settings

    @property
    def log(self) -> TableLog:
        """The log table's Delta log as this process follows it (shared by the store's clients)."""
        return self.context.log

    @property
    def spark(self) -> SparkSession:
        """The store's SparkSession: the one given, else the process's active one, else one
        built from conf/ on first use (then ``close`` stops it). Only DataFrame work needs it."""
        # PySpark is imported here, at the first DataFrame call, never by opening a store.
        from pyspark.sql import SparkSession

        from lakelog.spark_connector.session import build_session, configure_object_store, warn_if_unsafe

        with self._lock:
            if self._spark is None:
                active = SparkSession.getActiveSession()
                self._owns_spark = active is None
                self._spark = (
                    active
                    if active is not None
                    else build_session(
                        self.settings.spark, jars=self.settings.jars_dir, s3a=is_s3(self.uri), store_uri=self.uri
                    )
                )
                configure_object_store(self._spark, self.uri)
                warn_if_unsafe(self._spark, self.uri)
            return self._spark

    @property
    def spark_started(self) -> bool:
        """Whether this store has a SparkSession (given, or started by a DataFrame call)."""
        return self._spark is not None

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        spark: SparkSession | None = None,
        *,
        conf_file: str | os.PathLike[str] | None = None,
        create: bool = True,
        **settings: Any,
    ) -> Store:
        """Open the store at ``path`` (a local path or URI); with ``create``, create it if absent.

        Settings come from ``conf/lakelog.conf``, then ``conf_file`` (or the
        file named by ``LAKELOG_CONF_FILE``), then ``LAKELOG_*`` environment
        variables, then ``settings`` (``num_partitions=3``,
        ``**{"producer.linger.ms": 10}``); see :mod:`engine.settings`. No
        SparkSession is started: ``spark`` (if given) is the session DataFrame
        calls use, else the process's active one or one built from
        ``conf/spark-defaults.conf`` when a DataFrame is first asked for.
        Raises InvalidConfigError for an unknown setting or bad value (naming
        it and where it came from), for a path that is not a str or PathLike,
        and for a path holding a percent-escape such as ``%20`` (delta-rs
        decodes it and Spark does not: they would see two different
        tables); StoreNotFoundError without ``create`` when there is no store
        at the path; StoreError if the path holds something that is not a
        lakelog store (a file, a non-empty directory, another Delta table),
        StoreAccessError / StoreFullError when creating it is refused. Nothing
        is created unless the store is: directories made for a store whose
        creation failed are removed again.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidConfigError(f"a store path must be a str or os.PathLike, got {type(path).__name__}")
        if conf_file is not None and not isinstance(conf_file, (str, os.PathLike)):
            raise InvalidConfigError(f"conf_file must be a str or os.PathLike, got {type(conf_file).__name__}")
        uri = normalize_uri(os.fspath(path))
        refuse_ambiguous_uri(uri)
        resolved = load_settings(conf_file, overrides=settings)
        if spark is not None:
            from lakelog.spark_connector import register
            from lakelog.spark_connector.session import configure_object_store, warn_if_unsafe

            # Before the first Python-side access: it must use the session's endpoint.
            configure_object_store(spark, uri)
        store = cls(StoreContext(uri, resolved), spark)
        if spark is not None:
            warn_if_unsafe(spark, uri)
            register(spark)
        if not _holds_table(uri):
            if not create:
                raise StoreNotFoundError(
                    f"no lakelog store at {uri} (create one with `lakelog --store {uri} topics create TOPIC` "
                    "or Store.open(path, create=True))"
                )
            _create_log_table(uri)
        _check_store(uri, store.log.latest())
        return store

    def close(self) -> None:
        """Stop the SparkSession if this store built it."""
        with self._lock:
            if self._owns_spark and self._spark is not None:
                self._spark.stop()
                self._spark = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topic administration --------------------------------------------------

    def create_topic(
        self, name: str, partitions: int | None = None, config: Mapping[str, Any] | None = None
    ) -> TopicMetadata:
        """Create a topic (one Delta metadata commit).

        ``partitions`` defaults to the ``num.partitions`` setting; ``config``
        is laid over the ``topic.*`` settings and stored with the topic.

        Raises InvalidTopicError (bad or colliding name), TopicExistsError,
        InvalidPartitionsError, InvalidConfigError (unknown key, bad value,
        ``config`` not a mapping).
        """
        if partitions is None:
            partitions = self.settings.num_partitions
        config = {**self.settings.topic, **_config_mapping(config, "config")}
        commit_topic_creation(self.context.admin, name, partitions, config, RetryPolicy())
        return self.describe_topic(name)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """Names of the topics, sorted."""
        return sorted(n for n, t in self.context.latest_topics().items() if include_internal or not t.internal)

    def describe_topic(self, name: str) -> TopicMetadata:
        """The topic's id, partition count and configuration (UnknownTopicOrPartitionError if absent)."""
        return require_topic(self.context.latest_topics(), name)

    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its records in one commit; its name can then be reused."""
        self.context.admin.change_topics(
            lambda topics, props: plan_delete(topics, props, name=name, client_id=self.context.admin.client_id),
            RetryPolicy(),
        )

    def create_partitions(self, name: str, new_total: int) -> TopicMetadata:
        """Grow a topic to ``new_total`` partitions (never shrink, as in Kafka).

        Keys hash over the new count from then on, so a key's later records
        may land in a different partition than its earlier ones.
        """
        self.context.admin.change_topics(
            lambda topics, props: plan_create_partitions(
                topics, props, name=name, new_total=new_total, client_id=self.context.admin.client_id
            ),
            RetryPolicy(),
        )
        return self.describe_topic(name)

    def alter_topic_config(
        self,
        name: str,
        set_config: Mapping[str, Any] | None = None,
        delete_config: Iterable[str] | None = None,
    ) -> TopicMetadata:
        """Set and/or reset (to default) topic configs, Kafka's incremental alter.

        Raises InvalidConfigError for an unknown key or bad value, for
        ``set_config`` that is not a mapping and ``delete_config`` that is not
        an iterable of key names.
        """
        set_config = _config_mapping(set_config, "set_config")
        if delete_config is not None:
            if isinstance(delete_config, (str, bytes)) or not isinstance(delete_config, Iterable):
                raise InvalidConfigError(
                    f"delete_config must be a list of config names, got {type(delete_config).__name__}"
                )
            delete_config = list(delete_config)
        self.context.admin.change_topics(
            lambda topics, props: plan_alter_config(
                topics,
                props,
                name=name,
                set_config=set_config,
                delete_config=delete_config,
                client_id=self.context.admin.client_id,
            ),
            RetryPolicy(),
        )
        return self.describe_topic(name)

    def delete_records(self, offsets: Mapping[Any, int]) -> dict[TopicPartition, int]:
        """Delete the records below an offset of each partition: Kafka's ``Admin.deleteRecords``.

        ``offsets`` maps a :class:`TopicPartition` (or a ``(topic, partition)`` pair) to the
        offset the partition's log is to start at, -1 for its high watermark (the end readers
        see). Returns per partition the log start offset afterwards (Kafka's low watermark):
        the log start never moves back, so an offset at or below it changes nothing (asking
        again is harmless). Every reader starts at the new log start from then on (consumers'
        ``auto.offset.reset``, ``beginning_offsets``, ``lakelog serve``'s ListOffsets and Fetch,
        ``format("lakelog")``, ``lakelog check``); the start is kept in the Delta log and data
        files lying wholly below it are removed in the same commit (one per topic); plain
        Delta readers still see the rows below it in the file it cuts through.

        Every partition is checked before anything is committed: raises
        UnknownTopicOrPartitionError, InvalidTopicError (an internal topic),
        OffsetOutOfRangeError (an offset below -1 or past the high watermark) or
        InvalidOffsetError (not an int) naming the partition; CommitConflictError /
        MaintenanceConflictError when commits kept winning, CommitStateUnknownError when the
        outcome of a commit is unknown.
        """
        from lakelog.engine.admin.delete_records import delete_records  # on first use: start-up time

        done = delete_records(self.context, offsets)
        return {tp: start for tp, start in done.items() if isinstance(start, int)}

    # -- reading as a consumer ---------------------------------------------------

    def consumer(self, group_id: str | None = None, **config: Any) -> Consumer:
        """A new :class:`engine.consume.consumer.Consumer`; config keys as Kafka's
        (``auto.offset.reset``) or their underscore spellings."""
        config = {**self.settings.consumer, **config}
        if group_id is not None:
            config["group.id"] = group_id
        # Imported here: consumers bring the group protocol (and kio), which a process that
        # only administers topics or produces never needs (``lakelog perf startup``).
        from lakelog.engine.consume import Consumer

        return Consumer(self.context, config)

    # -- writing -------------------------------------------------------------

    def producer(self, **config: Any) -> Producer:
        """A new :class:`Producer`; config keys are Kafka's (``linger.ms``) or their
        underscore spellings (``linger_ms``), laid over the ``producer.*`` settings."""
        return Producer(self.context, {**self.settings.producer, **config})

    def transactional_producer(self, transactional_id: str, **config: Any) -> TransactionalProducer:
        """A :class:`transactions.TransactionalProducer` for ``transactional_id``; call
        ``init_transactions()`` first. Config keys (and ``producer.*`` settings) as for ``producer``."""
        from lakelog.transactions import TransactionalProducer

        return TransactionalProducer(self.context, transactional_id, {**self.settings.producer, **config})

    def materialize(
        self,
        topic: str,
        table: str,
        *,
        checkpoint: str | None = None,
        subject: str | None = None,
        message: str | None = None,
        continuous: bool = False,
        trigger_interval: str = "10 seconds",
        timeout_s: float | None = None,
    ) -> None:
        """Keep ``topic`` (values in Confluent's wire format, Avro, JSON or Protobuf schemas in the
        store's registry; ``message``: the Protobuf message read, default the schema's first) as
        the Delta table at ``table``: the value's fields plus ``partition``, ``offset``, ``timestamp``,
        each record exactly once, its schema evolving with the registry's compatible versions
        (:mod:`lakelog.spark_connector.typed_tables`). Brings the table up to date and returns,
        or with ``continuous`` keeps it so until ``timeout_s``. The checkpoint defaults to the
        store's scratch area. Raises InvalidConfigError for a topic without a subject (``subject``,
        default ``<topic>-value``) and what the streaming query raises."""
        from lakelog.spark_connector import typed_tables

        spec = typed_tables.typed_table(self.uri, topic, table, checkpoint, subject, message)
        typed_tables.run(
            self.spark, spec, continuous=continuous, trigger_interval=trigger_interval, timeout_s=timeout_s
        )

    def write(
        self,
        df: DataFrame,
        topic: str | None = None,
        *,
        retries: int = 10,
        transaction_timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> WriteResult:
        """Append a batch DataFrame with the Kafka sink's columns in one commit.

        ``value`` is required; ``key``, ``topic``, ``partition``, ``headers``
        and ``timestamp`` are optional; ``topic=`` overrides a topic column.
        Offsets are assigned inside Spark, per partition in each Spark task's
        row order. All rows become visible at once or none do, and the write
        lands however busy the partitions are: one Spark job counts the rows
        per partition, a second writes the files (Delta's writer) numbered
        from the partitions' ends, and one commit adds them (keyless rows of
        no more Spark tasks than the topic has partitions skip the count: each
        task fills a partition of its own). When another
        writer appended to the same partitions meanwhile, the offsets are
        reserved in one small commit and the files written once more inside
        the reservation; this process then reserves first for that topic for a
        minute (:data:`CONTENDED_WRITE_S`). While a reservation is pending
        readers end at it (Kafka's last stable offset) and producers append
        after it; a writer that dies leaves it to expire
        ``transaction_timeout_ms`` (Kafka's ``transaction.timeout.ms``) after
        its last heartbeat, and its offsets are skipped.

        Raises InvalidRecordError / UnknownTopicOrPartitionError /
        RecordTooLargeError for a row ``send()`` would refuse, with nothing
        committed and no file left (a row refused after its offsets were
        reserved leaves them as an aborted range, as an aborted transaction's);
        CommitConflictError when ``retries`` conflicting reservation attempts
        were used up; ReservationLostError when the reservation expired before
        the files were committed (nothing is visible either way).
        """
        from lakelog.spark_connector.dataframe_write import DataFrameAppend  # PySpark: a DataFrame is here

        if (
            isinstance(transaction_timeout_ms, bool)
            or not isinstance(transaction_timeout_ms, int)
            or transaction_timeout_ms <= 0
        ):
            raise InvalidConfigError(
                f"transaction_timeout_ms must be a positive int (ms), got {transaction_timeout_ms!r}"
            )
        reserve_first = self._contended_writes.get(topic, 0.0) > time.monotonic()
        batch = DataFrameAppend(self.spark, df, topic, self.uri, optimistic=not reserve_first)
        policy = RetryPolicy(retries=retries)
        admin = self.context.admin

        def contended() -> None:
            self._contended_writes[topic] = time.monotonic() + CONTENDED_WRITE_S
            batch.count_first()

        def land() -> AppendResult:
            if reserve_first:
                return admin.append_reserved(batch, policy, timeout_ms=transaction_timeout_ms)
            return admin.append_or_reserve(batch, policy, timeout_ms=transaction_timeout_ms, lost=contended)

        try:
            try:
                result = land()
            except InconsistentWriteError:
                # The input gave other rows to the write than to the count (a plan that is not
                # deterministic): once more from Spark's cache, where both see the same rows.
                log.info("the DataFrame changed between counting and writing; writing it again from a cached copy")
                batch.persist()
                result = land()
        finally:
            batch.unpersist()
        return WriteResult(result.version, result.ranges)

    # -- offsets -------------------------------------------------------------

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Per partition, the end of what readers see: the offset the next record gets (Kafka's
        log end offset), or while a ``write(df)``'s reservation is pending the first offset it
        holds (the last stable offset, what Kafka's ``endOffsets`` gives a read_committed consumer)."""
        from lakelog.engine.admin import list_offsets  # on first use: start-up time

        return list_offsets.end_offsets(self.context, topic)

    def beginning_offsets(self, topic: str) -> dict[int, int]:
        """Per partition, the first offset still in the log (Kafka's log start offset)."""
        from lakelog.engine.admin import list_offsets  # on first use: start-up time

        return list_offsets.beginning_offsets(self.context, topic)

    def offsets_for_times(self, topic: str, timestamps: Mapping[int, int]) -> dict[int, OffsetAndTimestamp | None]:
        """Per partition, the earliest offset whose timestamp is >= the given ms, or None.

        Kafka's ``offsetsForTimes``: None when every record of the partition
        is older. Files are pruned by their timestamp statistics; no Spark.
        Raises UnknownTopicOrPartitionError for a partition that does not exist,
        InvalidOffsetError for a timestamp outside the range record timestamps
        lie in (:func:`engine.records.check_lookup_timestamp`).
        """
        from lakelog.engine.admin import list_offsets  # on first use: start-up time

        return list_offsets.offsets_for_times(self.context, topic, timestamps)

    def max_timestamp_offsets(
        self, topic: str, partitions: Iterable[int] | None = None
    ) -> dict[int, OffsetAndTimestamp | None]:
        """Per partition (every one, or those of ``partitions``), the record with the largest
        timestamp (the earliest such offset on a tie), or None for a partition with no record:
        Kafka's ``listOffsets`` with ``OffsetSpec.maxTimestamp()`` (ListOffsets -3, KIP-734).
        Files are pruned by their timestamp statistics; no Spark. Raises
        UnknownTopicOrPartitionError for a topic or partition that does not exist."""
        from lakelog.engine.admin import list_offsets  # on first use: start-up time

        return list_offsets.max_timestamp_offsets(self.context, topic, partitions)

    # -- reading -------------------------------------------------------------

    def read(
        self,
        topics: Any,
        starting_offsets: Any = "earliest",
        ending_offsets: Any = "latest",
        *,
        as_of_version: int | None = None,
        as_of_timestamp: Any = None,
    ) -> DataFrame:
        """Records of ``topics`` as a DataFrame with Spark's Kafka source schema.

        ``topics``: a name, a list of names, or a compiled ``re.Pattern``.
        Offsets: "earliest", "latest", ``{topic: {partition: offset}}`` or its
        JSON (-2 earliest, -1 latest); a mapping must list every partition
        of each topic it names, topics it does not name take the default.
        Ending offsets are exclusive. The read is pinned to one Delta version,
        so "latest" and the rows agree: the current one, or with
        ``as_of_version`` / ``as_of_timestamp`` (ms, datetime or ISO-8601;
        the newest version committed at or before it) the topics as they
        were then -- "earliest"/"latest" and topic names resolve at that
        version. Raises InvalidOffsetError for offsets outside a partition's
        log and for a version or time the log no longer has (log cleanup, or
        VACUUM deleted its files).
        """
        start_spec = parse_offset_spec(starting_offsets, option="starting_offsets")
        end_spec = parse_offset_spec(ending_offsets, option="ending_offsets")
        version = self.version_as_of(as_of_version=as_of_version, as_of_timestamp=as_of_timestamp)
        snapshot = self.log.at(version)
        names = resolve_topic_names(topics, snapshot.topics)
        from lakelog.engine.admin import list_offsets  # on first use: start-up time

        bounds = list_offsets.partition_bounds(self.context, snapshot, names)
        starts = resolve_offsets(start_spec, bounds, default="earliest", option="starting_offsets")
        ends = resolve_offsets(end_spec, bounds, default="latest", option="ending_offsets")
        ranges = read_ranges(starts, ends)
        if version is not None:
            self._require_files(snapshot, [r.tp for r in ranges.values() if r.count > 0])
        else:
            self._require_present(snapshot, ranges.values())
        overlap = any(snapshot.files_of(r.tp).may_duplicate(r.start, r.end) for r in ranges.values() if r.count)
        from lakelog.spark_connector.frames import topic_frame  # PySpark: a DataFrame is asked for

        return topic_frame(self.spark, self.uri, snapshot.version, ranges.values(), one_per_offset=overlap)

    def version_as_of(self, *, as_of_version: int | None = None, as_of_timestamp: Any = None) -> int | None:
        """The Delta version a time-travel read pins (see :func:`engine.admin.time_travel.version_as_of`);
        None when neither is given."""
        if as_of_version is None and as_of_timestamp is None:
            return None
        from lakelog.engine.admin.time_travel import version_as_of  # on first use: start-up time

        return version_as_of(
            self.log.latest_version(),
            self.log.commit_time,
            as_of_version=as_of_version,
            as_of_timestamp=as_of_timestamp,
            now_ms=int(time.time() * 1000),
        )

    def _require_files(self, snapshot: TableState, tps: Iterable[TopicPartition]) -> None:
        missing = self.log.missing_files([f.path for tp in set(tps) for f in snapshot.files_of(tp).all()])
        if missing:
            raise InvalidOffsetError(
                f"version {snapshot.version} cannot be read any more: VACUUM deleted {len(missing)} of its files "
                f"(e.g. {missing[0]}); time travel reaches back delta.deletedFileRetentionDuration"
            )

    def _require_present(self, snapshot: TableState, ranges: Iterable[OffsetRange]) -> None:
        """DataLossError naming a missing file the read would need (Spark would fail in a task
        with a Java FileNotFoundException); one existence check per file read."""
        paths = [f.path for r in ranges if r.count > 0 for f in snapshot.files_of(r.tp).covering(r.start, r.end)]
        missing = self.log.missing_files(paths)
        if missing:
            raise data_file_error(FileNotFoundError(missing[0]), missing[0])

    def value_at(
        self,
        topic: str,
        key: bytes | str,
        *,
        as_of_timestamp: Any = None,
        as_of_version: int | None = None,
    ) -> bytes | None:
        """The value of ``key`` in ``topic`` as a reader saw it at a time or version.

        The value of the key's newest record committed at or before then;
        None when the key had no record or its newest was a tombstone (null
        value), as a compacted topic's consumer would conclude. Without
        either option: now. The key is looked up in every partition of the
        topic (records may have been sent to an explicit partition). Raises
        UnknownTopicOrPartitionError if the topic did not exist then,
        InvalidOffsetError as :meth:`read` for a time the log no longer has.
        """
        from pyspark.sql import functions as F

        key_bytes = key.encode() if isinstance(key, str) else key
        if not isinstance(key_bytes, bytes):
            raise InvalidRecordError(f"key must be bytes or str, got {type(key).__name__}")
        frame = self.read(topic, as_of_version=as_of_version, as_of_timestamp=as_of_timestamp)
        rows = (
            frame.where(F.col("key") == F.lit(bytearray(key_bytes)))
            .orderBy(F.col("timestamp").desc(), F.col("offset").desc())
            .select("value")
            .limit(1)
            .collect()
        )
        if not rows or rows[0].value is None:
            return None
        return bytes(rows[0].value)

    # -- history -------------------------------------------------------------

    def history_entries(self, topic: str | None = None) -> list[HistoryEntry]:
        """Every commit still in the Delta log, oldest first (optionally those touching ``topic``)."""
        from lakelog.engine.admin.history import history_entry  # on first use: start-up time

        entries = []
        for version in range(0, self.log.latest_version() + 1):
            commit = self.log.read_commit(version)
            if commit is None:
                continue  # removed by log cleanup
            entry = history_entry(version, commit)
            if topic is None or entry.touches(topic):
                entries.append(entry)
        return entries

    def history(self, topic: str | None = None) -> DataFrame:
        """The store's commits (or those touching ``topic``) as a DataFrame, oldest first.

        One row per Delta commit still in the log: ``version``, ``timestamp``,
        ``operation`` (lakelog's: produce, write, stream_write, transaction,
        init_transactions, offset_commit, join/heartbeat/leave, create_topic,
        delete_topic, create_partitions, alter_config, optimize, compact,
        retention; Delta's own name, lower case, for commits lakelog did not
        make), ``delta_operation``, ``client_id``, ``producer_id``,
        ``transactional_id`` with ``transaction_epoch``, ``query_id`` (a
        streaming sink), ``topic`` (topic admin and maintenance), and
        ``added`` / ``removed``: per partition the offsets
        ``[start_offset, end_offset)`` of the files the commit added or
        removed, with their ``records`` and ``files``; then ``details`` (JSON).
        """
        from pyspark.sql.types import (
            ArrayType,
            IntegerType,
            LongType,
            StringType,
            StructField,
            StructType,
            TimestampType,
        )

        change = StructType(
            [
                StructField("topic", StringType()),
                StructField("partition", IntegerType()),
                StructField("start_offset", LongType()),
                StructField("end_offset", LongType()),
                StructField("records", LongType()),
                StructField("files", IntegerType()),
            ]
        )
        schema = StructType(
            [
                StructField("version", LongType()),
                StructField("timestamp", TimestampType()),
                StructField("operation", StringType()),
                StructField("delta_operation", StringType()),
                StructField("client_id", StringType()),
                StructField("producer_id", StringType()),
                StructField("transactional_id", StringType()),
                StructField("transaction_epoch", LongType()),
                StructField("query_id", StringType()),
                StructField("topic", StringType()),
                StructField("added", ArrayType(change)),
                StructField("removed", ArrayType(change)),
                StructField("details", StringType()),
            ]
        )

        def cells(changes: Iterable[PartitionChange]) -> list[tuple]:
            return [(c.topic, c.partition, c.start_offset, c.end_offset, c.records, c.files) for c in changes]

        rows = [
            (
                e.version,
                e.timestamp,
                e.operation,
                e.delta_operation,
                e.client_id,
                e.producer_id,
                e.transactional_id,
                e.transaction_epoch,
                e.query_id,
                e.topic,
                cells(e.added()),
                cells(e.removed()),
                e.details,
            )
            for e in self.history_entries(topic)
        ]
        return self.spark.createDataFrame(rows, schema)


def _config_mapping(config: Any, what: str) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise InvalidConfigError(f"{what} must be a mapping of config name to value, got {type(config).__name__}")
    return dict(config)


_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def refuse_ambiguous_uri(uri: str) -> None:
    """Raise InvalidConfigError if ``uri`` holds a percent-escape (``%20``, ``%41``).

    Spark (Hadoop paths) and lakelog's Python side take such a path
    literally; delta-rs, which reads the Delta log for lakelog, decodes it
    (``a%20b`` -> ``a b``), so the two would see different tables and a
    store created there could never be read. Spaces and a lone ``%`` are
    fine.
    """
    found = _PERCENT_ESCAPE.search(uri)
    if found:
        raise InvalidConfigError(
            f"store path {uri!r} holds the percent-escape {found.group(0)!r}, which delta-rs decodes and "
            "Spark does not; rename the directory (spaces need no escaping)"
        )


def _holds_table(uri: str) -> bool:
    """Whether ``uri`` holds a Delta table; StoreError for a regular file or an unreadable path."""
    if uri.startswith("/"):
        if os.path.exists(uri) and not os.path.isdir(uri):
            raise StoreError(f"{uri} is a file, not a directory that could hold a store")
        if not os.path.isdir(uri):
            return False
    try:
        return is_delta_table(uri)
    except OSError as exc:
        raise error_for_os_error(exc, f"opening the store at {uri}") from exc


def _missing_dirs(path: str) -> list[str]:
    """The directories leading to ``path`` (itself included) that do not exist, outermost first."""
    missing = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing[::-1]


def _create_log_table(uri: str) -> None:
    """Create the log table at ``uri`` (version 0); tolerate another process creating it first."""
    made: list[str] = []
    if uri.startswith("/"):
        if os.path.isdir(uri) and os.listdir(uri):
            raise StoreError(f"{uri} is a non-empty directory that is not a lakelog store")
        made = _missing_dirs(os.path.join(uri, "_delta_log"))
    try:
        create_table(
            uri,
            json.dumps(LOG_SCHEMA_JSON, separators=(",", ":")),
            PARTITION_COLUMNS,
            TABLE_PROPERTIES,
            client_id=f"lakelog-{os.getpid()}",
        )
    except OSError as exc:
        if not _created_by_someone(uri):
            # Only the directories this call made, and only while still empty.
            for directory in reversed(made):
                try:
                    os.rmdir(directory)
                except OSError:
                    break
            raise error_for_os_error(exc, f"creating a store at {uri}") from exc


def _created_by_someone(uri: str) -> bool:
    """Whether a table is at ``uri`` after our creation failed (another process was first)."""
    try:
        return is_delta_table(uri)
    except OSError:
        return False


def _check_store(uri: str, state: TableState) -> None:
    version = state.properties.get(STORE_FORMAT_PROPERTY)
    if version is None:
        raise StoreError(f"{uri} is a Delta table but not a lakelog store (no {STORE_FORMAT_PROPERTY} property)")
    if version != STORE_FORMAT_VERSION:
        raise StoreError(
            f"{uri} is a lakelog store of format {version}; this lakelog reads format {STORE_FORMAT_VERSION}"
        )
