"""Kafka's transactional producer over Delta commits.

A transaction is buffered on the client and becomes exactly one Delta
commit at ``commit_transaction``: its records in every topic and partition
plus, from ``send_offsets_to_transaction``, the group's offset records in
``__consumer_offsets``. So all of it is visible or none of it, and an
aborted or still-open transaction never reaches the table: every reader is
``read_committed`` and there are no transaction markers or LSO to wait for
(deviation from Kafka: records of a transaction are not sent before the
commit, so a transaction must fit in the client's memory).

Fencing: the transactional id is a Delta application transaction
``lakelog-txn-<transactional.id>`` whose version is ``epoch << 32 | sequence``.
``init_transactions`` commits the next epoch; every transaction commit reads
the id (Delta then fails it with ConcurrentTransactionException if the id
changed concurrently) and refuses to commit unless the id is still at its
own epoch -- so after a newer instance initialised, the old one's commit
fails with ProducerFencedError and none of its records become visible. The
same version makes a retried commit after an unknown outcome land at most
once. The id's record expires with ``delta.setTransactionRetentionDuration``
(7 days), like Kafka's ``transactional.id.expiration.ms``; after that an
old instance counts as fenced (its epoch is gone) and a new one starts at epoch 0.

Offsets sent with a consumer's ``group_metadata()`` are only committed if
that member is still in the group's current generation (Kafka's KIP-447):
a zombie consumer-producer pair cannot commit a stale read.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from lakelog.engine.arrow_columns import empty_table
from lakelog.engine.client_config import PRODUCER_CONFIG_KEYS
from lakelog.engine.commit import AppTransaction, RetryPolicy
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.commit.state import TableState
from lakelog.engine.config import resolve_config
from lakelog.engine.consume.consumer import ConsumerGroupMetadata
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import (
    InvalidConfigError,
    InvalidTxnStateError,
    LakelogError,
    ProducerFencedError,
    TransactionAbortedError,
)
from lakelog.engine.groups.coordinator import GroupLog, check_group_commit, check_offsets_to_commit, offset_records
from lakelog.engine.groups.offsets_topic import OffsetAndMetadata, check_group_id, partition_for_group
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.produce.partitioner import KeylessPartitioner
from lakelog.engine.produce.placement import outgoing_record
from lakelog.engine.produce.record_queue import RecordFuture
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.topics import OFFSETS_TOPIC, TopicMetadata, TopicPartition

log = logging.getLogger(__name__)

_EPOCH_SHIFT = 32
_SEQUENCE_MASK = (1 << _EPOCH_SHIFT) - 1


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    FENCED = "fenced"
    CLOSED = "closed"


# The Delta app id prefix of transactional ids (``lakelog-txn-<transactional.id>``).
TXN_APP_PREFIX = "lakelog-txn-"


def app_id_for(transactional_id: str) -> str:
    return f"{TXN_APP_PREFIX}{transactional_id}"


def producer_id_for(transactional_id: str) -> int:
    """The producer id of a transactional id: the same in every process (a digest of the id,
    not Python's per-process ``hash``), so that the producer ids the rows of its transactions
    carry, ``lakelog serve``'s InitProducerId and DescribeTransactions agree wherever asked."""
    digest = hashlib.blake2b(app_id_for(transactional_id).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << 62) - 1)


def epoch_of(version: int) -> int:
    return -1 if version < 0 else version >> _EPOCH_SHIFT


class _EpochBump:
    """``init_transactions``: commit the next epoch of the transactional id (no records)."""

    operation = "init_transactions"
    commit_when_empty = True

    def __init__(self, app_id: str) -> None:
        self.app_transaction = AppTransaction(app_id, 0, replan=True)
        self.epoch = 0

    @property
    def app_transactions(self) -> tuple[AppTransaction, ...]:
        return (self.app_transaction,)

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        self.epoch = epoch_of(committed[self.app_transaction.app_id]) + 1
        self.app_transaction = AppTransaction(self.app_transaction.app_id, self.epoch << _EPOCH_SHIFT, replan=True)

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        return {}

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        return []

    def build(self, ends: Any, topics: Any, append_time_ms: int) -> Any:
        return empty_table(LOG_ARROW_SCHEMA)


class TransactionBatch(ProducerBatch):
    """One transaction's records (and offset records) as one commit, fenced by epoch
    and, for offsets, by the consumer group's generation."""

    operation = "transaction"

    def __init__(
        self,
        records: RecordBatch,
        producer_id: int,
        app: AppTransaction,
        epoch: int,
        transactional_id: str,
        group: tuple[GroupLog, ConsumerGroupMetadata] | None,
    ) -> None:
        super().__init__(records, producer_id, app, producer_epoch=epoch)
        self._epoch = epoch
        self._transactional_id = transactional_id
        self._group = group

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        committed_app_version = committed[self.app_transaction.app_id]  # type: ignore[union-attr]
        if epoch_of(committed_app_version) != self._epoch:
            raise ProducerFencedError(
                f"transactional id {self._transactional_id!r} is at epoch {epoch_of(committed_app_version)}, "
                f"this producer has epoch {self._epoch}: a newer instance called init_transactions(); "
                "nothing of this transaction was committed"
            )
        if self._group is not None:
            group_log, meta = self._group
            # The group's state is what the check needs, not its offsets (check_group_commit).
            records = group_log.latest(view, offsets=False)
            now_ms = int(time.time() * 1000)
            check_group_commit(
                group_log,
                records,
                meta.generation,
                meta.member_id,
                now_ms,
                instance_id=meta.group_instance_id,
                transactional=True,
            )

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        counts = super().prepare(view)
        if self.records.record_errors:
            index, error = next(iter(sorted(self.records.record_errors.items())))
            raise InvalidTxnStateError(
                f"record {index} of the transaction cannot be written ({error}); abort the transaction"
            ) from error
        return counts


class TransactionalProducer:
    """A producer whose sends between ``begin_transaction`` and ``commit_transaction``
    commit atomically. Thread-safe; one transaction at a time."""

    def __init__(self, context: StoreContext, transactional_id: str, config: Mapping[str, Any]) -> None:
        if not isinstance(transactional_id, str) or not transactional_id:
            raise InvalidConfigError(f"transactional.id must be a non-empty string, got {transactional_id!r}")
        self._config = resolve_config(PRODUCER_CONFIG_KEYS, config, what="producer config")
        if not self._config["enable.idempotence"]:
            raise InvalidConfigError("a transactional producer needs enable.idempotence=true")
        self.transactional_id = transactional_id
        self.client_id = self._config["client.id"] or f"txn-{transactional_id}"
        self._context = context
        self._writer = context.committer(self.client_id)
        self._records_reader = PartitionReader(context.uri)
        self._app_id = app_id_for(transactional_id)
        self._policy = RetryPolicy(
            retries=self._config["retries"],
            backoff_ms=self._config["retry.backoff.ms"],
            backoff_max_ms=self._config["retry.backoff.max.ms"],
            timeout_ms=self._config["delivery.timeout.ms"],
        )
        self._keyless = KeylessPartitioner(self._config["batch.num.messages"], self._config["batch.size"])
        self._lock = threading.Lock()
        self.state = TransactionState.UNINITIALIZED
        self.epoch = -1
        self._sequence = 0
        self.producer_id = 0
        self._batch: RecordBatch | None = None
        self._send_error: BaseException | None = None
        self._offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self._group: ConsumerGroupMetadata | None = None
        self._group_logs: dict[tuple[str, int], GroupLog] = {}

    # -- lifecycle --------------------------------------------------------------

    def init_transactions(self) -> None:
        """Register this instance as the transactional id's owner (a new epoch).

        Fences every older instance with the same id. Raises
        InvalidTxnStateError when called twice.
        """
        with self._lock:
            if self.state is not TransactionState.UNINITIALIZED:
                raise InvalidTxnStateError(f"init_transactions() in state {self.state.value}")
            bump = _EpochBump(self._app_id)
            self._writer.append(bump, self._policy)
            self.epoch = bump.epoch
            self.producer_id = producer_id_for(self.transactional_id)
            self.state = TransactionState.READY

    def begin_transaction(self) -> None:
        with self._lock:
            self._require(TransactionState.READY, "begin_transaction()")
            self._batch = RecordBatch()
            self._send_error = None
            self._offsets = {}
            self._group = None
            self.state = TransactionState.IN_TRANSACTION

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp: Any = None,
    ) -> RecordFuture:
        """Add a record to the open transaction; its future completes at commit (or fails at abort).

        A topic that does not exist is created first when the store's
        ``auto.create.topics.enable`` is true (as for :meth:`engine.produce.producer.Producer.send`);
        otherwise, or when it cannot be created, the future fails and so will the commit.
        """
        with self._lock:
            self._require(TransactionState.IN_TRANSACTION, "send()")
            meta = self._topic(topic)
            if isinstance(meta, RecordFuture):
                return meta
            return self._add(topic, meta, value, key, partition, headers, timestamp)

    def send_all(
        self, topic: str, partition: int | None, records: Iterable[tuple[Any, Any, Any, Any]]
    ) -> list[RecordFuture]:
        """:meth:`send` of each ``(key, value, headers, timestamp)`` of ``records`` to ``topic``
        (``partition``, or partitioned as send() does when None), in order, with the topic looked
        up once rather than once per record (a look at the log each): a Kafka client's
        transactional produce request holds a batch of records for one partition. The futures
        fail as send()'s would (and then so will the commit)."""
        with self._lock:
            self._require(TransactionState.IN_TRANSACTION, "send_all()")
            meta = self._topic(topic)
            if isinstance(meta, RecordFuture):
                return [meta for _ in records]
            return [
                self._add(topic, meta, value, key, partition, headers, timestamp)
                for key, value, headers, timestamp in records
            ]

    def _topic(self, topic: str) -> TopicMetadata | RecordFuture | None:
        """The topic's metadata (None if it does not exist), auto-created first when the store
        allows; a failed future when its creation was refused or failed (noted as the
        transaction's send error)."""
        meta = self._context.latest_topics().get(topic)
        if meta is None and isinstance(topic, str):
            try:
                if self._context.auto_create_topics([topic]):
                    meta = self._context.latest_topics().get(topic)
            except LakelogError as exc:  # the name was refused or the creation failed to commit
                self._send_error = self._send_error or exc
                return RecordFuture(error=exc)
        return meta

    def _add(
        self,
        topic: str,
        meta: TopicMetadata | None,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Any,
        timestamp: Any,
    ) -> RecordFuture:
        record = outgoing_record(
            topic,
            meta,
            value,
            key,
            partition,
            headers,
            timestamp,
            keyless=self._keyless,
            ignore_keys=self._config["partitioner.ignore.keys"],
        )
        if record.error is not None:
            self._send_error = self._send_error or record.error
            return RecordFuture(error=record.error)
        assert self._batch is not None and record.partition is not None
        tp = TopicPartition(topic, record.partition)
        index = self._batch.add(
            tp, record.key, record.value, record.headers, record.timestamp_ms, record.size, len(self._batch)
        )
        return RecordFuture(self._batch, index)

    def send_offsets_to_transaction(
        self, offsets: Mapping[Any, Any], group_metadata: ConsumerGroupMetadata | str
    ) -> None:
        """Commit ``offsets`` (next offset to read per partition) for the group with the transaction.

        Pass the consumer's ``group_metadata()`` so a consumer fenced by a
        rebalance cannot commit (a plain group id skips that check). Raises
        UnknownTopicOrPartitionError for a partition that does not exist and
        InvalidOffsetError for an offset that is not a non-negative int; then
        nothing of ``offsets`` joins the transaction, which stays usable.
        """
        meta = (
            group_metadata
            if isinstance(group_metadata, ConsumerGroupMetadata)
            else ConsumerGroupMetadata(group_metadata)
        )
        check_group_id(meta.group_id, "group id")
        with self._lock:
            self._require(TransactionState.IN_TRANSACTION, "send_offsets_to_transaction()")
            if self._group is not None and self._group.group_id != meta.group_id:
                raise InvalidTxnStateError("one transaction commits offsets of one consumer group")
            chosen = {
                (key if isinstance(key, TopicPartition) else TopicPartition(*key)): (
                    value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                )
                for key, value in offsets.items()
            }
            check_offsets_to_commit(chosen, self._context.latest_topics())
            self._offsets.update(chosen)
            self._group = meta

    def commit_transaction(self) -> None:
        """Commit everything sent in the transaction as one Delta commit.

        Raises ProducerFencedError (fatal; nothing committed),
        CommitFailedError when the consumer group moved to a new generation
        (abort and re-read), InvalidTxnStateError when a send of the
        transaction failed (abort), RetriableError / CommitStateUnknownError
        as any commit.
        """
        with self._lock:
            self._require(TransactionState.IN_TRANSACTION, "commit_transaction()")
            if self._send_error is not None:
                raise InvalidTxnStateError(
                    f"a send of this transaction failed ({self._send_error}); call abort_transaction()"
                )
            batch = self._batch
            assert batch is not None
            group = None
            if self._group is not None and self._offsets:
                partitions = self._context.ensure_offsets_topic()
                group_tp = TopicPartition(OFFSETS_TOPIC, partition_for_group(self._group.group_id, partitions))
                now = int(time.time() * 1000)
                for key, value in offset_records(
                    self._group.group_id,
                    self._offsets,
                    self._group.generation,
                    self._group.member_id,
                    now,
                    self._context.latest_topics(),
                ):
                    batch.add(group_tp, key, value, None, now, len(key) + len(value), len(batch))
                group = (self._group_log(self._group.group_id, partitions), self._group)
            if not len(batch):
                batch.complete(None, {})  # type: ignore[arg-type]
                self.state = TransactionState.READY
                return
            self._sequence += 1
            app = AppTransaction(self._app_id, (self.epoch << _EPOCH_SHIFT) | (self._sequence & _SEQUENCE_MASK))
            commit = TransactionBatch(batch, self.producer_id, app, self.epoch, self.transactional_id, group)
            try:
                self._writer.append(commit, self._policy)
            except ProducerFencedError:
                self.state = TransactionState.FENCED
                batch.fail(ProducerFencedError("the transaction was fenced"))
                raise
            except LakelogError:
                raise  # still in the transaction: the caller may retry the commit or abort
            commit.complete()
            self.state = TransactionState.READY

    def _group_log(self, group_id: str, partitions: int) -> GroupLog:
        """The group's log, kept from one commit to the next: it reads on from where it stopped,
        where a new one would read the group's whole ``__consumer_offsets`` partition."""
        found = self._group_logs.get((group_id, partitions))
        if found is None:
            found = GroupLog(self._context.log, self._records_reader, group_id, partitions)
            self._group_logs[(group_id, partitions)] = found
        return found

    def abort_transaction(self) -> None:
        """Drop the open transaction: none of its records or offsets are ever visible."""
        with self._lock:
            self._require(TransactionState.IN_TRANSACTION, "abort_transaction()")
            if self._batch is not None and not self._batch.done:
                self._batch.fail(TransactionAbortedError("the transaction was aborted"))
            self._batch = None
            self._offsets = {}
            self._group = None
            self.state = TransactionState.READY

    def close(self) -> None:
        """Abort an open transaction and stop. Idempotent."""
        with self._lock:
            if self.state is TransactionState.IN_TRANSACTION and self._batch is not None and not self._batch.done:
                self._batch.fail(TransactionAbortedError("the producer was closed during the transaction"))
            self.state = TransactionState.CLOSED

    def __enter__(self) -> TransactionalProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self, state: TransactionState, call: str) -> None:
        if self.state is TransactionState.FENCED:
            raise ProducerFencedError(f"{call}: this producer was fenced by a newer instance; close it")
        if self.state is not state:
            raise InvalidTxnStateError(f"{call} needs state {state.value}, the producer is {self.state.value}")
