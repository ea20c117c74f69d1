"""Topic administration against a real store (real Delta commits)."""

from __future__ import annotations

import pytest

from lakelog.engine.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    StoreError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from lakelog.store import Store

pytestmark = pytest.mark.spark


def test_open_creates_a_store_and_reopens_it(spark, tmp_path):
    path = tmp_path / "s"
    store = Store.open(path, spark=spark)
    store.create_topic("orders", partitions=3)
    again = Store.open(str(path), spark=spark)
    assert again.list_topics() == ["orders"]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail.partitionColumns == ["topic", "partition"]
    assert detail.properties["lakelog.format.version"] == "1"
    assert detail.properties["delta.dataSkippingStatsColumns"] == "offset,timestamp"


def test_open_refuses_paths_that_are_not_stores(spark, tmp_path):
    plain = tmp_path / "plain"
    spark.range(3).write.format("delta").save(str(plain))
    with pytest.raises(StoreError, match="not a lakelog store"):
        Store.open(plain, spark=spark)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("hello")
    with pytest.raises(StoreError, match="non-empty directory"):
        Store.open(junk, spark=spark)


def test_topic_lifecycle(store):
    created = store.create_topic("orders", partitions=3, config={"cleanup.policy": "compact", "retention.ms": "1000"})
    assert created.partitions == 3
    assert created.config()["cleanup.policy"] == ("compact",)
    assert created.config()["retention.ms"] == 1000
    assert created.config()["max.message.bytes"] == 1_048_588
    store.create_topic("payments")
    assert store.list_topics() == ["orders", "payments"]
    assert store.describe_topic("payments").partitions == 1

    grown = store.create_partitions("orders", 5)
    assert grown.partitions == 5 and grown.topic_id == created.topic_id
    altered = store.alter_topic_config("orders", {"retention.ms": 5}, ["cleanup.policy"])
    assert altered.overrides == {"retention.ms": 5}

    store.delete_topic("orders")
    assert store.list_topics() == ["payments"]
    recreated = store.create_topic("orders", partitions=2)
    assert recreated.topic_id != created.topic_id and recreated.partitions == 2


def test_admin_errors_leave_the_store_unchanged(store):
    store.create_topic("orders", partitions=2, config={"retention.ms": 10})
    version = store.log.latest_version()
    before = store.describe_topic("orders")
    with pytest.raises(TopicExistsError):
        store.create_topic("orders")
    with pytest.raises(InvalidTopicError, match="contains"):
        store.create_topic("bad topic")
    with pytest.raises(InvalidConfigError, match="unknown topic config key 'retention'"):
        store.create_topic("x", config={"retention": 1})
    with pytest.raises(InvalidPartitionsError):
        store.create_partitions("orders", 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        store.describe_topic("nope")
    with pytest.raises(UnknownTopicOrPartitionError):
        store.delete_topic("nope")
    with pytest.raises(InvalidConfigError, match="must be at least -1"):
        store.alter_topic_config("orders", {"retention.ms": -5})
    assert store.log.latest_version() == version
    assert store.describe_topic("orders") == before
    assert store.list_topics() == ["orders"]


def test_deleting_a_topic_removes_its_records_and_a_new_topic_starts_at_zero(store):
    store.create_topic("t", partitions=1)
    store.create_topic("keep", partitions=1)
    with store.producer() as p:
        for i in range(5):
            p.send("t", f"v{i}")
        p.send("keep", "stays")
    store.delete_topic("t")
    assert store.read("keep").count() == 1
    store.create_topic("t", partitions=1)
    assert store.end_offsets("t") == {0: 0}
    with store.producer() as p:
        md = p.send("t", "new").get()
    assert md.offset == 0
    rows = store.read("t").collect()
    assert [bytes(r.value) for r in rows] == [b"new"]
