"""lakelog's engine: Kafka-style topics stored in one Delta Lake table.

``from engine import LogStore``; see README.md for a tour.
"""

from __future__ import annotations

from engine.consumer import Consumer, ConsumerGroupMetadata, ConsumerRecord
from engine.consumer_offsets import OffsetAndMetadata
from engine.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    FatalError,
    LakelogError,
    RetriableError,
)
from engine.offsets import OffsetRange, TopicPartition
from engine.producer import Producer
from engine.producer_batch import RecordFuture
from engine.records import RecordMetadata
from engine.store import LogStore, OffsetAndTimestamp, WriteResult
from engine.topics import TopicMetadata

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
