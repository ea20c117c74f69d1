"""lakelog's engine: Kafka-style topics stored in one Delta Lake table.

``from engine import Store``; see README.md for a tour.
"""

from __future__ import annotations

from lakelog.engine.consume.consumer import Consumer, ConsumerGroupMetadata, ConsumerRecord
from lakelog.engine.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    FatalError,
    LakelogError,
    RetriableError,
)
from lakelog.engine.groups.offsets_topic import OffsetAndMetadata
from lakelog.engine.offsets import OffsetRange, TopicPartition
from lakelog.engine.produce.batches import RecordFuture
from lakelog.engine.produce.producer import Producer
from lakelog.engine.records import RecordMetadata
from lakelog.engine.topics import TopicMetadata
from lakelog.store import OffsetAndTimestamp, Store, WriteResult

__all__ = [
    "CommitConflictError",
    "CommitStateUnknownError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "FatalError",
    "LakelogError",
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
    "WriteResult",
]
