"""format("lakelog") after DeleteRecords: startingOffsets earliest is the new log start, a query
whose last batch ended below it sees the deleted range as data loss (failOnDataLoss), and a
read_range planned before the deletion whose files are gone falls back to what is left."""

from __future__ import annotations

import pytest

from lakelog.engine.topics import TopicPartition
from lakelog.spark_connector.options import parse_source_options
from lakelog.spark_connector.source import TopicLog
from lakelog.spark_connector.source_plan import reconcile_start

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


@pytest.fixture
def store(plain_store):
    plain_store.create_topic("a", partitions=2)
    for batch in range(3):  # three files per partition: offsets 0..3, 4..7, 8..11
        with plain_store.producer(linger_ms=0) as producer:
            for p in (0, 1):
                producer.send_batch("a", [f"{batch}-{i}".encode() for i in range(4)], partition=p).get()
    plain_store.delete_records({A0: 6})
    return plain_store


def _topic_log(store, streaming: bool, **options) -> TopicLog:
    return TopicLog(parse_source_options({"path": store.uri, "subscribe": "a", **options}, streaming=streaming))


def test_starting_offsets_earliest_is_the_new_log_start(store):
    topic_log = _topic_log(store, False, startingOffsets="earliest")
    snapshot = topic_log.snapshot()
    assert topic_log.starting_offsets(snapshot, streaming=False) == {A0: 6, A1: 0}
    assert topic_log.ending_offsets(snapshot) == {A0: 12, A1: 12}


def test_a_query_behind_the_new_start_sees_the_deleted_offsets_as_lost(store):
    topic_log = _topic_log(store, True)
    bounds = topic_log.bounds(topic_log.snapshot())
    start, losses = reconcile_start({A0: 2, A1: 2}, bounds)
    assert start == {A0: 6, A1: 2}
    (loss,) = losses
    assert loss.describe().startswith("a-0: offsets 2..5")


@pytest.mark.spark
def test_spark_reads_from_the_new_log_start(store, spark):
    from lakelog.spark_connector import register

    register(spark)
    rows = (
        spark.read.format("lakelog")
        .option("path", store.uri)
        .option("subscribe", "a")
        .option("startingOffsets", "earliest")
        .load()
        .where("partition = 0")
        .select("offset")
        .collect()
    )
    assert sorted(r.offset for r in rows) == list(range(6, 12))
