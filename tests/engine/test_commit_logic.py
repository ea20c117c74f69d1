"""The parts of the commit loop that are plain functions over values."""

from __future__ import annotations

import random

from lakelog.engine.commit import RetryPolicy
from lakelog.engine.commit.info import append_tags, commit_info, parse_ranges, user_metadata
from lakelog.engine.offsets import OffsetRange
from lakelog.engine.topics import TopicPartition
from lakelog.spark_connector.frames import partition_predicate


def test_backoff_doubles_with_jitter_up_to_the_cap():
    policy = RetryPolicy(retries=10, backoff_ms=100, backoff_max_ms=1000)
    rng = random.Random(1)
    delays = [policy.delay_s(n, rng) for n in range(1, 7)]
    assert 0.08 <= delays[0] <= 0.12
    assert 0.16 <= delays[1] <= 0.24
    assert all(0.8 <= d <= 1.2 for d in delays[4:])


def test_retries_are_bounded_by_count_and_time():
    policy = RetryPolicy(retries=3, timeout_ms=1000)
    assert not policy.exhausted(3, started=0.0, now=0.5)  # 3 retries after the first attempt
    assert policy.exhausted(4, started=0.0, now=0.5)
    assert policy.exhausted(1, started=0.0, now=1.0)
    assert not RetryPolicy(retries=3).exhausted(3, started=0.0, now=1e9)
    assert RetryPolicy(retries=0).exhausted(1, started=0.0, now=0.0)


def test_partition_predicate_matches_exactly_the_partitions():
    sql = partition_predicate([TopicPartition("b", 2), TopicPartition("a", 1), TopicPartition("b", 0)])
    assert sql == "(`topic` = 'a' AND `partition` IN (1)) OR (`topic` = 'b' AND `partition` IN (0, 2))"
    assert partition_predicate([]) == "false"


def test_append_tags_record_each_partition_range():
    a0, b1 = TopicPartition("a", 0), TopicPartition("b", 1)
    tags = append_tags("produce", "p-1", {b1: OffsetRange(b1, 5, 7), a0: OffsetRange(a0, 0, 3)})
    assert tags["lakelog.client.id"] == "p-1"
    assert parse_ranges(tags["lakelog.ranges"]) == [("a", 0, 0, 3), ("b", 1, 5, 7)]
    assert '"lakelog.operation":"produce"' in user_metadata(tags)


def test_commit_info_is_delta_s_with_lakelog_s_tags_and_a_fresh_txn_id_per_commit():
    tags = append_tags("produce", "p-1", {})
    first = commit_info("WRITE", 4, now_ms=7, tags=tags, parameters={"mode": "Append"})
    second = commit_info("WRITE", 4, now_ms=7, tags=tags)
    assert first.values["readVersion"] == 4 and first.values["operation"] == "WRITE"
    assert first.values["tags"] == tags and first.values["userMetadata"] == user_metadata(tags)
    assert first.txn_id and first.txn_id != second.txn_id
