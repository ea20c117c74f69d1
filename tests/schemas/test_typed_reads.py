"""Typed reads in Spark: ``format("lakelog").option("valueFormat", "avro")`` (or ``"json"``,
``"protobuf"``) decodes values in Confluent's wire format with Spark's ``from_avro`` (``from_json``,
lakelog-jvm.jar's ``lakelog_from_protobuf``) and the store's registry, batch and streaming; two
compatible schema versions read as the newest; an unknown schema id fails naming the record."""

from __future__ import annotations

import struct

import pytest
from google.protobuf import descriptor_pb2

from tests.schemas.avro_topics import V1, V2, produce_avro, served
from tests.schemas.json_topics import JSON_V1, JSON_V2, produce_json
from tests.schemas.protobuf_topics import PROTO_V1, PROTO_V2, FieldProto, produce_protobuf
from tests.schemas.test_typed_tables import delta_rs_rows

pytestmark = pytest.mark.spark
# Each format's producer and two compatible versions of one Order schema (id, item; then note).
FORMATS = {
    "avro": (produce_avro, V1, V2),
    "json": (produce_json, JSON_V1, JSON_V2),
    "protobuf": (produce_protobuf, PROTO_V1, PROTO_V2),
}


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


def basket_file() -> descriptor_pb2.FileDescriptorProto:
    """``shop.Basket``: an enum, a repeated nested message, a map, a Timestamp, a repeated string."""
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/basket.proto", package="shop", syntax="proto3")
    fdp.dependency.append("google/protobuf/timestamp.proto")
    basket = fdp.message_type.add(name="Basket")
    status = basket.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    line = basket.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=FieldProto.TYPE_STRING)
    line.field.add(name="qty", number=2, type=FieldProto.TYPE_INT32)
    entry = basket.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=FieldProto.TYPE_STRING, label=FieldProto.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=FieldProto.TYPE_INT32, label=FieldProto.LABEL_OPTIONAL)
    repeated, optional = FieldProto.LABEL_REPEATED, FieldProto.LABEL_OPTIONAL
    basket.field.add(name="id", number=1, type=FieldProto.TYPE_INT64, label=optional)
    basket.field.add(name="status", number=2, type=FieldProto.TYPE_ENUM, type_name=".shop.Basket.Status")
    basket.field.add(
        name="lines", number=3, type=FieldProto.TYPE_MESSAGE, type_name=".shop.Basket.Line", label=repeated
    )
    basket.field.add(
        name="tags", number=4, type=FieldProto.TYPE_MESSAGE, type_name=".shop.Basket.TagsEntry", label=repeated
    )
    basket.field.add(name="at", number=5, type=FieldProto.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    basket.field.add(name="notes", number=6, type=FieldProto.TYPE_STRING, label=repeated)
    return fdp


def test_protobuf_nested_repeated_enum_map_and_timestamp(spark, store, registry_url):
    store.create_topic("orders", partitions=1)
    values = [
        {
            "id": 1,
            "status": "PAID",
            "lines": [{"sku": "tea", "qty": 2}, {"sku": "cake"}],
            "tags": {"gift": 1},
            "at": "2026-01-02T03:04:05.123456Z",
            "notes": ["a", "b"],
        },
        {"id": 2},
    ]
    produce_protobuf(store, registry_url, "orders", basket_file(), values)
    df = typed(spark, store, "protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,status:string,lines:array<struct<sku:string,qty:int>>,tags:map<string,int>,"
        "at:timestamp,notes:array<string>>"
    )
    rows = df.selectExpr("value.*", "unix_micros(value.at) AS micros").orderBy("id").collect()
    first, second = rows
    assert (first.status, [(x.sku, x.qty) for x in first.lines]) == ("PAID", [("tea", 2), ("cake", None)])
    assert (first.tags, first.notes, first.micros) == ({"gift": 1}, ["a", "b"], 1767323045123456)
    # Unset in the message: null for singular fields (spark-protobuf's reading), empty when repeated.
    assert (second.status, second.lines, second.tags, second.at, second.notes) == (None, [], {}, None, [])


def test_protobuf_data_that_does_not_parse_fails_naming_the_record_or_reads_null(spark, store, registry_url):
    store.create_topic("orders", partitions=1)
    produce_protobuf(store, registry_url, "orders", PROTO_V1, [{"id": 1, "item": "a"}])
    (registered,) = {
        bytes(r.value[1:5])
        for r in spark.read.format("lakelog").option("path", store.uri).option("subscribe", "orders").load().collect()
    }
    with store.producer() as producer:
        # The subject's schema id, message index [0], then a field 1 varint cut short.
        producer.send("orders", value=b"\x00" + registered + b"\x00\x08\xff")
        # Message index [3]: the schema's file has one message.
        producer.send("orders", value=b"\x00" + registered + b"\x02\x06\x08\x01")
    schema_id = struct.unpack(">I", registered)[0]
    with pytest.raises(Exception, match=rf"partition 0 offset 1 \(schema id {schema_id}\) does not decode as Protobuf"):
        typed(spark, store, "protobuf").collect()
    with pytest.raises(Exception, match=r"offset 2 .*message indexes \[3\] name no message"):
        typed(spark, store, "protobuf").where("offset = 2").collect()
    rows = typed(spark, store, "protobuf", mode="PERMISSIVE").orderBy("offset").collect()
    assert [r.value and r.value.id for r in rows] == [1, None, None]


def test_protobuf_records_of_the_files_second_message_read_with_value_message(spark, store, registry_url, tmp_path):
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/customer.proto", package="shop", syntax="proto3")
    address = fdp.message_type.add(name="Address")
    address.field.add(name="city", number=1, type=FieldProto.TYPE_STRING)
    customer = fdp.message_type.add(name="Customer")
    customer.field.add(name="id", number=1, type=FieldProto.TYPE_INT64)
    customer.field.add(name="address", number=2, type=FieldProto.TYPE_MESSAGE, type_name=".shop.Address")
    store.create_topic("orders", partitions=1)
    # The serializer writes message indexes [1] before each Customer.
    produce_protobuf(store, registry_url, "orders", fdp, [{"id": 7, "address": {"city": "Oslo"}}], name="Customer")
    with pytest.raises(Exception, match=r"offset 0 .*it holds message shop\.Customer, not the subject's shop\.Address"):
        typed(spark, store, "protobuf").collect()
    (row,) = typed(spark, store, "protobuf", valueMessage="Customer").select("value.*").collect()
    assert (row.id, row.address.city) == (7, "Oslo")
    table = tmp_path / "customers"
    store.materialize("orders", str(table), message="shop.Customer")
    assert [(r["id"], r["address"]) for r in delta_rs_rows(table)] == [(7, {"city": "Oslo"})]


def test_recursive_protobuf_message_is_a_named_error(spark, store, registry_url):
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/node.proto", package="shop", syntax="proto3")
    node = fdp.message_type.add(name="Node")
    node.field.add(name="name", number=1, type=FieldProto.TYPE_STRING)
    node.field.add(name="next", number=2, type=FieldProto.TYPE_MESSAGE, type_name=".shop.Node")
    store.create_topic("orders", partitions=1)
    produce_protobuf(store, registry_url, "orders", fdp, [{"name": "a", "next": {"name": "b"}}])
    with pytest.raises(Exception, match=r"field shop\.Node\.next refers back to message shop\.Node"):
        typed(spark, store, "protobuf").collect()
