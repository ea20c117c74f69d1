"""Transactional producers: atomic multi-partition commits, fencing, exactly-once
read-process-write. Builds on :mod:`engine`; ``engine`` never imports this package
except through ``Store.transactional_producer``."""

from __future__ import annotations

from lakelog.transactions.producer import TransactionalProducer, TransactionState

__all__ = ["TransactionState", "TransactionalProducer"]
