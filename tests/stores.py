"""Small local stores with known records, for tests that need no Spark."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lakelog.store import Store

BASE_MS = 1_700_000_000_000


def store_with_records(path: Path, counts: Sequence[int], topic: str = "t") -> Store:
    """A new store at ``path`` whose topic has ``len(counts)`` partitions, partition p holding
    ``counts[p]`` records: value ``b"p-i"`` stamped ``BASE_MS + i`` at offset i."""
    store = Store.open(path)
    store.create_topic(topic, partitions=len(counts))
    producer = store.producer()
    for p, count in enumerate(counts):
        for i in range(count):
            producer.send(topic, f"{p}-{i}".encode(), partition=p, timestamp=BASE_MS + i)
    producer.close()
    return store
