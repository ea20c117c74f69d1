"""Kafka's ListOffsets without a JVM: a topic's log start and end offsets and the offsets of
times, from the latest version of the table.

Bounds come from the data files' statistics and the reservation markers
(:meth:`engine.commit.partition_reader.PartitionReader.bounds`); a time is found by pruning
files by their timestamp statistics and reading the few left. :class:`lakelog.store.Store`'s
offset methods, ``lakelog groups --reset-offsets`` and ``lakelog offsets`` use these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lakelog.engine.commit import TableState
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import UnknownTopicOrPartitionError
from lakelog.engine.offsets import PartitionBounds
from lakelog.engine.records import check_lookup_timestamp
from lakelog.engine.topics import TopicPartition, require_partition, require_topic


@dataclass(frozen=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int  # ms


def partition_bounds(
    context: StoreContext, state: TableState, names: Iterable[str]
) -> dict[TopicPartition, PartitionBounds]:
    """Log start/end offsets of every partition of the topics ``names`` in ``state``."""
    result = {}
    for name in sorted(set(names)):
        for p in range(state.topics[name].partitions):
            tp = TopicPartition(name, p)
            result[tp] = context.records.bounds(state, tp)
    return result


def _topic_bounds(context: StoreContext, topic: str) -> dict[int, PartitionBounds]:
    state = context.log.latest()
    require_topic(state.topics, topic)
    return {tp.partition: b for tp, b in partition_bounds(context, state, [topic]).items()}


def end_offsets(context: StoreContext, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the end of what readers see (see :meth:`lakelog.store.Store.end_offsets`)."""
    return {p: b.end for p, b in _topic_bounds(context, topic).items()}


def beginning_offsets(context: StoreContext, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the first offset still in the log (Kafka's log start offset)."""
    return {p: b.start for p, b in _topic_bounds(context, topic).items()}


def offsets_for_times(
    context: StoreContext, topic: str, timestamps: Mapping[int, int]
) -> dict[int, OffsetAndTimestamp | None]:
    """Per partition, the earliest offset whose timestamp is >= the given ms, or None (see
    :meth:`lakelog.store.Store.offsets_for_times`)."""
    meta = require_topic(context.latest_topics(), topic)
    for p, ts in timestamps.items():
        if not 0 <= p < meta.partitions:
            raise UnknownTopicOrPartitionError(f"partition {p} of topic {topic!r} does not exist")
        check_lookup_timestamp(ts, f"timestamp for {topic}-{p}")
    result: dict[int, OffsetAndTimestamp | None] = {p: None for p in timestamps}
    state = context.log.latest()
    for p, ts in timestamps.items():
        tp = TopicPartition(topic, p)
        found = context.records.first_at(state.files_of(tp), tp, ts)
        result[p] = None if found is None else OffsetAndTimestamp(*found)
    return result


def max_timestamp_offsets(
    context: StoreContext, topic: str, partitions: Iterable[int] | None = None
) -> dict[int, OffsetAndTimestamp | None]:
    """Per partition, the record with the largest timestamp, or None (see
    :meth:`lakelog.store.Store.max_timestamp_offsets`)."""
    topics = context.latest_topics()
    meta = require_topic(topics, topic)
    chosen = list(range(meta.partitions)) if partitions is None else list(partitions)
    for p in chosen:
        require_partition(topics, topic, p)
    state = context.log.latest()
    result: dict[int, OffsetAndTimestamp | None] = {}
    for p in chosen:
        tp = TopicPartition(topic, p)
        found = context.records.max_timestamp(state.files_of(tp), tp)
        result[p] = None if found is None else OffsetAndTimestamp(*found)
    return result
