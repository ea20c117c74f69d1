"""lakelog's engine: Kafka-style topics stored in one Delta Lake table.

``from engine import LogStore``; see README.md for a tour.
"""

from __future__ import annotations

from lakelog.engine.consumer import Consumer, ConsumerGroupMetadata, ConsumerRecord
from lakelog.engine.consumer_offsets import OffsetAndMetadata
from lakelog.engine.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    FatalError,
    LakelogError,
    RetriableError,
)
from lakelog.engine.offsets import OffsetRange, TopicPartition
from lakelog.engine.producer import Producer
from lakelog.engine.producer_batch import RecordFuture
from lakelog.engine.records import RecordMetadata
from lakelog.engine.store import LogStore, OffsetAndTimestamp, WriteResult
from lakelog.engine.topics import TopicMetadata

__all__ = [
    "CommitConflictError",
    "CommitStateUnknownError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "FatalError",
    "LakelogError",
    "LogStore",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetRange",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "RetriableError",
    "TopicMetadata",
    "TopicPartition",
    "WriteResult",
]
