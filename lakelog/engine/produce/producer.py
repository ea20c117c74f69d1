"""The producer: Kafka's ``send`` / ``flush`` / ``close`` over Delta commits.

``send`` places a record in a partition (Kafka's default partitioner) and
returns a future; a background sender thread seals the pending records into
a batch when ``linger.ms`` has passed or ``batch.size`` / ``batch.num.messages``
is reached, and commits the whole batch -- any number of topics and
partitions -- as one Delta commit through the commit core (:class:`engine.commit.Committer`).

Guarantees:

* a future completes with :class:`RecordMetadata` only after the commit
  holding its record landed (``acks=all`` is the only mode);
* records of one producer to one partition get increasing offsets in send
  order: batches are committed one at a time, in order, and a batch is
  retried before the next one is started;
* a batch is all-or-nothing: it is one Delta commit;
* with ``enable.idempotence`` (the default, as in Kafka >= 3.0) a batch is
  committed at most once even when a commit attempt fails with an unknown
  outcome and is retried: each batch commit carries Delta's application
  transaction id (``txn`` action, appId ``lakelog-producer-<producer id>``,
  version = the batch's number), and a retry first reads that id's version.
  The ids expire with the table's ``delta.setTransactionRetentionDuration``
  (7 days in new stores), far beyond ``delivery.timeout.ms``.

``send`` does per record only what cannot wait: the argument checks it raises
for, the topic's refusals from the cached metadata, and one append to the open
batch's fields; it is compiled (:mod:`engine.produce.record_queue`, Cython), the
rest of the producer is this module. A record's partition (explicit, else its key's murmur2 hash,
else sticky keyless), its producer sequence and the batch's columns are made
once per batch, when the sender takes it (as Kafka's Sender assigns sequences
when it drains a batch). Per-record problems (unknown topic, partition out of
range, a record over the topic's ``max.message.bytes``) fail that record's
future and never hold back the rest of its batch, as in Kafka's Java client.
Wrong argument types and a closed producer raise from ``send`` itself. A topic
that does not exist is created on first use when the store's
``auto.create.topics.enable`` is true, as Kafka's broker creates it for the
producer's metadata request.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lakelog.engine.client_config import PRODUCER_CONFIG_KEYS
from lakelog.engine.commit import AppTransaction, Committer, RetryPolicy
from lakelog.engine.config import resolve_config
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import (
    DeliveryTimeoutError,
    InvalidConfigError,
    LakelogError,
    ProducerClosedError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.produce.batches import (
    BatchFuture,
    PlacedEntry,
    ProducerBatch,
    RecordBatch,
    check_record,
)
from lakelog.engine.produce.partitioner import KeylessPartitioner
from lakelog.engine.produce.placement import PlacedBatch, columns_for_batch, place_queued, place_records
from lakelog.engine.produce.record_queue import SendPath
from lakelog.engine.topics import TopicMetadata, TopicPartition

log = logging.getLogger(__name__)

_producer_ids = itertools.count(1)


def _expire(batch: RecordBatch | PlacedEntry, timeout_ms: int) -> None:
    """Fail a batch that never reached a commit within its delivery timeout (nothing written)."""
    error = DeliveryTimeoutError(
        f"{len(batch.records) if isinstance(batch, PlacedEntry) else len(batch)} record(s) expired: "
        f"not sent within delivery.timeout.ms ({timeout_ms} ms); nothing of them was committed"
    )
    log.warning("%s", error)
    if isinstance(batch, PlacedEntry):
        batch.future.fail(error)
    else:
        batch.fail(error)


class Producer(SendPath):
    """Sends records to a store's topics. Thread-safe; use as a context manager."""

    def __init__(self, context: StoreContext, config: Mapping[str, Any]) -> None:
        self._config = resolve_config(PRODUCER_CONFIG_KEYS, config, what="producer config")
        cfg = self._config
        if cfg["retry.backoff.max.ms"] < cfg["retry.backoff.ms"]:
            raise InvalidConfigError("retry.backoff.max.ms must not be below retry.backoff.ms")
        if cfg["delivery.timeout.ms"] < cfg["linger.ms"]:
            # Kafka requires delivery.timeout.ms >= linger.ms + request.timeout.ms; a commit here has
            # no request timeout of its own (its retries are bounded by delivery.timeout.ms).
            raise InvalidConfigError(
                f"delivery.timeout.ms ({cfg['delivery.timeout.ms']}) must be at least linger.ms "
                f"({cfg['linger.ms']}): every record would expire before its batch is sent"
            )
        self.client_id = cfg["client.id"] or f"producer-{next(_producer_ids)}"
        self.producer_id = random.getrandbits(62)
        self._context = context
        self._writer: Committer = context.committer(self.client_id)
        self._policy = RetryPolicy(
            retries=cfg["retries"],
            backoff_ms=cfg["retry.backoff.ms"],
            backoff_max_ms=cfg["retry.backoff.max.ms"],
            timeout_ms=cfg["delivery.timeout.ms"],
        )
        self._batches_committed = 0
        self._keyless = KeylessPartitioner(cfg["batch.num.messages"], cfg["batch.size"])
        self._sequences: dict[TopicPartition, int] = {}  # next sequence per partition; the sender's
        self._topics: dict[str, TopicMetadata] = {}
        self._topics_read_at = 0.0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buffer_memory: int = cfg["buffer.memory"]
        self._batch_size: int = cfg["batch.size"]
        self._batch_last_index: int = cfg["batch.num.messages"] - 1
        self._open: RecordBatch | None = None  # accepting records
        self._sealed: deque[RecordBatch] = deque()  # waiting for the sender
        self._in_flight: RecordBatch | None = None
        self._buffered_bytes = 0  # open + sealed + in flight
        self._flush_requests = 0
        self._closing = False
        self._closed = False
        self._sender_done = False
        self._sender = threading.Thread(target=self._run, name=f"lakelog-sender-{self.client_id}", daemon=True)
        self._sender.start()
        # Kafka's Sender expires queued batches even while a request is in flight; here the
        # sender thread may sit in one commit for long, so another thread does it.
        self._reaper = threading.Thread(target=self._reap, name=f"lakelog-expiry-{self.client_id}", daemon=True)
        self._reaper.start()

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    # -- metadata ----------------------------------------------------------

    def _topic(self, name: str, partition: int | None) -> TopicMetadata | None:
        stale = time.monotonic() - self._topics_read_at > self._config["metadata.max.age.ms"] / 1000
        topic = self._topics.get(name)
        if stale or topic is None or (partition is not None and partition >= topic.partitions):
            self._topics = self._context.latest_topics()
            self._topics_read_at = time.monotonic()
            topic = self._topics.get(name)
            # Kafka's producer learns a topic from a metadata request, which creates a missing
            # one when the broker's auto.create.topics.enable allows it; the store's setting here.
            if topic is None and self._context.auto_create_topics([name]):
                self._topics = self._context.latest_topics()
                topic = self._topics.get(name)
        return topic

    def _refusal(self, topic: str, partition: int | None, size: int) -> LakelogError | None:
        """Why ``topic`` refuses a record of ``size`` bytes for ``partition`` (None: the
        partitioner's choice), looking at the store again for a topic or partition the cached
        metadata does not know yet; None if it takes it."""
        try:
            meta = self._topic(topic, partition)
        except LakelogError as exc:  # auto-creation refused the name or failed to commit
            return exc
        if meta is None:
            return UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return check_record(meta, topic, 0 if partition is None else partition, size)

    def _fresh_topics(self) -> dict[str, TopicMetadata]:
        """The topics, read again when older than ``metadata.max.age.ms`` (the sender's look
        before it places a batch, as Kafka's Sender keeps the metadata fresh)."""
        if time.monotonic() - self._topics_read_at > self._config["metadata.max.age.ms"] / 1000:
            self._topics = self._context.latest_topics()
            self._topics_read_at = time.monotonic()
        return self._topics

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic``, created first if it does not exist and the store's
        ``auto.create.topics.enable`` is true. Raises UnknownTopicOrPartitionError if it does not
        exist (and was not created), InvalidTopicError for a name that cannot be created."""
        meta = self._topic(topic, None)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return list(range(meta.partitions))

    # -- sending -----------------------------------------------------------

    def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        *,
        partition: int | None = None,
        headers: Any = None,
        timestamps: Any = None,
    ) -> BatchFuture:
        """Queue many records of one topic at once, given as columns; one future for all.

        ``values`` (and ``keys``, ``headers``, ``timestamps`` in ms, each
        None or one entry per record) are sequences or Arrow arrays. Records
        are placed exactly as ``send`` would place them one by one (an
        explicit ``partition``, else the key's hash, else sticky keyless
        runs) and keep their order within each partition, after the records
        sent before the call. The batch is committed whole or not at all; its
        future gives every record's partition and offset (numpy arrays) once
        the commit landed. A missing topic is auto-created as for ``send``.
        What ``send`` refuses per record (unknown topic, partition out of range,
        over ``max.message.bytes``) fails the whole batch's future; wrong
        argument types and a closed producer raise.
        """
        if self._closing:
            raise ProducerClosedError("cannot send: the producer is closed")
        table = columns_for_batch(topic, values, keys, partition, headers, timestamps)
        try:
            meta = self._topic(topic, partition)
            placed = place_records(self._context.log.latest(), [table]) if meta is not None else None
        except LakelogError as exc:
            return BatchFuture(error=exc)
        if placed is None:
            return BatchFuture(error=UnknownTopicOrPartitionError(f"topic {topic!r} does not exist"))
        entry = PlacedEntry(placed, int(placed.sizes.sum()))
        with self._cond:
            full = self._wait_for_buffer(entry.bytes)
            if full is not None:
                return BatchFuture(error=full)
            self._seal()  # records sent before go first
            self._sealed.append(entry)
            self._buffered_bytes += entry.bytes
            self._cond.notify_all()
        return entry.future

    def _new_batch(self) -> RecordBatch:
        """A batch for send() to open (the compiled send path holds no Python class itself)."""
        return RecordBatch()

    def _wait_for_buffer(self, size: int) -> DeliveryTimeoutError | None:
        """Wait (lock held) until ``size`` more bytes fit in ``buffer.memory``; the error if
        they did not within ``max.block.ms``."""
        deadline = time.monotonic() + self._config["max.block.ms"] / 1000
        while self._buffered_bytes + size > self._config["buffer.memory"] and self._buffered_bytes:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closing:
                return DeliveryTimeoutError(
                    f"buffer.memory ({self._config['buffer.memory']} bytes) stayed full for max.block.ms"
                )
            self._cond.wait(remaining)
        return None

    def _seal(self) -> None:
        """Close the open batch to new records (call with the lock held)."""
        if self._open is not None:
            self._sealed.append(self._open)
            self._open = None
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> None:
        """Commit everything sent so far and wait until it is acknowledged or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flush_requests += 1
            try:
                while self._open is not None or self._sealed or self._in_flight is not None:
                    self._seal()
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

    def _expired(self, now: float) -> list[RecordBatch | PlacedEntry]:
        """Take the queued batches (open or sealed, never the one in flight) whose first record
        was sent more than delivery.timeout.ms ago out of the queue (lock held)."""
        limit = self._config["delivery.timeout.ms"] / 1000
        expired = [b for b in self._sealed if now - b.created >= limit]
        if expired:
            self._sealed = deque(b for b in self._sealed if now - b.created < limit)
        if self._open is not None and now - self._open.created >= limit:
            expired.append(self._open)
            self._open = None
        for batch in expired:
            self._buffered_bytes -= batch.bytes
        if expired:
            self._cond.notify_all()
        return expired

    def _reap(self) -> None:
        """Fail queued batches as their delivery timeout passes, until the sender stopped."""
        limit = self._config["delivery.timeout.ms"] / 1000
        while True:
            with self._cond:
                if self._sender_done:
                    return
                expired = self._expired(time.monotonic())
                if not expired:
                    queued = [b.created for b in self._sealed] + ([self._open.created] if self._open else [])
                    self._cond.wait(max(0.0, min(queued) + limit - time.monotonic()) if queued else None)
                    continue
            for batch in expired:
                _expire(batch, self._config["delivery.timeout.ms"])

    def _take_batch(self) -> RecordBatch | PlacedEntry | None:
        """Wait for a batch to be due and take it; None when closing with nothing left."""
        linger = self._config["linger.ms"] / 1000
        with self._cond:
            while not self._sealed:
                if self._open is not None:
                    due = self._open.created + linger
                    if self._flush_requests or self._closing or time.monotonic() >= due:
                        self._seal()
                        break
                    self._cond.wait(max(0.0, due - time.monotonic()))
                elif self._closing:
                    return None
                else:
                    self._cond.wait()
            self._in_flight = self._sealed.popleft()
            return self._in_flight

    def _run(self) -> None:
        while True:
            records = self._take_batch()
            if records is None:
                with self._cond:
                    self._sender_done = True
                    self._cond.notify_all()
                return
            left_ms = int((records.created - time.monotonic()) * 1000) + self._config["delivery.timeout.ms"]
            if left_ms <= 0:
                _expire(records, self._config["delivery.timeout.ms"])
                with self._cond:
                    self._in_flight = None
                    self._buffered_bytes -= records.bytes
                    self._cond.notify_all()
                continue
            # The commit's retries get what is left of the records' delivery timeout.
            policy = replace(self._policy, timeout_ms=left_ms)
            self._keyless.next_batch()
            self._batches_committed += 1
            app = (
                AppTransaction(f"lakelog-producer-{self.producer_id}", self._batches_committed)
                if self._config["enable.idempotence"]
                else None
            )
            try:
                if isinstance(records, PlacedEntry):
                    placed = PlacedBatch(records.records, app, operation="produce", producer_id=self.producer_id)
                    try:
                        self._writer.append(placed, policy)
                        records.future.complete(placed)
                    except BaseException as exc:
                        log.warning("batch of %d records failed: %s", len(records.records), exc)
                        records.future.fail(exc)
                    continue
                try:
                    place_queued(
                        records,
                        self._fresh_topics(),
                        self._keyless,
                        self._sequences,
                        ignore_keys=self._config["partitioner.ignore.keys"],
                    )
                    batch = ProducerBatch(records, self.producer_id, app)
                    self._writer.append(batch, policy)
                    batch.complete()
                except BaseException as exc:  # every record learns why it failed
                    log.warning("batch of %d records failed: %s", len(records), exc)
                    records.fail(exc)
            finally:
                with self._cond:
                    self._in_flight = None
                    self._buffered_bytes -= records.bytes
                    self._cond.notify_all()
