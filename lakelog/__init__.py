"""lakelog: Kafka-style topics, partitions, producers, consumer groups and transactions stored in one
Delta Lake table.

``import lakelog`` then ``lakelog.Store.open(path)``; README.md has the tour. Every name here is imported
on first use: ``import lakelog`` (and so every ``lakelog`` shell command) loads nothing until a name is
asked for, and ``lakelog.maintain`` / ``lakelog.register`` (Spark's ``format("lakelog")``) are the only
ones that load PySpark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakelog.compaction import MaintenanceReport, maintain
    from lakelog.engine.admin import OffsetAndTimestamp
    from lakelog.engine.consume import Consumer, ConsumerGroupMetadata, ConsumerRecord
    from lakelog.engine.errors import (
        CommitConflictError,
        CommitStateUnknownError,
        FatalError,
        LakelogError,
        RetriableError,
    )
    from lakelog.engine.groups import OffsetAndMetadata
    from lakelog.engine.offsets import OffsetRange
    from lakelog.engine.produce import Producer, RecordFuture
    from lakelog.engine.records import RecordMetadata
    from lakelog.engine.topics import TopicMetadata, TopicPartition
    from lakelog.spark_connector import register
    from lakelog.store import Store, WriteResult
    from lakelog.transactions import TransactionalProducer

_HOMES = {
    "CommitConflictError": "lakelog.engine.errors",
    "CommitStateUnknownError": "lakelog.engine.errors",
    "Consumer": "lakelog.engine.consume",
    "ConsumerGroupMetadata": "lakelog.engine.consume",
    "ConsumerRecord": "lakelog.engine.consume",
    "FatalError": "lakelog.engine.errors",
    "LakelogError": "lakelog.engine.errors",
    "OffsetAndMetadata": "lakelog.engine.groups",
    "OffsetAndTimestamp": "lakelog.engine.admin",
    "OffsetRange": "lakelog.engine.offsets",
    "Producer": "lakelog.engine.produce",
    "RecordFuture": "lakelog.engine.produce",
    "RecordMetadata": "lakelog.engine.records",
    "RetriableError": "lakelog.engine.errors",
    "Store": "lakelog.store",
    "TopicMetadata": "lakelog.engine.topics",
    "TopicPartition": "lakelog.engine.topics",
    "WriteResult": "lakelog.store",
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
