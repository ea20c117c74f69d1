"""Records of produce requests arriving together share one Delta commit; a refused one fails
alone (no sockets, no Spark)."""

from __future__ import annotations

import pytest

from lakelog.engine.commit import RetryPolicy
from lakelog.engine.errors import UnknownTopicOrPartitionError
from lakelog.engine.produce.placement import columns_for_batch
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.produce_linger import ProduceLinger


def _table(partition: int, n: int, topic: str = "t"):
    return columns_for_batch(topic, [f"v{i}" for i in range(n)], None, partition, None, None)


def test_requests_within_the_linger_share_one_commit_and_get_their_own_offsets(plain_store):
    plain_store.create_topic("t", partitions=3)
    group = ProduceLinger(plain_store.context.committer("test"), RetryPolicy(), linger_ms=200)
    try:
        version = plain_store.log.latest_version()
        futures = [group.submit(_table(p, n)) for p, n in [(0, 3), (1, 2), (0, 4), (2, 1)]]
        results = [f.result(timeout=30) for f in futures]
        assert plain_store.log.latest_version() == version + 1  # one Delta commit for all four
        assert [list(r.offsets) for r in results] == [[0, 1, 2], [0, 1], [3, 4, 5, 6], [0]]
        bad = group.submit(_table(9, 1))
        good = group.submit(_table(1, 1))
        with pytest.raises(UnknownTopicOrPartitionError):
            bad.result(timeout=30)
        assert list(good.result(timeout=30).offsets) == [2]  # the refused request failed alone
    finally:
        group.close()
    assert plain_store.log.latest().end_offset(TopicPartition("t", 0)) == 7
