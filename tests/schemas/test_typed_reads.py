"""Typed reads in Spark: ``format("lakelog").option("valueFormat", "avro")`` decodes values in
Confluent's wire format with Spark's ``from_avro`` and the store's registry, batch and streaming;
two compatible schema versions read as the newest; an unknown schema id fails naming the record."""

from __future__ import annotations

import struct

import pytest

from tests.schemas.avro_topics import V1, V2, produce_avro, served

pytestmark = pytest.mark.spark


@pytest.fixture
def registry_url(store):
    with served(store) as url:
        yield url


@pytest.fixture
def evolved(store, registry_url):
    """Topic ``orders``: two records written with V1, then two with V2 (a compatible added field)."""
    store.create_topic("orders", partitions=1)
    produce_avro(store, registry_url, "orders", V1, [{"id": 1, "item": "a"}, {"id": 2, "item": "b"}])
    produce_avro(store, registry_url, "orders", V2, [{"id": 3, "item": "c", "note": "x"}, {"id": 4, "item": "d"}])
    return store


def typed(spark, store, **options):
    reader = spark.read.format("lakelog").option("path", store.uri).option("subscribe", "orders")
    return reader.option("valueFormat", "avro").options(**options).load()


def test_batch_read_decodes_both_versions_as_the_newest(spark, evolved):
    df = typed(spark, evolved)
    assert df.schema["value"].dataType.fieldNames() == ["id", "item", "note"]
    rows = df.select("offset", "key", "value.*").orderBy("offset").collect()
    assert [(r.offset, r.id, r.item, r.note) for r in rows] == [
        (0, 1, "a", None),
        (1, 2, "b", None),
        (2, 3, "c", "x"),
        (3, 4, "d", None),
    ]
    assert rows[0].key == b"1"  # keys stay bytes without keyFormat


def test_streaming_read_decodes(spark, evolved, tmp_path):
    stream = (
        spark.readStream.format("lakelog")
        .option("path", evolved.uri)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .load()
        .select("offset", "value.*")
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("typed_stream")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    rows = spark.sql("SELECT * FROM typed_stream ORDER BY offset").collect()
    assert [(r.id, r.note) for r in rows] == [(1, None), (2, None), (3, "x"), (4, None)]


def test_unknown_schema_id_fails_naming_the_record_or_reads_null(spark, evolved):
    with evolved.producer() as producer:
        producer.send("orders", value=b"\x00" + struct.pack(">I", 999) + b"\x02")
    with pytest.raises(Exception, match=r"topic 'orders' partition 0 offset 4 names schema id 999"):
        typed(spark, evolved).collect()
    rows = typed(spark, evolved, mode="PERMISSIVE").orderBy("offset").collect()
    assert [r.value is None for r in rows] == [False, False, False, False, True]


def test_subject_without_schema_is_a_named_error(spark, store):
    # Raised as InvalidConfigError in Spark's Python worker at load(); the driver gets it wrapped by Spark.
    store.create_topic("orders", partitions=1)
    with pytest.raises(Exception, match="subject 'orders-value' has no schema"):
        typed(spark, store)
