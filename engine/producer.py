"""The producer: Kafka's ``send`` / ``flush`` / ``close`` over Delta commits.

``send`` places a record in a partition (Kafka's default partitioner) and
returns a future; a background sender thread seals the pending records into
a batch when ``linger.ms`` has passed or ``batch.size`` / ``batch.num.messages``
is reached, and commits the whole batch -- any number of topics and
partitions -- as one Delta commit through :class:`engine.commit.LogWriter`.

Guarantees:

* a future completes with :class:`RecordMetadata` only after the commit
  holding its record landed (``acks=all`` is the only mode);
* records of one producer to one partition get increasing offsets in send
  order: batches are committed one at a time, in order, and a batch is
  retried before the next one is started;
* a batch is all-or-nothing: it is one Delta commit.

Per-record problems (unknown topic, partition out of range, a record over
the topic's ``max.message.bytes``) fail that record's future and never hold
back the rest of its batch, as in Kafka's Java client. Wrong argument types
and a closed producer raise from ``send`` itself.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from engine.commit import LogWriter, RetryPolicy
from engine.config import INT_MAX, ConfigKey, key_table, resolve_config
from engine.errors import (
    DeliveryTimeoutError,
    InvalidConfigError,
    LakelogError,
    ProducerClosedError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from engine.log_view import LogView
from engine.offsets import OffsetRange, TopicPartition
from engine.partitioner import KeylessPartitioner, partition_for_key
from engine.records import Headers, RecordMetadata, record_size, to_bytes, to_headers, to_timestamp_ms
from engine.schema import LOG_ARROW_SCHEMA
from engine.topics import TIMESTAMP_TYPE_CODES, TopicMetadata

if TYPE_CHECKING:
    from engine.store import LogStore

log = logging.getLogger(__name__)

_producer_ids = itertools.count(1)

PRODUCER_CONFIG_KEYS = key_table(
    [
        ConfigKey("client.id", "string", "", "Name recorded with every commit of this producer (default producer-N)."),
        ConfigKey(
            "acks",
            "enum",
            "all",
            "Only 'all' (or -1): a record is acknowledged when its Delta commit has landed.",
            choices=("all", "-1"),
        ),
        ConfigKey(
            "batch.size",
            "int",
            16 * 1024 * 1024,
            "Bytes of records that seal a batch at once; one batch is one commit.",
            minimum=1,
            maximum=INT_MAX,
        ),
        ConfigKey(
            "batch.num.messages",
            "int",
            1_000_000,
            "Records that seal a batch at once (librdkafka's name).",
            minimum=1,
            maximum=INT_MAX,
        ),
        ConfigKey("linger.ms", "long", 5, "How long a batch waits for more records before it is committed.", minimum=0),
        ConfigKey(
            "buffer.memory",
            "long",
            256 * 1024 * 1024,
            "Bytes of unsent records held before send() blocks.",
            minimum=1,
        ),
        ConfigKey("max.block.ms", "long", 60_000, "How long send() blocks on a full buffer before failing.", minimum=0),
        ConfigKey(
            "retries", "int", INT_MAX, "Retries of a conflicting commit (bounded by delivery.timeout.ms).", minimum=0
        ),
        ConfigKey("retry.backoff.ms", "long", 100, "First backoff after a commit conflict.", minimum=0),
        ConfigKey("retry.backoff.max.ms", "long", 1000, "Largest backoff after repeated conflicts.", minimum=0),
        ConfigKey(
            "delivery.timeout.ms",
            "long",
            120_000,
            "Upper bound on the time to commit a batch, retries included.",
            minimum=1,
        ),
        ConfigKey("partitioner.ignore.keys", "bool", False, "Spread keyed records like keyless ones."),
        ConfigKey(
            "metadata.max.age.ms", "long", 300_000, "Age after which cached topic metadata is re-read.", minimum=0
        ),
    ]
)


class RecordFuture:
    """The eventual :class:`RecordMetadata` of one sent record."""

    def __init__(self) -> None:
        self._future: Future[RecordMetadata] = Future()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Block until the record is committed; raise its error if it failed.

        ``timeout`` in seconds; DeliveryTimeoutError when it passes first
        (the record may still be committed later).
        """
        try:
            return self._future.result(timeout)
        except FutureTimeout as exc:
            raise DeliveryTimeoutError(f"record not acknowledged within {timeout} s") from exc

    def done(self) -> bool:
        return self._future.done()

    def succeeded(self) -> bool:
        return self._future.done() and self._future.exception() is None

    def failed(self) -> bool:
        return self._future.done() and self._future.exception() is not None

    def exception(self) -> BaseException | None:
        return self._future.exception() if self._future.done() else None

    def add_callback(self, fn: Callable[[RecordMetadata], Any]) -> RecordFuture:
        """Call ``fn(metadata)`` when the record is committed."""
        self._future.add_done_callback(lambda f: f.exception() is None and fn(f.result()))
        return self

    def add_errback(self, fn: Callable[[BaseException], Any]) -> RecordFuture:
        """Call ``fn(error)`` if the record fails."""
        self._future.add_done_callback(lambda f: f.exception() is not None and fn(f.exception()))
        return self

    def _succeed(self, metadata: RecordMetadata) -> None:
        if not self._future.done():
            self._future.set_result(metadata)

    def _fail(self, error: BaseException) -> None:
        if not self._future.done():
            self._future.set_exception(error)


@dataclass
class _Pending:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp_ms: int
    size: int
    sequence: int
    future: RecordFuture


class ProducerBatch:
    """Records sealed into one commit; offsets are assigned on the driver."""

    operation = "produce"

    def __init__(self, spark: SparkSession, records: list[_Pending], producer_id: int) -> None:
        self._spark = spark
        self._records = records
        self._producer_id = producer_id
        self._accepted: dict[TopicPartition, list[_Pending]] = {}
        self._topics: Mapping[str, TopicMetadata] = {}

    @property
    def records(self) -> list[_Pending]:
        return self._records

    def prepare(self, view: LogView) -> dict[TopicPartition, int]:
        """Drop (and fail) records the current topic metadata refuses."""
        accepted: dict[TopicPartition, list[_Pending]] = defaultdict(list)
        kept = []
        for record in self._records:
            error = check_record(view.topics.get(record.topic), record.topic, record.partition, record.size)
            if error is not None:
                record.future._fail(error)
                continue
            kept.append(record)
            accepted[TopicPartition(record.topic, record.partition)].append(record)
        self._records = kept
        self._accepted = dict(accepted)
        self._topics = view.topics
        return {tp: len(records) for tp, records in accepted.items()}

    def target_partitions(self, view: LogView) -> list[TopicPartition]:
        return sorted(self._accepted)

    def build(
        self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int
    ) -> DataFrame:
        columns: dict[str, list[Any]] = {name: [] for name in LOG_ARROW_SCHEMA.names}
        append_us = append_time_ms * 1000
        for tp in sorted(self._accepted):
            start = ends.get(tp, 0)
            log_append = topics[tp.topic].log_append_time
            for i, record in enumerate(self._accepted[tp]):
                columns["topic"].append(tp.topic)
                columns["partition"].append(tp.partition)
                columns["offset"].append(start + i)
                columns["timestamp"].append(append_us if log_append else record.timestamp_ms * 1000)
                columns["timestamp_type"].append(TIMESTAMP_TYPE_CODES["LogAppendTime" if log_append else "CreateTime"])
                columns["key"].append(record.key)
                columns["value"].append(record.value)
                columns["headers"].append(
                    None if record.headers is None else [{"key": k, "value": v} for k, v in record.headers]
                )
                columns["producer_id"].append(self._producer_id)
                columns["producer_epoch"].append(0)
                columns["sequence"].append(record.sequence)
        table = pa.table(columns, schema=LOG_ARROW_SCHEMA)
        # One task writes small batches: one file per partition per commit.
        slices = max(1, min(self._spark.sparkContext.defaultParallelism, table.nbytes // (64 * 1024 * 1024)))
        return self._spark.createDataFrame(table).coalesce(slices)

    def complete(self, plan: Mapping[TopicPartition, OffsetRange], append_time_ms: int) -> None:
        for tp, records in self._accepted.items():
            start = plan[tp].start
            log_append = self._topics[tp.topic].log_append_time
            for i, record in enumerate(records):
                record.future._succeed(
                    RecordMetadata(
                        tp.topic,
                        tp.partition,
                        start + i,
                        append_time_ms if log_append else record.timestamp_ms,
                        len(record.key) if record.key is not None else -1,
                        len(record.value) if record.value is not None else -1,
                    )
                )

    def fail(self, error: BaseException) -> None:
        for record in self._records:
            record.future._fail(error)


def check_record(topic: TopicMetadata | None, name: str, partition: int, size: int) -> LakelogError | None:
    """Why the topic refuses this record, or None."""
    if topic is None:
        return UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    if not 0 <= partition < topic.partitions:
        return UnknownTopicOrPartitionError(
            f"partition {partition} of topic {name!r} does not exist (the topic has {topic.partitions})"
        )
    if size > topic.max_message_bytes:
        return RecordTooLargeError(
            f"record of {size} bytes for topic {name!r} is larger than its max.message.bytes={topic.max_message_bytes}"
        )
    return None


class Producer:
    """Sends records to a store's topics. Thread-safe; use as a context manager."""

    def __init__(self, store: LogStore, config: Mapping[str, Any]) -> None:
        self._config = resolve_config(PRODUCER_CONFIG_KEYS, config, what="producer config")
        cfg = self._config
        if cfg["retry.backoff.max.ms"] < cfg["retry.backoff.ms"]:
            raise InvalidConfigError("retry.backoff.max.ms must not be below retry.backoff.ms")
        number = next(_producer_ids)
        self.client_id = cfg["client.id"] or f"producer-{number}"
        self.producer_id = random.getrandbits(62)
        self._store = store
        self._writer: LogWriter = store._new_writer(self.client_id)
        self._policy = RetryPolicy(
            retries=cfg["retries"],
            backoff_ms=cfg["retry.backoff.ms"],
            backoff_max_ms=cfg["retry.backoff.max.ms"],
            timeout_ms=cfg["delivery.timeout.ms"],
        )
        self._keyless = KeylessPartitioner(cfg["batch.num.messages"], cfg["batch.size"])
        self._sequences: dict[TopicPartition, int] = defaultdict(int)
        self._topics: dict[str, TopicMetadata] = {}
        self._topics_read_at = 0.0
        self._cond = threading.Condition()
        self._pending: list[_Pending] = []
        self._pending_bytes = 0
        self._first_pending_at = 0.0
        self._in_flight = 0
        self._flush_requests = 0
        self._closing = False
        self._closed = False
        self._sender = threading.Thread(target=self._run, name=f"lakelog-sender-{self.client_id}", daemon=True)
        self._sender.start()

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    # -- metadata ----------------------------------------------------------

    def _topic(self, name: str, partition: int | None) -> TopicMetadata | None:
        stale = time.monotonic() - self._topics_read_at > self._config["metadata.max.age.ms"] / 1000
        topic = self._topics.get(name)
        if stale or topic is None or (partition is not None and partition >= topic.partitions):
            self._topics = self._store._latest_topics()
            self._topics_read_at = time.monotonic()
            topic = self._topics.get(name)
        return topic

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic`` (UnknownTopicOrPartitionError if it does not exist)."""
        meta = self._topic(topic, None)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return list(range(meta.partitions))

    # -- sending -----------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp: Any = None,
    ) -> RecordFuture:
        """Queue a record; the future completes when its commit lands.

        Raises ProducerClosedError after close(), InvalidRecordError for
        arguments of the wrong type. Unknown topics or partitions, and records
        over ``max.message.bytes``, fail the returned future.
        """
        if self._closing:
            raise ProducerClosedError("cannot send: the producer is closed")
        key_bytes = to_bytes(key, "key")
        value_bytes = to_bytes(value, "value")
        header_list = to_headers(headers)
        timestamp_ms = to_timestamp_ms(timestamp)
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
            raise UnknownTopicOrPartitionError(f"partition must be an int, got {partition!r}")
        future = RecordFuture()
        size = record_size(key_bytes, value_bytes, header_list)
        meta = self._topic(topic, partition)
        if partition is None and meta is not None:
            if key_bytes is not None and not self._config["partitioner.ignore.keys"]:
                partition = partition_for_key(key_bytes, meta.partitions)
            else:
                partition = self._keyless.partition(topic, meta.partitions, size)
        error = check_record(meta, topic, partition if partition is not None else 0, size)
        if error is not None:
            future._fail(error)
            return future
        deadline = time.monotonic() + self._config["max.block.ms"] / 1000
        with self._cond:
            while self._pending_bytes + size > self._config["buffer.memory"] and self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closing:
                    future._fail(
                        DeliveryTimeoutError(
                            f"buffer.memory ({self._config['buffer.memory']} bytes) stayed full for max.block.ms"
                        )
                    )
                    return future
                self._cond.wait(remaining)
            tp = TopicPartition(topic, partition)
            sequence = self._sequences[tp]
            self._sequences[tp] = sequence + 1
            self._pending.append(
                _Pending(topic, partition, key_bytes, value_bytes, header_list, timestamp_ms, size, sequence, future)
            )
            self._pending_bytes += size
            if self._batch_full():
                self._cond.notify_all()
            elif len(self._pending) == 1:
                self._first_pending_at = time.monotonic()
                self._cond.notify_all()
        return future

    def _batch_full(self) -> bool:
        return (
            self._pending_bytes >= self._config["batch.size"]
            or len(self._pending) >= self._config["batch.num.messages"]
        )

    def flush(self, timeout: float | None = None) -> None:
        """Commit everything sent so far and wait until it is acknowledged or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flush_requests += 1
            self._cond.notify_all()
            try:
                while self._pending or self._in_flight:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise DeliveryTimeoutError(f"flush did not complete within {timeout} s")
                    self._cond.wait(remaining)
            finally:
                self._flush_requests -= 1

    def close(self, timeout: float | None = None) -> None:
        """Send what is pending, then stop. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closing = True
            self._cond.notify_all()
        self._sender.join(timeout)
        if self._sender.is_alive():
            raise DeliveryTimeoutError(f"producer did not finish sending within {timeout} s")
        self._closed = True

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the sender thread ---------------------------------------------------

    def _take_batch(self) -> list[_Pending] | None:
        """Wait for a batch to be due and take it; None when closing with nothing left."""
        linger = self._config["linger.ms"] / 1000
        with self._cond:
            while True:
                if self._pending:
                    due = self._first_pending_at + linger
                    if self._batch_full() or self._flush_requests or self._closing or time.monotonic() >= due:
                        break
                    self._cond.wait(max(0.0, due - time.monotonic()))
                elif self._closing:
                    return None
                else:
                    self._cond.wait()
            taken, size = [], 0
            limit_bytes, limit_count = self._config["batch.size"], self._config["batch.num.messages"]
            for record in self._pending:
                if taken and (size + record.size > limit_bytes or len(taken) >= limit_count):
                    break
                taken.append(record)
                size += record.size
            self._pending = self._pending[len(taken) :]
            self._pending_bytes -= size
            self._first_pending_at = time.monotonic()
            self._in_flight = len(taken)
            self._cond.notify_all()
            return taken

    def _run(self) -> None:
        while True:
            records = self._take_batch()
            if records is None:
                return
            self._keyless.next_batch()
            batch = ProducerBatch(self._store.spark, records, self.producer_id)
            try:
                result = self._writer.append(batch, self._policy)
                if result.version is not None:
                    batch.complete(result.ranges, result.append_time_ms)
            except BaseException as exc:  # every record learns why it failed
                log.warning("batch of %d records failed: %s", len(batch.records), exc)
                batch.fail(exc)
            finally:
                with self._cond:
                    self._in_flight = 0
                    self._cond.notify_all()
