"""Delta's own OPTIMIZE (Spark SQL) on a live store: it bins files by size, not by offset, so
files come out with interleaved offset ranges. Consumers fetching a few records at a time,
batch reads and lakelog's maintenance must not skip, repeat or renumber a record."""

from __future__ import annotations

import stat

import pytest

from lakelog.compaction import maintain
from lakelog.compaction.files import partition_logs
from lakelog.compaction.plan import overlapping_runs
from lakelog.engine.consume.consumer import Consumer
from lakelog.engine.produce.producer import Producer
from lakelog.engine.topics import TopicPartition

pytestmark = pytest.mark.spark


def ranges(store, topic: str) -> dict[int, list[tuple[int, int]]]:
    logs = partition_logs(store.log.latest(), {topic})
    return {tp.partition: [(f.min_offset, f.max_offset) for f in p.files] for tp, p in logs.items()}


def small_fetch_values(store, polls: int) -> dict[int, list[bytes]]:
    """The values of topic ``t`` (partitions 0 and 1) as a consumer fetching one record at a
    time and polling 3 at a time sees them in ``polls`` polls."""
    consumer = Consumer(store.context, {"fetch.min.records": 1, "max.poll.records": 3, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    got: dict[int, list[bytes]] = {0: [], 1: []}
    for _ in range(polls):
        for r in consumer.poll(timeout_ms=0):
            got[r.partition].append(r.value)
    consumer.close()
    return got


def copy_t(spark, store, checkpoint: str) -> None:
    """A streaming query copying topic ``t`` into ``copy`` until it has caught up, in
    batches of 7 records (they end inside merged files)."""
    query = (
        spark.readStream.format("lakelog")
        .option("path", store.uri)
        .option("subscribe", "t")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "7")
        .load()
        .select("value")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", "copy")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None


def test_spark_sql_optimize_beside_a_small_fetch_consumer_skips_nothing(spark, store):
    store.create_topic("t", partitions=2)
    store.create_topic("copy", partitions=1)
    expected: dict[int, list[bytes]] = {0: [], 1: []}

    def produce(batches: range) -> None:
        with Producer(store.context, {"linger.ms": 0}) as producer:
            for i in batches:
                # Sizes vary so that binning by size takes files from all over the log.
                values = [f"r{i}-{j}-".encode() + b"x" * (40 * (i % 5)) for j in range(1 + (i * 7) % 9)]
                producer.send_batch("t", values, partition=i % 2).get(30)
                expected[i % 2] += values

    def stream_copy() -> None:
        copy_t(spark, store, checkpoint)

    checkpoint = store.uri.replace("file://", "") + "-checkpoint"
    produce(range(12))
    stream_copy()  # a streaming query part way through the topic when OPTIMIZE runs
    produce(range(12, 24))
    consumer = Consumer(store.context, {"fetch.min.records": 1, "max.poll.records": 4, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    got: dict[int, list[bytes]] = {0: [], 1: []}

    def drain(limit: int) -> None:
        for _ in range(limit):
            for r in consumer.poll(timeout_ms=0):
                got[r.partition].append(r.value)

    drain(5)  # part way through, positions in the middle of the old files
    batch_before = sorted(
        (r.partition, r.offset, bytes(r.value))
        for r in spark.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load().collect()
    )
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", "12000")
    try:
        spark.sql(f"OPTIMIZE delta.`{store.uri}`").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    after_optimize = store.log.latest()
    assert after_optimize.version > 0
    layout = ranges(store, "t")
    assert any(overlapping_runs(p.files) for p in partition_logs(after_optimize, {"t"}).values()), layout
    # Delta's commit file came through lakelog's LogStore for the JVM: readable by others.
    commit = store.uri.replace("file://", "") + f"/_delta_log/{after_optimize.version:020d}.json"
    assert stat.S_IMODE(__import__("os").stat(commit).st_mode) & 0o044 == 0o044

    drain(200)
    consumer.close()
    assert got == expected
    stream_copy()
    copied = [bytes(r.value) for r in store.read("copy").select("value").collect()]
    assert sorted(copied) == sorted(expected[0] + expected[1])  # each record once
    batch_after = sorted(
        (r.partition, r.offset, bytes(r.value))
        for r in spark.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load().collect()
    )
    assert batch_after == batch_before
    # A producer goes on from the end: nothing renumbered.
    ends = store.end_offsets("t")
    with Producer(store.context, {"linger.ms": 0}) as producer:
        landed = producer.send_batch("t", [b"after"], partition=0).get(30)
    assert int(landed.offsets[0]) == ends[0] == len(expected[0])
    expected[0].append(b"after")

    # lakelog's maintenance puts the partition back in offset order; nothing changes for readers.
    maintain(store, topics=["t"], vacuum=False)
    assert not any(overlapping_runs(p.files) for p in partition_logs(store.log.latest(), {"t"}).values())
    assert small_fetch_values(store, polls=200) == expected


def test_a_plain_spark_append_into_the_log_table_is_left_out_everywhere(spark, store, tmp_path):
    """The issue's case: ``df.write.format("delta").mode("append")`` into the log table with
    rows at offsets 0 and 1 of a partition and one past another's end. Batch reads (both
    kinds), a consumer, a producer after it and a streaming query see lakelog's records only."""
    from pyspark.sql import functions as F

    store.create_topic("t", partitions=2)
    store.create_topic("copy", partitions=1)
    expected = {p: [f"p{p}-{i}".encode() for i in range(20)] for p in (0, 1)}
    with Producer(store.context, {"linger.ms": 0}) as producer:
        for p, values in expected.items():
            producer.send_batch("t", values, partition=p).get(30)
    plain = spark.read.format("delta").load(store.uri)
    copies = plain.where("topic = 't' AND partition = 0 AND offset < 2").withColumn("value", F.lit(b"foreign"))
    past_end = (
        plain.where("topic = 't' AND partition = 1 AND offset = 19")
        .withColumn("offset", F.lit(30).cast("bigint"))
        .withColumn("value", F.lit(b"foreign"))
    )
    copies.unionByName(past_end).write.format("delta").mode("append").save(store.uri)
    assert spark.read.format("delta").load(store.uri).where("topic = 't'").count() == 43  # the rows are there

    def rows(frame) -> list[tuple[int, int, bytes]]:
        return sorted((r.partition, r.offset, bytes(r.value)) for r in frame.collect())

    want = [(p, i, v) for p, values in expected.items() for i, v in enumerate(values)]
    assert rows(store.read("t")) == want
    assert rows(spark.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load()) == want
    assert store.end_offsets("t") == {0: 20, 1: 20}
    assert small_fetch_values(store, polls=100) == expected
    with Producer(store.context, {"linger.ms": 0}) as producer:
        landed = producer.send_batch("t", [b"after"], partition=1).get(30)
    assert int(landed.offsets[0]) == 20  # not 31
    expected[1].append(b"after")
    copy_t(spark, store, str(tmp_path / "checkpoint"))
    copied = [bytes(r.value) for r in store.read("copy").select("value").collect()]
    assert sorted(copied) == sorted(expected[0] + expected[1])
