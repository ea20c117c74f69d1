"""lakelog: Kafka-style topics, partitions, producers, consumer groups and transactions stored in one
Delta Lake table.

``import lakelog`` then ``lakelog.LogStore(path)``; README.md has the tour. The engine needs no JVM;
``lakelog.maintain`` and ``lakelog.register`` (Spark's ``format("lakelog")``) are imported on first use, so
``import lakelog`` alone never loads PySpark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakelog.engine import (
    CommitConflictError,
    CommitStateUnknownError,
    Consumer,
    ConsumerGroupMetadata,
    ConsumerRecord,
    FatalError,
    LakelogError,
    LogStore,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    OffsetRange,
    Producer,
    RecordFuture,
    RecordMetadata,
    RetriableError,
    TopicMetadata,
    TopicPartition,
    WriteResult,
)
from lakelog.transactions import TransactionalProducer

if TYPE_CHECKING:
    from lakelog.compaction import MaintenanceReport, maintain
    from lakelog.spark_connector import register

# Spark-side entry points, resolved on first use: PySpark takes seconds to import.
_LAZY = {
    "maintain": ("lakelog.compaction", "maintain"),
    "MaintenanceReport": ("lakelog.compaction", "MaintenanceReport"),
    "register": ("lakelog.spark_connector", "register"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lakelog' has no attribute {name!r}")


__all__ = [
    "CommitConflictError",
    "CommitStateUnknownError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "FatalError",
    "LakelogError",
    "LogStore",
    "MaintenanceReport",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetRange",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "RetriableError",
    "TopicMetadata",
    "TopicPartition",
    "TransactionalProducer",
    "WriteResult",
    "maintain",
    "register",
]
