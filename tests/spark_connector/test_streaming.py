"""format("lakelog") with a real SparkSession: batch and streaming reads, the sink, groupId, data loss."""

from __future__ import annotations

import contextlib
import json
import time
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql.utils import CapturedException

from lakelog.engine.admin.groups import describe_group
from lakelog.engine.commit import TableLog
from lakelog.engine.storage.object_store import StoreAccess

pytestmark = pytest.mark.spark


def records_by_partition(store, topic):
    rows = store.read(topic).select("partition", "offset", "key", "value").orderBy("partition", "offset").collect()
    result = defaultdict(list)
    for r in rows:
        result[r.partition].append((r.key, r.value))
    return dict(result)


def source(spark, store, **options):
    reader = spark.readStream.format("lakelog").option("path", store.uri)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def copy_available_now(spark, store, src, dst, checkpoint, **options):
    query = (
        source(spark, store, subscribe=src, startingOffsets="earliest", **options)
        .select("key", "value")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", dst)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with contextlib.suppress(StreamingQueryException):  # the test looks at query.exception()
        query.awaitTermination(300)
    return query


def expected_lag_metrics(latest: dict[int, int], consumed: dict[int, int]) -> dict[str, str]:
    """The Kafka source's three metrics as they appear in the progress JSON.

    Values are strings; Spark's SourceProgress.jsonValue rounds
    avgOffsetsBehindLatest to one decimal (HALF_UP), for Kafka's source too.
    """
    lags = [latest[p] - consumed.get(p, 0) for p in latest]
    avg = (Decimal(sum(lags)) / Decimal(len(lags))).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return {
        "minOffsetsBehindLatest": str(min(lags)),
        "maxOffsetsBehindLatest": str(max(lags)),
        "avgOffsetsBehindLatest": str(avg),
    }


def partition_offsets(source_progress, key):
    return {int(p): o for p, o in json.loads(source_progress[key]).get("a", {}).items()}


def test_batch_read_has_the_kafka_source_schema_and_offsets(spark, store):
    store.create_topic("a", partitions=2)
    with store.producer() as producer:
        for i in range(6):
            producer.send("a", f"v{i}", key=f"k{i}", partition=i % 2, headers=[("h", b"x")], timestamp=1000 + i)

    def base():
        return spark.read.format("lakelog").option("path", store.uri)

    df = base().option("subscribe", "a").option("includeHeaders", "true").load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    rows = df.orderBy("partition", "offset").collect()
    assert [(r.partition, r.offset, bytes(r.value)) for r in rows[:2]] == [(0, 0, b"v0"), (0, 1, b"v2")]
    assert rows[0].headers[0].key == "h" and bytes(rows[0].headers[0].value) == b"x"
    ranged = (
        base()
        .option("assign", '{"a":[1]}')
        .option("startingOffsets", '{"a":{"1":1}}')
        .option("endingOffsets", '{"a":{"1":2}}')
        .load()
    )
    assert [bytes(r.value) for r in ranged.collect()] == [b"v3"]
    by_time = base().option("subscribe", "a").option("startingTimestamp", "1004").load()
    assert sorted(bytes(r.value) for r in by_time.collect()) == [b"v4", b"v5"]
    window = base().option("subscribe", "a").option("startingTimestamp", "1001").option("endingTimestamp", "1004")
    assert sorted(bytes(r.value) for r in window.load().collect()) == [b"v1", b"v2", b"v3"]
    assert "headers" not in base().option("subscribe", "a").load().columns


def test_stream_copy_is_exact_and_commits_the_group_offsets(spark, store, tmp_path):
    store.create_topic("a", partitions=3)
    store.create_topic("b", partitions=3)
    with store.producer(linger_ms=0) as producer:
        for i in range(40):
            producer.send("a", f"v{i}", key=f"k{i % 7}")
            if i % 10 == 9:
                producer.flush()
    query = copy_available_now(spark, store, "a", "b", tmp_path / "ck", groupId="copier", maxOffsetsPerTrigger="15")
    assert query.exception() is None
    assert records_by_partition(store, "b") == records_by_partition(store, "a")
    progress = query.recentProgress
    assert len([p for p in progress if p["numInputRows"]]) >= 3  # 40 records at most 15 (whole commits) a batch
    latest = {"a": {str(p): n for p, n in store.end_offsets("a").items()}}
    assert json.loads(progress[-1]["sources"][0]["latestOffset"]) == latest
    assert progress[-1]["sources"][0]["metrics"]["maxOffsetsBehindLatest"] == "0"
    described = describe_group(store.context, "copier")
    assert {(p.partition, p.committed, p.lag) for p in described.partitions} == {
        (p, n, 0) for p, n in store.end_offsets("a").items()
    }
    # A restart from the checkpoint reads only what is new.
    with store.producer() as producer:
        producer.send("a", "late", key="k1")
    copy_available_now(spark, store, "a", "b", tmp_path / "ck", groupId="copier")
    assert records_by_partition(store, "b") == records_by_partition(store, "a")


def test_a_query_behind_the_log_reports_the_kafka_sources_lag_metrics_in_its_progress(spark, store, tmp_path):
    # 6 commits of 1 + 2 + 4 records to partitions 1, 2, 3 (partition 0 stays empty):
    # maxOffsetsPerTrigger=7 reads one commit a batch, so batch k is behind by
    # 0, 6-k, 12-2k, 24-4k (avg 8.75 after the first: the rounding is tested too).
    store.create_topic("a", partitions=4)
    with store.producer(linger_ms=0) as producer:
        for i in range(6):
            for p, n in ((1, 1), (2, 2), (3, 4)):
                for j in range(n):
                    producer.send("a", f"{p}-{i}-{j}", partition=p)
            producer.flush()

    def run(checkpoint):
        query = (
            source(spark, store, subscribe="a", startingOffsets="earliest", maxOffsetsPerTrigger="7")
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        assert query.exception() is None
        return [p["sources"][0] for p in query.recentProgress if p["numInputRows"]]

    sources = run(tmp_path / "ck")
    latest = store.end_offsets("a")
    assert len(sources) == 6
    assert sources[0]["description"] == "lakelog[subscribe=a]"
    for progress in sources:
        assert partition_offsets(progress, "latestOffset") == latest
        assert progress["metrics"] == expected_lag_metrics(latest, partition_offsets(progress, "endOffset"))
    assert sources[0]["metrics"] == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "20",
        "avgOffsetsBehindLatest": "8.8",
    }
    assert sources[-1]["metrics"] == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "0",
        "avgOffsetsBehindLatest": "0.0",
    }

    # Restarted from its checkpoint with new records: behind again, by what is new.
    with store.producer(linger_ms=0) as producer:
        for i in range(9):
            producer.send("a", f"late-{i}", partition=i % 3)
    resumed = run(tmp_path / "ck")
    latest = store.end_offsets("a")
    assert resumed[0]["metrics"] == expected_lag_metrics(latest, partition_offsets(resumed[0], "endOffset"))
    assert resumed[-1]["metrics"]["maxOffsetsBehindLatest"] == "0"


def test_a_rate_limit_never_splits_a_transaction(spark, store, tmp_path):
    store.create_topic("t", partitions=2)
    producer = store.transactional_producer("txn-writer")
    producer.init_transactions()
    for txn in range(6):
        producer.begin_transaction()
        for j in range(5):
            producer.send("t", f"{txn}-{j}", partition=j % 2)
        producer.commit_transaction()
    batches: list[set[str]] = []

    def collect(df, batch_id):
        values = {bytes(r.value).decode() for r in df.collect()}
        if values:
            batches.append(values)

    query = (
        source(spark, store, subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="7")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert len(batches) == 6  # 7 allows one 5-record transaction, not two
    for values in batches:
        assert len({v.split("-")[0] for v in values}) == 1 and len(values) == 5


def test_new_topics_and_partitions_are_picked_up_while_running(spark, store):
    store.create_topic("ev1", partitions=1)
    seen = []
    query = (
        source(spark, store, subscribePattern="ev.*", startingOffsets="earliest")
        .writeStream.foreachBatch(lambda df, _: seen.extend((r.topic, r.partition) for r in df.collect()))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        with store.producer() as producer:
            producer.send("ev1", "first", partition=0)
        store.create_topic("ev2", partitions=1)
        store.create_partitions("ev1", 2)
        with store.producer() as producer:
            producer.send("ev2", "second", partition=0)
            producer.send("ev1", "third", partition=1)
        deadline = time.monotonic() + 120
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        query.stop()
    assert sorted(seen) == [("ev1", 0), ("ev1", 1), ("ev2", 0)]


def test_data_removed_before_it_was_read_fails_the_query_or_is_skipped_with_a_warning(spark, store, tmp_path):
    store.create_topic("a", partitions=1)
    store.create_topic("b", partitions=1)
    with store.producer() as producer:
        for i in range(5):
            producer.send("a", f"v{i}")
    copy_available_now(spark, store, "a", "b", tmp_path / "ck")
    for i in range(5, 10):
        with store.producer() as producer:
            producer.send("a", f"v{i}")
    # Retention at file granularity: the files holding offsets 0..7 go.
    spark.sql(f"DELETE FROM delta.`{store.uri}` WHERE topic = 'a' AND partition = 0 AND offset < 8")
    version = TableLog(store.uri).latest_version()
    query = copy_available_now(spark, store, "a", "b", tmp_path / "ck")
    assert query.exception() is not None
    assert "a-0: offsets 5..7" in str(query.exception())
    assert TableLog(store.uri).latest_version() == version  # nothing written
    query = copy_available_now(spark, store, "a", "b", tmp_path / "ck", failOnDataLoss="false")
    assert query.exception() is None
    assert [bytes(r.value) for r in store.read("b").orderBy("offset").collect()][-2:] == [b"v8", b"v9"]


def test_optimize_under_a_live_query_neither_fails_it_nor_repeats_records(spark, store, tmp_path):
    store.create_topic("a", partitions=2)
    store.create_topic("b", partitions=2)
    query = (
        source(spark, store, subscribe="a", startingOffsets="earliest")
        .select("key", "value")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", "b")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        for round_ in range(4):
            with store.producer() as producer:
                for i in range(10):
                    producer.send("a", f"r{round_}-{i}", key=f"k{i}")
            if round_ == 1:
                spark.sql(f"OPTIMIZE delta.`{store.uri}`")
        deadline = time.monotonic() + 120
        while sum(store.end_offsets("b").values()) < 40 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)  # a re-read would show up as more than 40
    finally:
        query.stop()
    assert query.exception() is None
    assert records_by_partition(store, "b") == records_by_partition(store, "a")


def test_bad_options_and_refused_records_fail_at_query_start_and_commit_nothing(spark, store, tmp_path):
    store.create_topic("a", partitions=1)
    with store.producer() as producer:
        producer.send("a", "x")
    with pytest.raises((PySparkException, CapturedException), match=r"(?i)unknown source option 'maxOffsetPerTrigger'"):
        source(spark, store, subscribe="a", maxOffsetPerTrigger="5")
    with pytest.raises((PySparkException, CapturedException), match="does not exist"):
        spark.read.format("lakelog").option("path", store.uri).option("subscribe", "nope").load().collect()
    for reader in (spark.read, spark.readStream):
        with pytest.raises((PySparkException, CapturedException)) as bad:
            reader.format("lakelog").option("path", store.uri).option("subscribe", "a").option(
                "startingOffsets", "{bad"
            ).load()
        # At load(), one line naming the error and the option; no Python worker traceback.
        assert "lakelog.engine.errors.InvalidConfigError: startingOffsets must be" in str(bad.value)
        assert "Traceback" not in str(bad.value) and len(str(bad.value).strip().splitlines()) <= 2
    version = TableLog(store.uri).latest_version()
    query = copy_available_now(spark, store, "a", "missing", tmp_path / "ck")
    assert "topic 'missing' does not exist" in str(query.exception())
    assert TableLog(store.uri).latest_version() == version


def test_batch_write_appends_in_one_commit_and_refuses_overwrite(spark, store):
    store.create_topic("w", partitions=2)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(20)], "key string, value string")
    df.write.format("lakelog").mode("append").option("path", store.uri).option("topic", "w").save()
    assert sum(store.end_offsets("w").values()) == 20
    entry = store.history_entries("w")[-1]
    assert sum(end - start for _, _, start, end in entry.ranges) == 20
    with pytest.raises((PySparkException, CapturedException), match="append-only"):
        df.write.format("lakelog").mode("overwrite").option("path", store.uri).option("topic", "w").save()
    assert sum(store.end_offsets("w").values()) == 20
    # What send() refuses, the sink refuses: nothing of the batch is committed.
    refused = [
        (spark.createDataFrame([("v", 253402300800000)], "value string, timestamp long"), "a timestamp must lie in"),
        (
            spark.createDataFrame(
                [("v", [(None, b"x")])], "value string, headers array<struct<key:string,value:binary>>"
            ),
            "header",
        ),
    ]
    for bad, message in refused:
        with pytest.raises((PySparkException, CapturedException), match=message):
            bad.write.format("lakelog").mode("append").option("path", store.uri).option("topic", "w").save()
    assert sum(store.end_offsets("w").values()) == 20


def test_stream_sink_replaying_a_committed_batch_adds_nothing(store):
    """The sink's commit, called twice for one batch id (a crash after the Delta commit)."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from lakelog.spark_connector.options import SinkOptions
    from lakelog.spark_connector.sink import LakelogStreamWriter, RecordsMessage, encode, to_records

    store.create_topic("s", partitions=1)
    batch = pa.record_batch({"value": pa.array([b"a", b"b"])})
    message = encode([to_records(batch, "s", False)])
    message = RecordsMessage(message.data, message.rows, "query-1")
    writer = LakelogStreamWriter(SinkOptions(store.uri, "s", StoreAccess(store.uri)), StructType())
    writer.commit([message], 0)
    writer.commit([message], 0)
    writer.commit([message], 1)
    assert store.end_offsets("s") == {0: 4}
    assert json.loads(json.dumps(store.history_entries("s")[-1].ranges)) == [["s", 0, 2, 4]]


def test_log_compaction_under_a_live_query_neither_fails_it_nor_repeats_records(spark, store, tmp_path):
    from lakelog.compaction import maintain

    store.create_topic("a", partitions=1, config={"cleanup.policy": "compact", "delete.retention.ms": 0})
    store.create_topic("b", partitions=1)
    query = (
        source(spark, store, subscribe="a", startingOffsets="earliest", maxOffsetsPerTrigger="7")
        .select("key", "value")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", "b")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    sent = []
    try:
        for round_ in range(6):
            with store.producer() as producer:
                for i in range(10):
                    value = f"r{round_}-{i}"
                    producer.send("a", value, key=f"k{i % 3}", partition=0)
                    sent.append(value)
            maintain(store.uri, topics=["a"], vacuum_retention_hours=0)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            copied = [bytes(r.value).decode() for r in store.read("b").orderBy("offset").collect()]
            if copied and copied[-1] == sent[-1]:
                break
            time.sleep(0.5)
        time.sleep(2)  # a re-read would show up as more records
    finally:
        query.stop()
    assert query.exception() is None
    copied = [bytes(r.value).decode() for r in store.read("b").orderBy("offset").collect()]
    # Each record at most once, in offset order; every record compaction kept was copied.
    assert len(copied) == len(set(copied))
    assert copied == sorted(copied, key=sent.index)
    remaining = [bytes(r.value).decode() for r in store.read("a").collect()]
    assert set(remaining) <= set(copied)
    assert len(remaining) < len(sent)  # compaction did remove records while the query ran
