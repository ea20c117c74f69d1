"""A topic's records read without Spark, shaped like the rows of Spark's Kafka source."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.topics import TopicPartition


class Header(NamedTuple):
    key: str
    value: bytes | None


class Row(NamedTuple):
    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp: datetime
    timestampType: int
    headers: list[Header] | None


def topic_rows(store: Any, topic: str) -> list[Row]:
    """Every record of ``topic`` at the latest version, by partition and offset."""
    state = store.log.latest()
    reader = PartitionReader(store.uri)
    rows = []
    for p in range(state.topics[topic].partitions):
        tp = TopicPartition(topic, p)
        for r in reader.read(state.files_of(tp).all(), tp, 0).to_pylist():
            headers = None if r["headers"] is None else [Header(h["key"], h["value"]) for h in r["headers"]]
            stamp = r["timestamp"].astimezone(UTC) if r["timestamp"] is not None else None
            rows.append(Row(r["key"], r["value"], topic, p, r["offset"], stamp, r["timestamp_type"], headers))
    return rows
