"""What the store holds about transactional ids: Kafka's ListTransactions and
DescribeTransactions without a transaction coordinator.

A transactional id lives in the log table as the Delta app transaction
``lakelog-txn-<transactional.id>`` whose version is ``epoch << 32 | sequence``
(:mod:`transactions.producer`): ``init_transactions`` sets the next epoch with sequence 0,
each committed transaction the next sequence. A transaction is buffered in its producer
until it commits as one Delta commit, so the table knows two of Kafka's states
(``TransactionState`` in Kafka's transaction coordinator): ``Empty`` (initialised, nothing
committed since) and ``CompleteCommit`` (the last transaction of the epoch committed). An
open transaction is only in the process holding it (``lakelog serve`` reports its own as
``Ongoing``); an aborted one leaves nothing, so ``CompleteAbort`` is never reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.engine.context import StoreContext
from lakelog.transactions.producer import TXN_APP_PREFIX, app_id_for, epoch_of, producer_id_for

EMPTY = "Empty"
COMPLETE_COMMIT = "CompleteCommit"
_SEQUENCE_MASK = (1 << 32) - 1


@dataclass(frozen=True)
class TransactionalIdState:
    """One transactional id as the table holds it: its producer id, current epoch, how many
    transactions that epoch committed, and Kafka's name of its state."""

    transactional_id: str
    producer_id: int
    epoch: int
    committed: int

    @property
    def state(self) -> str:
        return COMPLETE_COMMIT if self.committed else EMPTY


def _state(transactional_id: str, version: int) -> TransactionalIdState | None:
    if version < 0:
        return None
    return TransactionalIdState(
        transactional_id, producer_id_for(transactional_id), epoch_of(version), version & _SEQUENCE_MASK
    )


def describe_transactional_id(context: StoreContext, transactional_id: str) -> TransactionalIdState | None:
    """The transactional id's state at the latest version, or None when the table holds none
    (never initialised, or expired with ``delta.setTransactionRetentionDuration``)."""
    return _state(transactional_id, context.log.latest().app_version(app_id_for(transactional_id)))


def list_transactional_ids(context: StoreContext) -> list[TransactionalIdState]:
    """Every transactional id the latest version holds, by id. Reads the newest checkpoint's
    application transactions and the commits after it (a Delta snapshot cannot list them)."""
    state = context.log.latest()
    found = []
    for app_id in sorted(context.log.files.app_ids(state.version, TXN_APP_PREFIX)):
        described = _state(app_id[len(TXN_APP_PREFIX) :], state.app_version(app_id))
        if described is not None:
            found.append(described)
    return found
