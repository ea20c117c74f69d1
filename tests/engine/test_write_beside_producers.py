"""Spark writes land beside a busy producer on the same partitions (issue 26): ``write(df)`` of
1M rows and a streaming sink at 2 s triggers, while another process commits 40 times a
second. Their offsets are reserved before their files are written, so the producer's
commits neither make them re-plan nor rewrite anything."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F

from benchmarks.paced import PacedProducer
from lakelog.engine.topics import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.slow]
PARTITIONS = 4


def everything(store, topic: str) -> pa.Table:
    consumer = store.consumer(None, auto_offset_reset="earliest", max_poll_records=1_000_000)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    parts = []
    while (batch := consumer.poll_arrow(timeout_ms=500)).num_rows:
        parts.append(batch.select(["partition", "offset", "value"]))
    consumer.close()
    return pa.concat_tables(parts)


def check_dense_and_acked(table: pa.Table, acks: list[dict]) -> dict[bytes, int]:
    """Offsets dense per partition, every acknowledged send at its offset; values counted."""
    for p in range(PARTITIONS):
        offsets = table.filter(pc.equal(table["partition"], p))["offset"].to_numpy()
        assert sorted(offsets.tolist()) == list(range(len(offsets))), f"partition {p} is not dense"
    at = {(r["partition"], r["offset"]): r["value"] for r in table.select(["partition", "offset", "value"]).to_pylist()}
    for ack in acks:
        assert at[(ack["p"], ack["o"])] == ack["value"].encode(), ack
    counts: dict[bytes, int] = {}
    for value in table["value"].to_pylist():
        counts[value] = counts.get(value, 0) + 1
    return counts


def test_a_million_row_write_lands_beside_a_producer_committing_40_times_a_second(store, spark, tmp_path):
    store.create_topic("t", partitions=PARTITIONS)
    rows = 1_000_000
    df = spark.range(rows).select(
        F.concat(F.lit("w-"), F.col("id").cast("string")).alias("value"), (F.col("id") % 97).cast("string").alias("key")
    )
    with PacedProducer(store.uri, "t", list(range(PARTITIONS)), 40, tmp_path) as producer:
        started = time.monotonic()
        result = store.write(df, topic="t", retries=3)
        took = time.monotonic() - started
        time.sleep(0.5)
    acks = producer.acks()
    assert result.records == rows
    committed_during = [
        a for a in acks if any(a["o"] >= r.end for tp, r in result.ranges.items() if tp.partition == a["p"])
    ]
    assert committed_during, f"the producer committed nothing after the write's reservation ({took:.1f} s)"
    counts = check_dense_and_acked(everything(store, "t"), acks)
    written = {v: n for v, n in counts.items() if v.startswith(b"w-")}
    assert len(written) == rows and set(written.values()) == {1}  # each row once


def test_a_streaming_sink_at_2_second_triggers_lands_beside_the_producer(store, spark, tmp_path):
    store.create_topic("src", partitions=PARTITIONS)
    store.create_topic("dst", partitions=PARTITIONS)
    rows, commits = 200_000, 8
    for i in range(commits):  # the source never splits a commit across micro-batches
        ids = spark.range(i * rows // commits, (i + 1) * rows // commits)
        store.write(ids.select(F.concat(F.lit("s-"), F.col("id").cast("string")).alias("value")), "src")
    with PacedProducer(store.uri, "dst", list(range(PARTITIONS)), 40, tmp_path) as producer:
        query = (
            spark.readStream.format("lakelog")
            .option("path", store.uri)
            .option("subscribe", "src")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", rows // 4)
            .load()
            .select("value")
            .writeStream.format("lakelog")
            .option("path", store.uri)
            .option("topic", "dst")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="2 seconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 600
            while sum(store.end_offsets("dst").values()) < rows + len(producer.acks()):
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, "the stream did not copy everything"
                time.sleep(1)
            # The last batch's rows are in the table before its progress is reported.
            while sum(p["numInputRows"] for p in query.recentProgress) < rows:
                assert time.monotonic() < deadline, "the last micro-batch was never reported"
                time.sleep(0.2)
        finally:
            query.stop()
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) >= 4  # several micro-batches, each racing the producer
    counts = check_dense_and_acked(everything(store, "dst"), producer.acks())
    copied = {v: n for v, n in counts.items() if v.startswith(b"s-")}
    assert len(copied) == rows and set(copied.values()) == {1}
