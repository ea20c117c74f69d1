"""format("lakelog") where a query written for format("kafka") expects Kafka's behaviour: save modes,
options Kafka has, option errors at load(), minPartitions, topic auto-creation."""

from __future__ import annotations

import contextlib

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql.utils import CapturedException

from lakelog.engine.commit import TableLog
from lakelog.spark_connector import register

pytestmark = pytest.mark.spark

SPARK_ERRORS = (PySparkException, CapturedException)


def produce(store, topic, count, partitions=1):
    store.create_topic(topic, partitions=partitions)
    with store.producer() as producer:
        for i in range(count):
            producer.send(topic, f"v{i}", partition=i % partitions)


def test_the_default_save_mode_appends_as_kafkas_sink_and_overwrite_and_ignore_are_refused(spark, store):
    store.create_topic("w", partitions=2)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(5)], "key string, value string")
    df.write.format("lakelog").option("path", store.uri).option("topic", "w").save()  # ErrorIfExists
    df.write.format("lakelog").mode("errorifexists").option("path", store.uri).option("topic", "w").save()
    df.write.format("lakelog").mode("append").option("path", store.uri).option("topic", "w").save()
    assert sum(store.end_offsets("w").values()) == 15
    assert len(store.history_entries("w")) == 1 + 3  # the creation, then one commit per write
    version = TableLog(store.uri).latest_version()
    for mode in ("overwrite", "ignore"):
        with pytest.raises(SPARK_ERRORS) as refused:
            df.write.format("lakelog").mode(mode).option("path", store.uri).option("topic", "w").save()
        message = str(refused.value)
        assert f"cannot write in save mode {mode.capitalize()}: topics are append-only" in message
        assert "Append and ErrorIfExists" in message
    assert TableLog(store.uri).latest_version() == version
    # the sink's own option errors still fail save() by name
    with pytest.raises(SPARK_ERRORS, match="unknown sink option 'subscribe'"):
        df.write.format("lakelog").option("path", store.uri).option("subscribe", "w").save()


def test_batch_and_streaming_only_options_fail_at_load_in_one_line(spark, store):
    produce(store, "a", 1)

    def load(reader, **options):
        reader = reader.format("lakelog").option("path", store.uri).option("subscribe", "a")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    cases = [
        (spark.readStream, {"endingOffsets": "latest"}, "option 'endingOffsets' only applies to batch queries"),
        (spark.read, {"groupId": "g"}, "option 'groupId' only applies to streaming queries"),
        (spark.read, {"maxOffsetsPerTrigger": "5"}, "option 'maxOffsetsPerTrigger' only applies to streaming"),
        (spark.read, {"startingOffsets": "latest"}, "option 'startingOffsets' cannot be latest (-1) for batch"),
    ]
    for reader, options, message in cases:
        with pytest.raises(SPARK_ERRORS) as bad:
            load(reader, **options)
        text = str(bad.value)
        assert f"lakelog.engine.errors.InvalidConfigError: {message}" in text
        assert "Traceback" not in text and len(text.strip().splitlines()) <= 2
    # and what each kind has loads
    assert load(spark.read, endingOffsets="latest").count() == 1
    assert load(spark.readStream, groupId="g", maxOffsetsPerTrigger="5").isStreaming


def test_without_the_jvm_provider_a_streaming_option_error_fails_the_query_by_name(spark, store, tmp_path):
    """The Python source alone cannot tell a streaming load() from a batch one: the error comes
    at start, as itself (PySpark's stream runner would turn a raising streamReader() into
    UnboundLocalError)."""
    produce(store, "a", 1)
    frame = (
        spark.readStream.format("lakelog_python")
        .option("path", store.uri)
        .option("subscribe", "a")
        .option("endingOffsets", "latest")
        .load()
    )
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    with contextlib.suppress(StreamingQueryException):
        query.awaitTermination(120)
    error = str(query.exception())
    assert "InvalidConfigError: option 'endingOffsets' only applies to batch queries" in error
    assert "UnboundLocalError" not in error


def test_min_partitions_spreads_a_partitions_records_over_more_tasks(spark, store, tmp_path):
    produce(store, "a", 40, partitions=2)

    def read(**options):
        reader = spark.read.format("lakelog").option("path", store.uri).option("subscribe", "a")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    assert read().rdd.getNumPartitions() == 2  # one task per topic-partition, as Kafka's source
    split = read(minPartitions="8")
    assert split.rdd.getNumPartitions() == 8
    rows = split.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in (0, 1) for o in range(20)]
    assert read(maxRecordsPerPartition="5").rdd.getNumPartitions() == 8
    # Kafka's options that mean nothing here are accepted (and logged)
    assert read(**{"kafka.bootstrap.servers": "b:9092", "kafkaConsumer.pollTimeoutMs": "10"}).count() == 40

    tasks = []

    def batch(frame, batch_id):
        if not frame.isEmpty():
            tasks.append((frame.rdd.getNumPartitions(), frame.count()))

    query = (
        spark.readStream.format("lakelog")
        .option("path", store.uri)
        .option("subscribe", "a")
        .option("startingOffsets", "earliest")
        .option("minPartitions", "6")
        .option("groupIdPrefix", "spark-kafka-source")
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    assert tasks == [(6, 40)]


def test_the_sink_creates_an_unknown_topic_only_with_auto_create_topics_enable(spark, store):
    rows = [("k1", "v1"), ("k2", "v2")]
    df = spark.createDataFrame(rows, "key string, value string")
    with pytest.raises(SPARK_ERRORS) as refused:
        df.write.format("lakelog").option("path", store.uri).option("topic", "fresh").save()
    assert "UnknownTopicOrPartitionError: topic 'fresh' does not exist" in str(refused.value)
    assert "auto.create.topics.enable=true" in str(refused.value)
    assert "fresh" not in store.list_topics()
    # The sink reads lakelog's settings where it commits, in a Python worker: the data source's
    # Python function carries the SparkContext's environment from registration on.
    environment = spark.sparkContext.environment
    added = {"LAKELOG_AUTO_CREATE_TOPICS_ENABLE": "true", "LAKELOG_NUM_PARTITIONS": "3"}
    environment.update(added)
    try:
        other = spark.newSession()
        register(other)
    finally:
        for key in added:
            environment.pop(key)
    other.createDataFrame(rows, "key string, value string").write.format("lakelog").option("path", store.uri).option(
        "topic", "fresh"
    ).save()
    assert store.describe_topic("fresh").partitions == 3
    assert sum(store.end_offsets("fresh").values()) == 2
    # a topic column naming several new topics
    both = other.createDataFrame([("x", "n1"), ("y", "n2"), ("z", "n1")], "value string, topic string")
    both.write.format("lakelog").option("path", store.uri).save()
    assert {t: sum(store.end_offsets(t).values()) for t in ("n1", "n2")} == {"n1": 2, "n2": 1}
