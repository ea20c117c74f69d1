"""Kafka's idempotent producer over the commit core: a batch is committed at most once.

A producer id comes from InitProducerId (random 63 bits, epoch 0: ids never
need to be coordinated between agents). Each partition's batch of a Produce
request carries (producer id, base sequence, record count). Its commit sets
the Delta application transaction ``lakelog.kafka.<producer id>.<topic
id>.<partition>`` to the next sequence expected (base + count), as Kafka's
broker keeps the last sequence per producer and partition -- but in the
table, so every agent of a store sees it and a retry through another agent
is recognized. :func:`sequence_verdict` decides, against the committed
value, whether a batch is the next one, a duplicate (answered with the
offsets it got the first time, read back from the rows, which keep producer
id and sequence) or out of order (OUT_OF_ORDER_SEQUENCE_NUMBER); the check
runs inside the commit loop, so two agents racing with the same batch
commit it once.
"""

from __future__ import annotations

import enum
import secrets

from lakelog.engine.commit import AppTransaction
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import FatalError
from lakelog.engine.produce.placement import PlacedBatch, PlacedRecords


class Sequence(enum.Enum):
    NEXT = "next"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order"


def sequence_verdict(committed_next: int, base_sequence: int, count: int) -> Sequence:
    """Where a batch of ``count`` records from ``base_sequence`` stands against the next
    sequence the table expects (``committed_next``; -1: nothing committed yet, so 0)."""
    expected = max(committed_next, 0)
    if base_sequence == expected:
        return Sequence.NEXT
    if base_sequence < expected and base_sequence + count <= expected:
        return Sequence.DUPLICATE
    return Sequence.OUT_OF_ORDER


def new_producer_id() -> int:
    return secrets.randbits(62) + 1


def app_id(producer_id: int, topic_id: str, partition: int) -> str:
    return f"lakelog.kafka.{producer_id}.{topic_id}.{partition}"


class DuplicateSequenceError(FatalError):
    """The batch was committed before (a retry): nothing was committed now."""


class OutOfOrderSequenceError(FatalError):
    """The batch's first sequence is not the next one the table expects (Kafka's
    OUT_OF_ORDER_SEQUENCE_NUMBER): nothing was committed."""


class SequencedBatch(PlacedBatch):
    """One partition's records of an idempotent producer's batch."""

    def __init__(self, records: PlacedRecords, producer_id: int, epoch: int, base_sequence: int, app: str) -> None:
        super().__init__(
            records,
            AppTransaction(app, base_sequence + len(records), replan=True),
            operation="produce",
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=base_sequence,
        )

    def check(self, committed_app_version: int, view: TableState) -> None:
        verdict = sequence_verdict(committed_app_version, self.base_sequence, len(self.records))
        if verdict is Sequence.DUPLICATE:
            raise DuplicateSequenceError(f"sequence {self.base_sequence} was committed before")
        if verdict is Sequence.OUT_OF_ORDER:
            raise OutOfOrderSequenceError(
                f"sequence {self.base_sequence}, expected {max(committed_app_version, 0)}: a batch is missing"
            )
