"""Transactional producers: atomic multi-partition commits, fencing, exactly-once
read-process-write.

* :mod:`transactions.producer` -- Kafka's ``init_transactions`` / ``begin_transaction`` /
  ``send`` / ``send_offsets_to_transaction`` / ``commit_transaction``: a transaction is one
  Delta commit, fenced by a Delta app transaction per transactional id.

A client of the store's seam (:class:`engine.context.StoreContext`), built on the engine's
producer and groups; :meth:`lakelog.store.Store.transactional_producer` makes one.
"""

from __future__ import annotations

from lakelog.transactions.producer import TransactionalProducer, TransactionState

__all__ = ["TransactionState", "TransactionalProducer"]
