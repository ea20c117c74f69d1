"""Kafka's transactional producers onto lakelog's one-commit transactions.

A transactional id's InitProducerId makes a lakelog transactional producer
of that id in the agent (:class:`TxnProxy`): its epoch bump is a Delta commit
that fences every older instance, in this agent or another. The records a
Kafka client produces in a transaction and the offsets it sends
(TxnOffsetCommit) gather in that producer; EndTxn commits them as one Delta
commit -- records and offsets visible together, or, aborted, never. So every
consumer reads committed data only (read_committed and read_uncommitted see
the same, and no control records are needed). Produce answers for
transactional batches carry base offset -1: offsets are given at EndTxn.
A retried produce request of the open transaction is recognized by its
partition and base sequence and added once (sequences wrap to 0 past 2**31 - 1,
as Kafka's producer numbers them: :mod:`kafka_endpoint.idempotence`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from lakelog.engine.consume.consumer import ConsumerGroupMetadata
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.idempotence import next_sequence, sequences_before
from lakelog.kafka_endpoint.record_batches import ProducedBatch
from lakelog.store import Store
from lakelog.transactions.producer import TransactionState


class UnknownProducerError(LookupError):
    """No transactional producer of this id and epoch here (INVALID_PRODUCER_ID_MAPPING)."""


class StaleEpochError(LookupError):
    """The client's epoch is not the current one of its transactional id (INVALID_PRODUCER_EPOCH)."""


class TxnProxy:
    """One transactional id's current producer, held in the agent."""

    def __init__(self, store: Store, transactional_id: str, timeout_ms: int = -1) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms  # the client's transaction.timeout.ms (-1: not given)
        self.producer = store.transactional_producer(transactional_id)
        self.producer.init_transactions()
        self.lock = threading.Lock()
        self._sequences: dict[TopicPartition, int] = {}
        self.started_ms = -1  # when the open transaction began (-1: none is open)

    @property
    def producer_id(self) -> int:
        return self.producer.producer_id

    @property
    def epoch(self) -> int:
        # Kafka's epoch is an int16; lakelog's grows per init: the client only echoes it back.
        return self.producer.epoch % 32_767

    def check(self, producer_id: int, epoch: int) -> None:
        if producer_id != self.producer_id:
            raise UnknownProducerError(f"producer id {producer_id} is not {self.transactional_id!r}'s")
        if epoch != self.epoch:
            raise StaleEpochError(f"epoch {epoch} of {self.transactional_id!r} is not the current {self.epoch}")

    def _begin(self) -> None:
        if self.producer.state is TransactionState.READY:
            self.producer.begin_transaction()
            self._sequences = {}
            self.started_ms = int(time.time() * 1000)

    def open_partitions(self) -> list[TopicPartition] | None:
        """The partitions the open transaction produced to, or None when none is open."""
        with self.lock:
            if self.producer.state is not TransactionState.IN_TRANSACTION:
                return None
            return sorted(self._sequences)

    def add(self) -> None:
        """AddPartitionsToTxn / AddOffsetsToTxn: the transaction is open from now on."""
        with self.lock:
            self._begin()

    def send(self, topic: str, partition: int, batches: list[ProducedBatch]) -> None:
        """The records of a transactional produce request for one partition, once."""
        tp = TopicPartition(topic, partition)
        with self.lock:
            self._begin()
            records: list[tuple[Any, Any, Any, Any]] = []
            for batch in batches:
                expected = self._sequences.get(tp, batch.base_sequence)
                if sequences_before(expected, batch.base_sequence) is not None:
                    continue  # a retried request of this transaction: already added
                self._sequences[tp] = next_sequence(batch.base_sequence, len(batch))
                records += zip(batch.keys, batch.values, batch.headers, batch.timestamps, strict=True)
            # One look at the topics for the request's records (send_all), not one per record.
            for future in self.producer.send_all(topic, partition, records):
                if future.done() and future.exception() is not None:
                    raise future.exception()

    def send_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        offsets: dict[TopicPartition, Any],
        instance_id: str | None = None,
    ) -> None:
        """Add ``offsets`` to the transaction, checked at its commit against the group as Kafka's
        TxnOffsetCommit is (generation, member id, ``group.instance.id``)."""
        if generation >= 0 or member_id or instance_id is not None:
            meta: ConsumerGroupMetadata | str = ConsumerGroupMetadata(
                group_id, generation, member_id or None, instance_id
            )
        else:
            meta = group_id
        with self.lock:
            self._begin()
            self.producer.send_offsets_to_transaction(offsets, meta)

    def end(self, commit: bool) -> None:
        with self.lock:
            if self.producer.state is not TransactionState.IN_TRANSACTION:
                return  # nothing was added: Kafka's EndTxn of an empty transaction succeeds
            if commit:
                self.producer.commit_transaction()
            else:
                self.producer.abort_transaction()

    def close(self) -> None:
        self.producer.close()
