"""Batch reads bounded by time (Kafka source's startingTimestamp / endingTimestamp and their
per-partition forms): the offsets the source plans, without Spark."""

from __future__ import annotations

import json

import pytest

from lakelog.engine.errors import InvalidOffsetError
from lakelog.engine.topics import TopicPartition
from lakelog.spark_connector.options import parse_source_options
from lakelog.spark_connector.source import TopicLog

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


@pytest.fixture
def store(plain_store):
    # Partition 0: timestamps 1000, 1010, ..., 1050; partition 1: 2000, 2010, 2020.
    plain_store.create_topic("a", partitions=2)
    with plain_store.producer(linger_ms=0) as producer:
        for i in range(6):
            producer.send("a", f"p0-{i}", partition=0, timestamp=1000 + 10 * i)
        for i in range(3):
            producer.send("a", f"p1-{i}", partition=1, timestamp=2000 + 10 * i)
    return plain_store


def planned(store, **options):
    opts = parse_source_options({"path": store.uri, "subscribe": "a", **options}, streaming=False)
    topic_log = TopicLog(opts)
    snapshot = topic_log.snapshot()
    return topic_log.starting_offsets(snapshot, streaming=False), topic_log.ending_offsets(snapshot)


def test_ending_timestamp_ends_each_partition_before_its_first_record_that_new(store):
    start, end = planned(store, endingTimestamp="1025")
    assert start == {A0: 0, A1: 0}
    # Partition 0 stops before 1030 (offset 3); every record of partition 1 is newer: it reads none.
    assert end == {A0: 3, A1: 0}
    _, exact = planned(store, endingTimestamp="1030")
    assert exact[A0] == 3  # the record stamped exactly at the end is not read (exclusive, as offsets)


def test_a_partition_with_no_record_that_new_or_no_timestamp_given_reads_to_its_end(store):
    _, end = planned(store, endingTimestamp="5000")
    assert end == {A0: 6, A1: 3}
    _, by_partition = planned(store, endingOffsetsByTimestamp=json.dumps({"a": {"1": 2015}}))
    assert by_partition == {A0: 6, A1: 2}


def test_starting_and_ending_by_timestamp_read_a_time_window(store):
    start, end = planned(
        store,
        startingOffsetsByTimestamp=json.dumps({"a": {"0": 1015, "1": 2000}}),
        endingOffsetsByTimestamp=json.dumps({"a": {"0": 1040, "1": 2010}}),
    )
    assert start == {A0: 2, A1: 0} and end == {A0: 4, A1: 1}


def test_a_window_that_ends_before_it_starts_is_refused(store):
    opts = parse_source_options(
        {"path": store.uri, "subscribe": "a", "startingTimestamp": "1040", "endingTimestamp": "1010"}, streaming=False
    )
    from lakelog.spark_connector.source import LakelogBatchReader

    with pytest.raises(InvalidOffsetError, match="ending offset 1 of a-0 is before its starting offset 4"):
        LakelogBatchReader(opts).partitions()
