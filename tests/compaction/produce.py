"""Small commits into a store through the commit core, for maintenance tests."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.engine.commit import Committer, RetryPolicy
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.records import Headers
from lakelog.engine.topics import TopicPartition

Record = tuple[bytes | None, bytes | None, int]  # key, value, timestamp ms


def commit(
    committer: Committer, topic: str, partition: int, records: Sequence[Record], headers: Headers | None = None
) -> int:
    """One Delta commit holding ``records`` (in order) for one partition; returns its version."""
    batch = RecordBatch()
    tp = TopicPartition(topic, partition)
    for i, (key, value, ts) in enumerate(records):
        size = len(key or b"") + len(value or b"")
        batch.add(tp, key, value, headers, ts, size, i)
    result = committer.append(ProducerBatch(batch, 7), RetryPolicy(retries=100, backoff_ms=5))
    assert result.version is not None
    return result.version
