"""Reading topics: Kafka source schema, offset ranges, pruning, offset lookups."""

from __future__ import annotations

import json
import re

import pytest
from pyspark.sql import functions as F

from lakelog.engine.errors import InvalidOffsetError, InvalidTopicError, UnknownTopicOrPartitionError

pytestmark = pytest.mark.spark

KAFKA_SOURCE_SCHEMA = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
    "timestampType:int,headers:array<struct<key:string,value:binary>>>"
)


@pytest.fixture(scope="module")
def filled(spark, tmp_path_factory):
    """Topic 'orders' (3 partitions) written in 10 commits of 30 keyed records, and topic 'other'.

    Shared by the module's tests, which only read it.
    """
    from lakelog.store import Store

    store = Store.open(tmp_path_factory.mktemp("read") / "store", spark=spark)
    store.create_topic("orders", partitions=3)
    store.create_topic("other", partitions=1)
    for batch in range(10):
        df = spark.range(batch * 30, batch * 30 + 30).select(
            F.col("id").cast("string").alias("key"),
            F.col("id").cast("string").alias("value"),
            (F.col("id") * 1000).alias("timestamp"),  # ms: record i at i seconds
            (F.col("id") % 3).cast("int").alias("partition"),
        )
        store.write(df, topic="orders")
    store.write(spark.createDataFrame([("x",)], "value string"), topic="other")
    return store


def test_schema_is_the_kafka_sources(filled):
    df = filled.read("orders")
    assert df.schema.simpleString() == KAFKA_SOURCE_SCHEMA
    assert df.count() == 300


def test_topics_by_name_list_and_pattern(filled):
    assert filled.read(["orders", "other"]).count() == 301
    assert filled.read(re.compile("oth.*")).count() == 1
    assert filled.read(re.compile("nothing-matches")).count() == 0
    with pytest.raises(UnknownTopicOrPartitionError):
        filled.read("missing")
    with pytest.raises(InvalidTopicError):
        filled.read(42)


def test_offset_ranges(filled):
    spec = {"orders": {"0": 10, "1": -1, "2": -2}}
    end = json.dumps({"orders": {"0": 15, "1": -1, "2": 3}})
    rows = filled.read("orders", starting_offsets=spec, ending_offsets=end).collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(0, o) for o in range(10, 15)] + [(2, o) for o in range(3)]
    assert filled.read("orders", starting_offsets="latest").count() == 0
    assert filled.read(["orders", "other"], starting_offsets={"other": {0: 1}}).count() == 300


def test_offsets_outside_the_log_are_refused(filled):
    with pytest.raises(InvalidOffsetError, match="offset 101 for orders-0 is outside the log"):
        filled.read("orders", starting_offsets={"orders": {0: 101, 1: 0, 2: 0}})
    with pytest.raises(InvalidOffsetError, match="before its starting offset"):
        filled.read("orders", {"orders": {0: 50, 1: 0, 2: 0}}, {"orders": {0: 40, 1: -1, 2: -1}})


def test_a_range_read_prunes_files_by_partition_and_offset_stats(filled):
    # partition 0 holds offsets 0..99, written 10 at a time (by one or two Spark tasks each time).
    df = filled.read("orders", {"orders": {0: 95, 1: -1, 2: -1}}, {"orders": {0: 98, 1: -1, 2: -1}})
    assert sorted(r.offset for r in df.collect()) == [95, 96, 97]
    files = df.inputFiles()
    assert len(files) == 1 and "partition=0" in files[0]
    # Every file of the topic and no other (each write's Spark tasks wrote one per partition they held).
    assert len(filled.read("orders").inputFiles()) == len(filled.log.latest().topic_files("orders"))


def test_a_read_is_pinned_to_the_version_it_resolved(store, spark):
    store.create_topic("t")
    store.write(spark.createDataFrame([("a",), ("b",)], "value string"), topic="t")
    df = store.read("t")
    store.write(spark.createDataFrame([("late",)], "value string"), topic="t")
    assert df.count() == 2
    assert store.read("t").count() == 3


def test_beginning_end_offsets_and_offsets_for_times(filled):
    assert filled.beginning_offsets("orders") == {0: 0, 1: 0, 2: 0}
    assert filled.end_offsets("orders") == {0: 100, 1: 100, 2: 100}
    # Partition 1 holds ids 1, 4, 7, ... at offsets 0, 1, 2, ...: id 100 is offset 33.
    found = filled.offsets_for_times("orders", {1: 100_000, 0: 0, 2: 10_000_000})
    assert found[1].offset == 33 and found[1].timestamp == 100_000
    assert found[0].offset == 0
    assert found[2] is None
    with pytest.raises(UnknownTopicOrPartitionError):
        filled.offsets_for_times("orders", {3: 0})
    with pytest.raises(InvalidOffsetError):
        filled.offsets_for_times("orders", {0: -5})


def test_history_lists_commits_with_their_ranges(filled):
    entries = filled.history_entries("orders")
    assert [e.operation for e in entries] == ["create_topic"] + ["write"] * 10
    assert entries[1].ranges == [("orders", 0, 0, 10), ("orders", 1, 0, 10), ("orders", 2, 0, 10)]
    # With no other writer, each write(df) is one commit: nothing reserved its offsets first.
    assert [e.operation for e in filled.history_entries() if e.operation in ("reserve", "write")] == ["write"] * 11
    df = filled.history()
    assert df.where("operation = 'write'").count() == 11
    assert df.columns[:3] == ["version", "timestamp", "operation"]


def test_a_seek_into_a_large_file_reads_only_the_row_groups_it_needs(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakelog.engine.commit.data_files import ROW_GROUP_ROWS, DataFileWriter
    from lakelog.engine.commit.partition_reader import PartitionReader, _row_groups
    from lakelog.engine.schema import LOG_ARROW_SCHEMA
    from lakelog.engine.topics import TopicPartition

    n = 3 * ROW_GROUP_ROWS + 10
    rows = pa.table(
        {
            "topic": ["t"] * n,
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "value": pa.array([b"v"] * n),
        }
    )
    table = pa.table(
        {f.name: rows.column(f.name) if f.name in rows.column_names else pa.nulls(n, f.type) for f in LOG_ARROW_SCHEMA},
        schema=LOG_ARROW_SCHEMA,
    )
    (written,) = DataFileWriter(str(tmp_path)).write(table)
    metadata = pq.ParquetFile(written.full_path).metadata
    assert metadata.num_row_groups == 4
    assert _row_groups(metadata, n - 5, None) == [3]
    assert _row_groups(metadata, ROW_GROUP_ROWS - 1, ROW_GROUP_ROWS + 1) == [0, 1]
    tail = PartitionReader(str(tmp_path)).read([written.stats], TopicPartition("t", 0), n - 5)
    assert tail.column("offset").to_pylist() == list(range(n - 5, n))
