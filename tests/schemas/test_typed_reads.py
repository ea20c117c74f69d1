"""Typed reads in Spark: ``format("lakelog").option("valueFormat", "avro")`` (or ``"json"``) decodes
values in Confluent's wire format with Spark's ``from_avro`` (``from_json``) and the store's
registry, batch and streaming; two compatible schema versions read as the newest; an unknown
schema id fails naming the record."""

from __future__ import annotations

import struct

import pytest

from tests.schemas.avro_topics import V1, V2, produce_avro, served
from tests.schemas.json_topics import JSON_V1, JSON_V2, produce_json

pytestmark = pytest.mark.spark
# Each format's producer and two compatible versions of one Order schema (id, item; then note).
FORMATS = {"avro": (produce_avro, V1, V2), "json": (produce_json, JSON_V1, JSON_V2)}


@pytest.fixture
def registry_url(store):
    with served(store) as url:
        yield url


@pytest.fixture(params=sorted(FORMATS))
def fmt(request):
    return request.param


@pytest.fixture
def evolved(store, registry_url, fmt):
    """Topic ``orders``: two records written with V1, then two with V2 (a compatible added field)."""
    produce, v1, v2 = FORMATS[fmt]
    store.create_topic("orders", partitions=1)
    produce(store, registry_url, "orders", v1, [{"id": 1, "item": "a"}, {"id": 2, "item": "b"}])
    produce(store, registry_url, "orders", v2, [{"id": 3, "item": "c", "note": "x"}, {"id": 4, "item": "d"}])
    return store


def typed(spark, store, fmt="avro", **options):
    reader = spark.read.format("lakelog").option("path", store.uri).option("subscribe", "orders")
    return reader.option("valueFormat", fmt).options(**options).load()


def test_batch_read_decodes_both_versions_as_the_newest(spark, evolved, fmt):
    df = typed(spark, evolved, fmt)
    assert df.schema["value"].dataType.fieldNames() == ["id", "item", "note"]
    rows = df.select("offset", "key", "value.*").orderBy("offset").collect()
    assert [(r.offset, r.id, r.item, r.note) for r in rows] == [
        (0, 1, "a", None),
        (1, 2, "b", None),
        (2, 3, "c", "x"),
        (3, 4, "d", None),
    ]
    assert rows[0].key == b"1"  # keys stay bytes without keyFormat


def test_streaming_read_decodes(spark, evolved, fmt, tmp_path):
    stream = (
        spark.readStream.format("lakelog")
        .option("path", evolved.uri)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .option("valueFormat", fmt)
        .load()
        .select("offset", "value.*")
    )
    query = (
        stream.writeStream.format("memory")
        .queryName(f"typed_stream_{fmt}")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    rows = spark.sql(f"SELECT * FROM typed_stream_{fmt} ORDER BY offset").collect()
    assert [(r.id, r.note) for r in rows] == [(1, None), (2, None), (3, "x"), (4, None)]


def test_unknown_schema_id_fails_naming_the_record_or_reads_null(spark, evolved, fmt):
    with evolved.producer() as producer:
        producer.send("orders", value=b"\x00" + struct.pack(">I", 999) + b"\x02")
    with pytest.raises(Exception, match=r"topic 'orders' partition 0 offset 4 names schema id 999"):
        typed(spark, evolved, fmt).collect()
    rows = typed(spark, evolved, fmt, mode="PERMISSIVE").orderBy("offset").collect()
    assert [r.value is None for r in rows] == [False, False, False, False, True]


def test_subject_without_schema_is_a_named_error(spark, store):
    # Raised as InvalidConfigError in Spark's Python worker at load(); the driver gets it wrapped by Spark.
    store.create_topic("orders", partitions=1)
    with pytest.raises(Exception, match="subject 'orders-value' has no schema"):
        typed(spark, store)


def test_json_schema_without_spark_type_is_a_named_error(spark, store, registry_url):
    store.create_topic("orders", partitions=1)
    either = {"type": "object", "properties": {"id": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
    produce_json(store, registry_url, "orders", either, [{"id": 1}])
    with pytest.raises(Exception, match=r"subject 'orders-value': 'oneOf' of branches of different types"):
        typed(spark, store, "json")
