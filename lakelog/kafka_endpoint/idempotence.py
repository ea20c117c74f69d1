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
commit it once. Idempotent batches share the agent's group commits with
plain ones (:class:`ProduceGroup`): one commit may carry several in-flight
batches of one producer, each checked against the one before it. Sequences
wrap to 0 after 2**31 - 1, as Kafka's producer numbers them
(``DefaultRecordBatch.incrementSequence``) and its broker expects them
(``ProducerAppendInfo.inSequence``): a producer's next sequence and its rows'
sequences are kept wrapped, and "before" is modular (:func:`sequence_verdict`).
"""

from __future__ import annotations

import enum
import secrets
from collections.abc import Mapping
from collections.abc import Sequence as Ordered
from dataclasses import dataclass

import numpy as np

from lakelog.engine.commit import AppTransaction
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import FatalError
from lakelog.engine.produce.batches import SEQUENCE_WRAP
from lakelog.engine.produce.placement import PlacedBatch, PlacedRecords, RecordProducers


class Sequence(enum.Enum):
    NEXT = "next"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order"


def sequence_verdict(committed_next: int, base_sequence: int, count: int) -> Sequence:
    """Where a batch of ``count`` records from ``base_sequence`` stands against the next
    sequence the table expects (``committed_next``; -1: nothing committed yet, so 0).

    Sequences wrap (:data:`SEQUENCE_WRAP`), so the distance is taken modulo 2**31: a batch that
    ends at or before the expected sequence, less than half the sequence space behind it, was
    committed before (a duplicate); any other that does not start there leaves a gap or
    overlaps (out of order). A committed value past the wrap (written unwrapped) counts as
    wrapped."""
    expected = max(committed_next, 0) % SEQUENCE_WRAP
    if base_sequence == expected:
        return Sequence.NEXT
    behind = sequences_before(expected, base_sequence)
    if behind is not None and count <= behind:
        return Sequence.DUPLICATE
    return Sequence.OUT_OF_ORDER


def sequences_before(expected: int, base_sequence: int) -> int | None:
    """How many sequences ``base_sequence`` comes before ``expected``, counted across the wrap
    (:data:`SEQUENCE_WRAP`); None when it does not come before it: it is ``expected``, after it,
    or half the sequence space or more behind (taken as after it, wrapped)."""
    behind = (expected - base_sequence) % SEQUENCE_WRAP
    return behind if 0 < behind < SEQUENCE_WRAP // 2 else None


def next_sequence(base_sequence: int, count: int) -> int:
    """The sequence after a batch of ``count`` records from ``base_sequence``, wrapped."""
    return (base_sequence + count) % SEQUENCE_WRAP


def new_producer_id() -> int:
    return secrets.randbits(62) + 1


def app_id(producer_id: int, topic_id: str, partition: int) -> str:
    return f"lakelog.kafka.{producer_id}.{topic_id}.{partition}"


class DuplicateSequenceError(FatalError):
    """The batch was committed before (a retry): nothing was committed now."""


class OutOfOrderSequenceError(FatalError):
    """The batch's first sequence is not the next one the table expects (Kafka's
    OUT_OF_ORDER_SEQUENCE_NUMBER): nothing was committed."""


@dataclass(frozen=True)
class SequenceClaim:
    """One partition's batch of an idempotent producer: ``count`` records from ``base_sequence``."""

    app_id: str  # :func:`app_id` of the producer and partition
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int


def next_sequences(claims: Ordered[SequenceClaim], committed: Mapping[str, int]) -> dict[str, int]:
    """The next sequence each producer and partition expects once ``claims`` commit in their
    order, starting from the ``committed`` ones (-1: none). Raises DuplicateSequenceError or
    OutOfOrderSequenceError for the first claim that is not the next one, as Kafka's broker
    checks each batch of a producer against the one before it."""
    expected: dict[str, int] = {}
    for claim in claims:
        before = expected.get(claim.app_id, committed.get(claim.app_id, -1))
        verdict = sequence_verdict(before, claim.base_sequence, claim.count)
        if verdict is Sequence.DUPLICATE:
            raise DuplicateSequenceError(f"sequence {claim.base_sequence} was committed before")
        if verdict is Sequence.OUT_OF_ORDER:
            raise OutOfOrderSequenceError(
                f"sequence {claim.base_sequence}, expected {max(before, 0) % SEQUENCE_WRAP}: a batch is missing"
            )
        expected[claim.app_id] = next_sequence(claim.base_sequence, claim.count)
    return expected


class ProduceGroup(PlacedBatch):
    """Records of many Produce requests as one commit, plain and idempotent alike.

    ``claims[i]`` is the idempotent claim of the i-th request's records (None for a plain
    request); ``sizes[i]`` its number of records, in the order the records were placed. The
    commit sets each producer and partition's next sequence, checked in request order
    against the table in every attempt (:func:`next_sequences`), so a group holds several
    in-flight batches of one producer and two agents racing with the same batch commit it
    once. A claim that is not the next refuses the whole group (a FatalError): the caller
    commits its requests one by one so only that one fails.
    """

    def __init__(self, records: PlacedRecords, claims: Ordered[SequenceClaim | None], sizes: Ordered[int]) -> None:
        self.claims = [c for c in claims if c is not None]
        producer_ids = np.full(len(records), -1, dtype=np.int64)
        epochs = np.zeros(len(records), dtype=np.int32)
        # A plain record's sequence is its position in the group, as before idempotent ones joined.
        sequences = np.arange(len(records), dtype=np.int32)
        start = 0
        for claim, size in zip(claims, sizes, strict=True):
            if claim is not None:
                producer_ids[start : start + size] = claim.producer_id
                epochs[start : start + size] = claim.producer_epoch
                numbered = np.arange(claim.base_sequence, claim.base_sequence + size)
                sequences[start : start + size] = numbered % SEQUENCE_WRAP  # as the producer numbered them
            start += size
        super().__init__(records, None, operation="produce", producers=RecordProducers(producer_ids, epochs, sequences))
        # Only the ids count until check() plans the versions from the committed ones.
        self._apps = tuple(AppTransaction(app, 0, replan=True) for app in dict.fromkeys(c.app_id for c in self.claims))

    @property
    def app_transactions(self) -> tuple[AppTransaction, ...]:
        return self._apps

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        nexts = next_sequences(self.claims, committed)
        self._apps = tuple(AppTransaction(app, n, replan=True) for app, n in nexts.items())
