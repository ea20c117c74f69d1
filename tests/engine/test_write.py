"""Store.write: DataFrames with the Kafka sink's columns, offsets assigned inside Spark."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from lakelog.engine.errors import (
    InvalidRecordError,
    InvalidTopicError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.produce.partitioner import partition_for_key
from lakelog.engine.topics import TopicPartition
from lakelog.spark_connector import dataframe_write
from lakelog.spark_connector.dataframe_write import KAFKA_PARTITION_FUNCTION, register_functions

pytestmark = pytest.mark.spark

HEADERS = "array<struct<key:string,value:binary>>"


def dense(store, topic):
    rows = store.read(topic).select("partition", "offset").collect()
    by_partition = {}
    for r in rows:
        by_partition.setdefault(r.partition, []).append(r.offset)
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    return {p: len(v) for p, v in by_partition.items()}


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.binary(max_size=64), min_size=1, max_size=300), partitions=st.integers(1, 5000))
def test_jvm_partition_function_is_the_python_one(spark, keys, partitions):
    register_functions(spark)
    df = spark.createDataFrame([(k,) for k in [*keys, b"foobar", b"21"]], "key binary")
    got = df.select("key", F.call_function(KAFKA_PARTITION_FUNCTION, "key", F.lit(partitions)).alias("p")).collect()
    assert [r.p for r in got] == [partition_for_key(bytes(r.key), partitions) for r in got]


def test_write_assigns_dense_offsets_in_input_order(store, spark):
    store.create_topic("t", partitions=4)
    df = spark.range(0, 2000, numPartitions=3).select(
        (F.col("id") % 17).cast("string").alias("key"), F.col("id").cast("string").alias("value")
    )
    result = store.write(df, topic="t")
    assert result.records == 2000
    counts = dense(store, "t")
    assert sum(counts.values()) == 2000
    assert {tp.partition: r.count for tp, r in result.ranges.items()} == counts
    rows = store.read("t").collect()
    for r in rows:
        assert r.partition == partition_for_key(bytes(r.key), 4)
    # Within a partition, offsets follow the input order (ids increase with it).
    by_partition = {}
    for r in sorted(rows, key=lambda r: (r.partition, r.offset)):
        by_partition.setdefault(r.partition, []).append(int(bytes(r.value)))
    for ids in by_partition.values():
        assert ids == sorted(ids)

    second = store.write(df.limit(10), topic="t")
    assert all(r.start == counts[tp.partition] for tp, r in second.ranges.items())
    dense(store, "t")


@pytest.mark.parametrize("literal_limit", [dataframe_write.MAX_LITERAL_BASES, 1])
def test_rows_of_two_topics_from_many_tasks_are_numbered_densely(store, spark, monkeypatch, literal_limit):
    # Base offsets per (task, topic, partition) come from an array literal in the plan; beyond
    # MAX_LITERAL_BASES entries from a broadcast join (limit 1 forces it). Both number alike.
    monkeypatch.setattr(dataframe_write, "MAX_LITERAL_BASES", literal_limit)
    store.create_topic("a", partitions=3)
    store.create_topic("b", partitions=5)
    store.write(spark.range(7).select(F.col("id").cast("string").alias("value")), topic="b")
    df = spark.range(0, 3000, numPartitions=4).select(
        F.when(F.col("id") % 3 == 0, "a").otherwise("b").alias("topic"),
        (F.col("id") % 29).cast("string").alias("key"),
        F.col("id").cast("string").alias("value"),
    )
    result = store.write(df)
    assert result.records == 3000
    a, b = dense(store, "a"), dense(store, "b")
    assert sum(a.values()) == 1000 and sum(b.values()) == 2007
    for topic, partitions in (("a", 3), ("b", 5)):
        rows = store.read(topic).where("offset >= 0").collect()
        by_partition = {}
        for r in sorted(rows, key=lambda r: (r.partition, r.offset)):
            assert r.key is None or r.partition == partition_for_key(bytes(r.key), partitions)
            if r.key is not None:
                by_partition.setdefault(r.partition, []).append(int(bytes(r.value)))
        for ids in by_partition.values():
            assert ids == sorted(ids)


def test_slots_number_every_task_topic_and_partition_once():
    slots = dataframe_write._Slots({"b": 5, "a": 3})
    seen = {
        slots.slot(task, TopicPartition(t, p)) for task in range(4) for t, n in (("a", 3), ("b", 5)) for p in range(n)
    }
    assert seen == set(range(4 * 8))
    for task in range(4):
        for t, n in (("a", 3), ("b", 5)):
            for p in range(n):
                assert slots.decode(slots.slot(task, TopicPartition(t, p))) == (task, TopicPartition(t, p))


def test_write_takes_all_kafka_sink_columns(store, spark):
    store.create_topic("a", partitions=2)
    store.create_topic("b", partitions=3, config={"message.timestamp.type": "LogAppendTime"})
    df = spark.createDataFrame(
        [
            ("a", 1, b"k1", b"v1", [("h", b"x")], 1000),
            ("b", None, None, b"v2", None, 2000),
            ("a", None, b"k3", None, None, None),
        ],
        "topic string, partition int, key binary, value binary, "
        "headers array<struct<key:string,value:binary>>, timestamp bigint",
    )
    result = store.write(df)
    assert set(result.ranges) == {TopicPartition("a", 1), TopicPartition("b", result_partition(result, "b"))} | {
        TopicPartition("a", partition_for_key(b"k3", 2))
    }
    a = {bytes(r.key) if r.key else None: r for r in store.read("a").collect()}
    assert a[b"k1"].partition == 1 and a[b"k1"].headers[0].key == "h"
    assert int(a[b"k1"].timestamp.timestamp() * 1000) == 1000 and a[b"k1"].timestampType == 0
    assert a[b"k3"].value is None
    b = store.read("b").first()
    assert b.timestampType == 1 and int(b.timestamp.timestamp() * 1000) != 2000


def result_partition(result, topic):
    return next(tp.partition for tp in result.ranges if tp.topic == topic)


def test_string_columns_and_topic_argument_override(store, spark):
    store.create_topic("x")
    df = spark.createDataFrame([("ignored", "k", "v")], "topic string, key string, value string")
    store.write(df, topic="x")
    row = store.read("x").first()
    assert (bytes(row.key), bytes(row.value)) == (b"k", b"v")


def test_empty_dataframe_commits_nothing(store, spark):
    store.create_topic("t")
    version = store.log.latest_version()
    result = store.write(spark.createDataFrame([], "value binary"), topic="t")
    assert result.version is None and result.records == 0
    assert store.log.latest_version() == version


@pytest.mark.parametrize(
    ("rows", "schema", "topic", "error", "fragment"),
    [
        ([("k",)], "key string", "t", InvalidRecordError, "needs a 'value' column"),
        ([("v", 1)], "value string, extra int", "t", InvalidRecordError, r"unexpected column\(s\) \['extra'\]"),
        ([(1,)], "value int", "t", InvalidRecordError, "column 'value' has type int"),
        ([("v",)], "value string", None, InvalidTopicError, "no topic"),
        ([("v",)], "value string", "missing", UnknownTopicOrPartitionError, "'missing' does not exist"),
        ([("v", "missing")], "value string, topic string", None, UnknownTopicOrPartitionError, "'missing' does not"),
        ([("v", None)], "value string, topic string", None, InvalidRecordError, "null topic"),
        ([("v", 9)], "value string, partition int", "t", UnknownTopicOrPartitionError, "partition 9 of topic 't'"),
        ([("x" * 200,)], "value string", "t", RecordTooLargeError, "a record of 200 bytes for topic 't'"),
        # As send() refuses them: what the table cannot hold, and header keys that are not strings.
        ([("v", -1)], "value string, timestamp long", "t", InvalidRecordError, r"timestamp -1: .* \[0, "),
        ([("v", 253402300800000)], "value string, timestamp long", "t", InvalidRecordError, "253402300800000"),
        ([("v", 2**62)], "value string, timestamp long", "t", InvalidRecordError, "4611686018427387904"),
        ([("v", [(None, b"x")])], f"value string, headers {HEADERS}", "t", InvalidRecordError, "header key is null"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_committed(store, spark, rows, schema, topic, error, fragment):
    store.create_topic("t", partitions=2, config={"max.message.bytes": 100})
    store.write(spark.createDataFrame([("before",)], "value string"), topic="t")
    version = store.log.latest_version()
    files = _data_files(store)
    df = spark.createDataFrame(rows, schema)
    with pytest.raises(error, match=fragment) as refused:
        store.write(df, topic=topic)
    assert "SQLSTATE" not in str(refused.value) and "Traceback" not in str(refused.value)
    assert store.log.latest_version() == version
    assert _data_files(store) == files  # no orphan file
    assert [bytes(r.value) for r in store.read("t").collect()] == [b"before"]


def _data_files(store) -> set[str]:
    return {str(p) for p in Path(store.uri.removeprefix("file://")).glob("topic=*/partition=*/*.parquet")}


def test_timestamp_columns_must_lie_between_1970_and_9999(store, spark):
    store.create_topic("t", partitions=1)
    edge = spark.sql("SELECT 'v' AS value, TIMESTAMP'9999-12-31 23:59:59.999Z' AS timestamp")
    store.write(edge, topic="t")
    assert store.read("t").collect()[0].timestamp.year == 9999
    files = _data_files(store)
    before_1970 = spark.sql("SELECT 'v' AS value, TIMESTAMP'1969-12-31 23:59:59Z' AS timestamp")
    with pytest.raises(InvalidRecordError, match="a timestamp must lie in"):
        store.write(before_1970, topic="t")
    assert _data_files(store) == files


def test_files_of_tasks_that_finished_before_a_refusal_are_removed(store, spark):
    """Keyless rows fill partitions without a shuffle, each task writing its own files as its
    rows stream by; the refused row comes last, after files were written."""
    store.create_topic("t", partitions=2)
    rows = spark.range(0, 2, numPartitions=1).union(spark.range(2, 300_000, numPartitions=1))
    df = rows.selectExpr("CAST(id AS STRING) AS value", "CASE WHEN id = 299999 THEN -5L ELSE 1000L END AS timestamp")
    with pytest.raises(InvalidRecordError, match="timestamp -5"):
        store.write(df, topic="t")
    assert _data_files(store) == set()
    assert store.read("t").count() == 0


def test_a_refusal_in_the_write_job_removes_only_its_own_files(store, spark):
    """Another writer's file in flight in the same partition directory -- untagged, or
    tagged by another write -- is not this write's to remove."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    store.create_topic("t", partitions=1)
    directory = Path(store.uri.removeprefix("file://")) / "topic=t" / "partition=0"
    directory.mkdir(parents=True, exist_ok=True)
    untagged = directory / "part-00000-in-flight.c000.snappy.parquet"
    pq.write_table(pa.table({"offset": [0]}), untagged)
    other = directory / "part-00001-other-write.c000.snappy.parquet"
    spark.createDataFrame([(0,)], "offset long").select(
        F.col("offset").alias("offset", metadata={dataframe_write.WRITE_ID_KEY: "another-write"})
    ).coalesce(1).write.parquet(str(directory / "staged"))
    next((directory / "staged").glob("*.parquet")).rename(other)
    rows = spark.range(0, 2, numPartitions=1).union(spark.range(2, 300_000, numPartitions=1))
    df = rows.selectExpr("CAST(id AS STRING) AS value", "CASE WHEN id = 299999 THEN -5L ELSE 1000L END AS timestamp")
    with pytest.raises(InvalidRecordError, match="timestamp -5"):
        store.write(df, topic="t")
    assert sorted(p.name for p in directory.glob("*.parquet")) == sorted([untagged.name, other.name])
    assert store.read("t").count() == 0


def test_keyless_rows_fill_the_least_filled_partitions_one_task_each(store, spark):
    store.create_topic("t", partitions=4)
    store.write(spark.createDataFrame([("x", 0), ("y", 0), ("z", 1)], "value string, partition int"), topic="t")
    # partitions 2 and 3 are empty, 1 holds one record, 0 holds two
    df = spark.range(0, 300, numPartitions=3).select(F.col("id").cast("string").alias("value"))
    result = store.write(df, topic="t")
    assert {tp.partition: (r.start, r.count) for tp, r in result.ranges.items()} == {
        2: (0, 100),
        3: (0, 100),
        1: (1, 100),
    }
    dense(store, "t")
    rows = store.read("t").where("partition = 2").orderBy("offset").collect()
    assert [int(bytes(r.value)) for r in rows] == list(range(0, 100))  # task 0's rows, in task order


def _jobs_of(spark, action) -> int:
    """The Spark jobs ``action`` ran."""
    spark.sparkContext.setJobGroup("counted-jobs", "jobs of one write")
    try:
        action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup("counted-jobs"))


def test_an_optimistic_keyless_write_of_one_task_per_partition_needs_no_count_job(store, spark):
    """Each task fills a partition of its own, numbered from its end: the files tell the counts.
    A write that reserves its offsets first (or rows that share partitions) counts first."""
    store.create_topic("t", partitions=2)
    keyless = spark.range(0, 200, numPartitions=2).select(F.col("id").cast("string").alias("value"))
    keyed = spark.range(0, 200, numPartitions=2).selectExpr("CAST(id AS STRING) AS key", "'v' AS value")
    one_job = _jobs_of(spark, lambda: store.write(keyless, topic="t"))
    with_count = _jobs_of(spark, lambda: store.write(keyed, topic="t"))
    assert one_job == 1 and with_count > 1  # the count: a shuffle and its result, before the write
    ends = store.end_offsets("t")
    ranges = store.write(keyless, topic="t").ranges
    assert {tp.partition: (r.start, r.count) for tp, r in ranges.items()} == {p: (ends[p], 100) for p in (0, 1)}
    assert sum(dense(store, "t").values()) == 600


def test_keyless_rows_from_more_tasks_than_partitions_are_spread_and_dense(store, spark):
    store.create_topic("t", partitions=2)
    df = spark.range(0, 500, numPartitions=5).select(F.col("id").cast("string").alias("value"))
    result = store.write(df, topic="t")
    assert result.records == 500 and len(result.ranges) == 2
    assert sum(dense(store, "t").values()) == 500


REFUSED_WRITE = """
import sys
from lakelog.store import Store
from lakelog.engine.errors import InvalidRecordError
store = Store.open(sys.argv[1])
store.create_topic("t", partitions=2)
for rows, schema in [([("v", -1)], "value string, timestamp long"),
                     ([("v", [(None, b"x")])], "value string, headers array<struct<key:string,value:binary>>")]:
    try:
        store.write(store.spark.createDataFrame(rows, schema), topic="t")
    except InvalidRecordError as exc:
        print("refused:", exc)
"""


def test_a_refused_write_prints_no_stack_trace(tmp_path):
    """The JVM and its Python workers write to the process's stderr, which only a process of
    its own shows."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", REFUSED_WRITE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("refused:") == 2
    assert "\tat " not in done.stderr and "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
