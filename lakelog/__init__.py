"""lakelog: Kafka-style topics, partitions, producers, consumer groups and transactions stored in one
Delta Lake table.

``import lakelog`` then ``lakelog.Store(path)``; README.md has the tour. Every name here is imported
on first use: ``import lakelog`` (and so every ``lakelog`` shell command) loads nothing until a name is
asked for, and ``lakelog.maintain`` / ``lakelog.register`` (Spark's ``format("lakelog")``) are the only
ones that load PySpark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakelog.compaction import MaintenanceReport, maintain
    from lakelog.engine import (
        CommitConflictError,
        CommitStateUnknownError,
        Consumer,
        ConsumerGroupMetadata,
        ConsumerRecord,
        FatalError,
        LakelogError,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        OffsetRange,
        Producer,
        RecordFuture,
        RecordMetadata,
        RetriableError,
        Store,
        TopicMetadata,
        TopicPartition,
        WriteResult,
    )
    from lakelog.spark_connector import register
    from lakelog.transactions import TransactionalProducer

_HOMES = {
    "CommitConflictError": "lakelog.engine",
    "CommitStateUnknownError": "lakelog.engine",
    "Consumer": "lakelog.engine",
    "ConsumerGroupMetadata": "lakelog.engine",
    "ConsumerRecord": "lakelog.engine",
    "FatalError": "lakelog.engine",
    "LakelogError": "lakelog.engine",
    "Store": "lakelog.engine",
    "OffsetAndMetadata": "lakelog.engine",
    "OffsetAndTimestamp": "lakelog.engine",
    "OffsetRange": "lakelog.engine",
    "Producer": "lakelog.engine",
    "RecordFuture": "lakelog.engine",
    "RecordMetadata": "lakelog.engine",
    "RetriableError": "lakelog.engine",
    "TopicMetadata": "lakelog.engine",
    "TopicPartition": "lakelog.engine",
    "WriteResult": "lakelog.engine",
    "TransactionalProducer": "lakelog.transactions",
    "maintain": "lakelog.compaction",
    "MaintenanceReport": "lakelog.compaction",
    "register": "lakelog.spark_connector",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'lakelog' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


__all__ = [
    "CommitConflictError",
    "CommitStateUnknownError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "FatalError",
    "LakelogError",
    "MaintenanceReport",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetRange",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "RetriableError",
    "Store",
    "TopicMetadata",
    "TopicPartition",
    "TransactionalProducer",
    "WriteResult",
    "maintain",
    "register",
]
