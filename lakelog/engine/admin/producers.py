"""Kafka's DescribeProducers without a JVM: the producers recently active on a partition.

Kafka keeps a producer's state (epoch, last sequence, last timestamp) per partition while
its records are younger than ``producer.id.expiration.ms`` (a day by default). Here every
row carries its producer's id, epoch and sequence (``producer_id``, ``producer_epoch``,
``sequence``), so a partition's active producers are read from the data files committed in
that window: per producer id, its newest row's epoch, sequence and timestamp. Rows without a
producer id (plain writers, ``write(df)``, group records) belong to no producer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.context import StoreContext
from lakelog.engine.topics import TopicPartition, require_partition

# Kafka's producer.id.expiration.ms default.
PRODUCER_ID_EXPIRATION_MS = 86_400_000
_COLUMNS = ["offset", "timestamp", "producer_id", "producer_epoch", "sequence"]


@dataclass(frozen=True)
class ProducerState:
    """A producer's newest record in a partition: its epoch, sequence, timestamp (ms) and offset."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    last_offset: int


def active_producers(
    context: StoreContext,
    tp: TopicPartition,
    *,
    now_ms: int | None = None,
    expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
) -> list[ProducerState]:
    """The producers of ``tp`` with records in data files committed within ``expiration_ms``
    before ``now_ms``, by producer id; at or past the partition's log start and below its
    end. Raises UnknownTopicOrPartitionError, DataLossError / CorruptLogError for a data
    file that is gone or unreadable."""
    state = context.log.latest()
    require_partition(state.topics, tp.topic, tp.partition)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    bounds = context.records.bounds(state, tp)
    files = state.files_of(tp)
    recent = [f for f in files.all() if f.num_records and (f.modification_time or 0) >= now_ms - expiration_ms]
    parts = [context.records.read_file(f.path, _COLUMNS, held=f) for f in recent]
    if not parts:
        return []
    rows = pa.concat_tables(parts)
    offsets = rows.column("offset")
    keep = pc.and_(
        pc.and_(pc.greater_equal(offsets, bounds.start), pc.less(offsets, bounds.end)),
        pc.greater_equal(rows.column("producer_id").fill_null(-1), 0),
    )
    rows = rows.filter(keep)
    # Each producer's newest row, found in Arrow: a busy partition holds many rows a day.
    last = rows.group_by("producer_id").aggregate([("offset", "max")])
    last = last.select(["producer_id", "offset_max"]).rename_columns(["producer_id", "offset"])
    newest = rows.join(last, ["producer_id", "offset"], join_type="inner").sort_by("producer_id")
    return [
        ProducerState(
            row["producer_id"],
            -1 if row["producer_epoch"] is None else row["producer_epoch"],
            -1 if row["sequence"] is None else row["sequence"],
            -1 if row["timestamp"] is None else int(row["timestamp"].timestamp() * 1000),
            row["offset"],
        )
        for row in newest.to_pylist()
    ]
