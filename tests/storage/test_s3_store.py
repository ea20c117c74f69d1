"""lakelog on an S3 store (s3a://) served by the loopback S3 server: the same code as local paths."""

from __future__ import annotations

import contextlib
import logging
from urllib.parse import unquote

import pytest
from pyspark.errors import StreamingQueryException

from lakelog import compaction
from lakelog.engine.storage.object_store import bucket_and_key
from lakelog.spark_connector.session import S3_LOG_STORE, s3_commit_hazard, warn_if_unsafe
from tests.log_checks import check_dense

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def keys_under(s3_server, uri: str) -> set[str]:
    bucket, prefix = bucket_and_key(uri)
    pages = s3_server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {o["Key"][len(prefix) + 1 :] for page in pages for o in page.get("Contents", [])}


def test_produce_read_poll_and_transactions_on_s3(s3_server, s3_store):
    store = s3_store
    assert s3_commit_hazard(store.spark, store.uri) is None
    store.create_topic("orders", partitions=2)
    with store.producer(linger_ms=0) as producer:
        sent = [producer.send("orders", f"v{i}", key=f"k{i % 5}") for i in range(30)]
        producer.flush()
    metadata = [f.get() for f in sent]
    ends = store.end_offsets("orders")
    assert sum(ends.values()) == 30 and {(m.partition, m.offset) for m in metadata} == {
        (p, o) for p, n in ends.items() for o in range(n)
    }
    assert any(k.startswith("topic=orders/partition=") for k in keys_under(s3_server, store.uri))

    # A consumer reads the Parquet files straight from S3 (s3fs), commits its offsets.
    consumer = store.consumer("billing", auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.subscribe(["orders"])
    polled = []
    for _ in range(5):
        polled += consumer.poll(timeout_ms=500)
    consumer.commit()
    committed = {tp.partition: m.offset for tp, m in consumer.committed(consumer.assignment()).items()}
    consumer.close()
    assert sorted(bytes(r.value).decode() for r in polled) == sorted(f"v{i}" for i in range(30))
    assert committed == ends

    # A transaction: records of an aborted one never appear, a committed one lands whole.
    txn = store.transactional_producer("t-1")
    txn.init_transactions()
    txn.begin_transaction()
    txn.send("orders", "aborted", key="x")
    txn.abort_transaction()
    txn.begin_transaction()
    for i in range(4):
        txn.send("orders", f"txn{i}", key="y")
    txn.commit_transaction()
    txn.close()
    rows = store.read("orders").select("topic", "partition", "offset", "value").collect()
    check_dense(rows)
    values = {bytes(r.value).decode() for r in rows}
    assert "aborted" not in values and {f"txn{i}" for i in range(4)} <= values and len(rows) == 34


def test_streaming_copy_with_checkpoint_on_s3(spark, s3_server, s3_store, s3_uri):
    store = s3_store
    store.create_topic("a", partitions=2)
    store.create_topic("b", partitions=2)
    with store.producer(linger_ms=0) as producer:
        for i in range(20):
            producer.send("a", f"v{i}", key=f"k{i % 3}")
            if i % 10 == 9:
                producer.flush()

    def copy() -> None:
        query = (
            spark.readStream.format("lakelog")
            .option("path", store.uri)
            .option("subscribe", "a")
            .option("startingOffsets", "earliest")
            .option("groupId", "copier")
            .load()
            .select("key", "value")
            .writeStream.format("lakelog")
            .option("path", store.uri)
            .option("topic", "b")
            .option("checkpointLocation", f"{s3_uri}-checkpoints/copy")
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(300)
        assert query.exception() is None

    def by_partition(topic):
        rows = store.read(topic).select("partition", "offset", "key", "value").orderBy("partition", "offset")
        return [(r.partition, bytes(r.key), bytes(r.value)) for r in rows.collect()]

    copy()
    assert by_partition("b") == by_partition("a")
    with store.producer() as producer:
        producer.send("a", "late", key="k1")
    copy()  # from the checkpoint on S3: only the new record
    assert by_partition("b") == by_partition("a")
    checkpoint = keys_under(s3_server, f"{s3_uri}-checkpoints/copy")
    assert any(k.startswith("offsets/") for k in checkpoint) and any(k.startswith("commits/") for k in checkpoint)


def test_maintain_compacts_optimizes_and_vacuums_on_s3(s3_server, s3_store):
    store = s3_store
    store.create_topic("c", partitions=1, config={"cleanup.policy": "compact", "min.compaction.lag.ms": 0})
    for round_ in range(4):
        with store.producer() as producer:
            for k in range(3):
                producer.send("c", f"r{round_}", key=f"k{k}")
    before = store.read("c").select("offset", "key", "value").collect()
    files_before = {k for k in keys_under(s3_server, store.uri) if k.endswith(".parquet")}
    report = compaction.maintain(store, vacuum_retention_hours=0)
    topic = next(t for t in report.topics if t.topic == "c")
    assert topic.files_after < topic.files_before and topic.records_removed_by_compaction > 0
    after = store.read("c").select("offset", "key", "value").collect()
    # The latest record of each key survives at its offset; the newest file is never touched.
    latest = {bytes(r.key): (r.offset, bytes(r.value)) for r in sorted(before, key=lambda r: r.offset)}
    assert {bytes(r.key): (r.offset, bytes(r.value)) for r in after} == latest
    assert store.end_offsets("c") == {0: 12}
    # VACUUM (delta-rs on S3) deleted every replaced file: the bucket holds exactly the live ones.
    files_after = {k for k in keys_under(s3_server, store.uri) if k.endswith(".parquet")}
    live = {unquote(f.path) for f in store.log.snapshot().files}
    assert report.vacuumed_files >= len(files_before - live) > 0
    assert files_after == live


def test_a_session_with_deltas_single_driver_s3_log_store_is_reported(spark, s3_uri, caplog):
    unsafe = spark.newSession()
    unsafe.conf.set("spark.delta.logStore.s3a.impl", "io.delta.storage.S3SingleDriverLogStore")
    hazard = s3_commit_hazard(unsafe, s3_uri)
    assert hazard is not None and "S3SingleDriverLogStore" in hazard and S3_LOG_STORE in hazard
    with caplog.at_level(logging.WARNING, logger="lakelog.store"):
        # What Store.open(s3_uri, spark=unsafe) runs first (the rest of open would only
        # register format("lakelog") again, which Spark refuses in a second session).
        warn_if_unsafe(unsafe, s3_uri)
    assert any("UNSAFE for concurrent writers" in r.getMessage() for r in caplog.records)
    no_conditional = spark.newSession()
    no_conditional.conf.set("spark.hadoop.fs.s3a.create.conditional.enabled", "false")
    assert "create.conditional.enabled=false" in (s3_commit_hazard(no_conditional, s3_uri) or "")
