"""The typed read's decoding expression and options, planned without Spark (pure)."""

from __future__ import annotations

import base64
import json
import re

import pytest
from google.protobuf.descriptor_pb2 import FileDescriptorProto, FileDescriptorSet

from lakelog.engine.errors import InvalidConfigError
from lakelog.schemas.json_spark_types import JsonSchemaMappingError
from lakelog.schemas.protobuf_schemas import parse_protobuf
from lakelog.schemas.schemas_topic import RegistryState, SchemaVersion, schema_record
from lakelog.schemas.spark_columns import (
    Decoding,
    TypedReadError,
    avro_expression,
    header,
    json_expression,
    protobuf_expression,
    read_message,
    subject_format,
)
from lakelog.spark_connector.options import parse_source_options
from tests.schemas.avro_topics import V1, V2


def state_with(*versions: SchemaVersion) -> RegistryState:
    state = RegistryState()
    state.fold((i, *schema_record(sv)) for i, sv in enumerate(versions))
    return state


def test_each_schema_id_reads_with_its_writer_schema_as_the_latest():
    state = state_with(
        SchemaVersion("orders-value", 1, 7, json.dumps(V1)), SchemaVersion("orders-value", 2, 9, json.dumps(V2))
    )
    text = avro_expression(state, Decoding("value", "orders", "orders-value"))
    assert header(7) == "X'0000000007'" and "WHEN X'0000000007' THEN from_avro" in text
    old, new = text.split("WHEN X'0000000009'")
    assert "'avroSchema'" in old and "'avroSchema'" not in new  # the latest reads as itself
    assert "raise_error" in new and "offset" in new
    permissive = avro_expression(state, Decoding("value", "orders", "orders-value", "PERMISSIVE"))
    assert "raise_error" not in permissive and "ELSE NULL" in permissive


def test_a_subject_without_avro_schema_is_a_named_error():
    with pytest.raises(TypedReadError, match="subject 'orders-value' has no schema"):
        avro_expression(RegistryState(), Decoding("value", "orders", "orders-value"))
    state = state_with(SchemaVersion("orders-value", 1, 1, '{"type":"object"}', "JSON"))
    with pytest.raises(TypedReadError, match="holds JSON schemas"):
        avro_expression(state, Decoding("value", "orders", "orders-value"))


JSON_V1 = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
JSON_V2 = {"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string"}}, "required": ["id"]}


def test_json_reads_every_schema_id_as_the_latest_struct():
    state = state_with(
        SchemaVersion("orders-value", 1, 7, json.dumps(JSON_V1), "JSON"),
        SchemaVersion("orders-value", 2, 9, json.dumps(JSON_V2), "JSON"),
    )
    decoding = Decoding("value", "orders", "orders-value", format="json")
    text = json_expression(state, decoding)
    assert "IN (X'0000000007', X'0000000009')" in text and text.count("from_json(") == 1
    assert '"name": "note"' in text  # the newest schema's struct
    assert "raise_error" in text and "'mode', 'FAILFAST'" in text
    permissive = json_expression(state, Decoding("value", "orders", "orders-value", "PERMISSIVE", "json"))
    assert "raise_error" not in permissive and "ELSE NULL" in permissive and "'mode', 'PERMISSIVE'" in permissive
    assert subject_format(state, decoding) == "json"


def test_json_subject_errors_are_named():
    avro = state_with(SchemaVersion("orders-value", 1, 1, json.dumps(V1)))
    with pytest.raises(TypedReadError, match="holds AVRO schemas, not JSON: read it with valueFormat=avro"):
        json_expression(avro, Decoding("value", "orders", "orders-value", format="json"))
    unmapped = {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
    state = state_with(SchemaVersion("orders-value", 1, 1, json.dumps(unmapped), "JSON"))
    with pytest.raises(JsonSchemaMappingError, match="subject 'orders-value': 'oneOf'"):
        json_expression(state, Decoding("value", "orders", "orders-value", format="json"))
    proto = state_with(
        SchemaVersion("orders-value", 1, 1, 'syntax = "proto3"; message M { int64 id = 1; }', "PROTOBUF")
    )
    with pytest.raises(TypedReadError, match=r"holds PROTOBUF schemas, not JSON: read it with valueFormat=protobuf"):
        json_expression(proto, Decoding("value", "orders", "orders-value", format="json"))


PROTO_V1 = 'syntax = "proto3"; package shop; message Order { int64 id = 1; string item = 2; }'
PROTO_V2 = """syntax = "proto3"; package shop; import "google/protobuf/timestamp.proto";
message Order { int64 id = 1; string item = 2; google.protobuf.Timestamp at = 3; }"""


def protobuf_options(text: str) -> list[dict[str, str]]:
    """The options map of each lakelog_from_protobuf call in ``text``."""
    calls = re.findall(r"lakelog_from_protobuf\(substring\(`value`, 6\), `partition`, `offset`, map\((.*?)\)\)", text)
    return [dict(zip(*[iter(re.findall(r"'((?:[^'\\]|\\.)*)'", call))] * 2, strict=True)) for call in calls]


def test_protobuf_reads_each_schema_id_as_the_latest_message():
    state = state_with(
        SchemaVersion("orders-value", 1, 7, PROTO_V1, "PROTOBUF"),
        SchemaVersion("orders-value", 2, 9, PROTO_V2, "PROTOBUF"),
    )
    decoding = Decoding("value", "orders", "orders-value", format="protobuf")
    assert subject_format(state, decoding) == "protobuf"
    text = protobuf_expression(state, decoding)
    assert "WHEN X'0000000007' THEN lakelog_from_protobuf" in text and "raise_error" in text
    old, new = protobuf_options(text)
    assert (old["schemaId"], new["schemaId"], old["message"], old["mode"]) == ("7", "9", "shop.Order", "FAILFAST")
    # Each id its own writer file (for its message indexes), both the latest files to read with.
    writers = [FileDescriptorProto.FromString(base64.b64decode(o["writerFile"])) for o in (old, new)]
    assert [[f.name for f in w.message_type[0].field] for w in writers] == [["id", "item"], ["id", "item", "at"]]
    assert old["readerFiles"] == new["readerFiles"]
    files = FileDescriptorSet.FromString(base64.b64decode(new["readerFiles"])).file
    assert [f.name for f in files] == ["google/protobuf/timestamp.proto", "schema.proto"]
    assert files[1].message_type[0].field[2].type_name == ".google.protobuf.Timestamp"
    permissive = protobuf_expression(state, Decoding("value", "orders", "orders-value", "PERMISSIVE", "protobuf"))
    assert "raise_error" not in permissive and {o["mode"] for o in protobuf_options(permissive)} == {"PERMISSIVE"}


def test_protobuf_message_read_is_the_first_or_the_one_named():
    text = """syntax = "proto3"; package shop;
    message Address { string city = 1; message Line { string text = 1; } map<string, string> tags = 2; }
    message Customer { Address address = 1; }"""
    main = parse_protobuf(text)
    assert read_message(main, Decoding("value", "t", "t-value", format="protobuf")) == "shop.Address"
    for named, full in [("Customer", "shop.Customer"), ("shop.Address.Line", "shop.Address.Line")]:
        assert read_message(main, Decoding("value", "t", "t-value", format="protobuf", message=named)) == full
    with pytest.raises(
        TypedReadError,
        match=r"no message 'Order' to read; its messages: shop\.Address, shop\.Address\.Line, shop\.Customer$",
    ):
        read_message(main, Decoding("value", "t", "t-value", format="protobuf", message="Order"))


def test_protobuf_schema_that_does_not_resolve_is_a_named_error():
    unresolved = 'syntax = "proto3"; import "other.proto"; message Order { Other other = 1; }'
    state = state_with(SchemaVersion("orders-value", 1, 3, unresolved, "PROTOBUF"))
    with pytest.raises(TypedReadError, match=r"version 1 \(schema id 3\) cannot be read: .*other\.proto"):
        protobuf_expression(state, Decoding("value", "orders", "orders-value", format="protobuf"))


def options(**extra: str):
    return parse_source_options({"path": "/s", "subscribe": "orders", **extra}, streaming=False)


def test_format_options():
    assert options().decodings == ()
    (value,) = options(valueFormat="AVRO", mode="permissive").decodings
    assert value == Decoding("value", "orders", "orders-value", "PERMISSIVE")
    key, value = options(keyFormat="avro", valueFormat="avro", valueSubject="s").decodings
    assert (key.subject, value.subject) == ("orders-key", "s")
    key, value = options(keyFormat="json", valueFormat="protobuf", valueMessage="shop.Order").decodings
    assert (key.format, value.format, key.message, value.message) == ("json", "protobuf", None, "shop.Order")
    for bad, match in [
        ({"valueFormat": "xml"}, "valueFormat"),
        ({"valueSubject": "s"}, "valueSubject"),
        ({"valueFormat": "avro", "valueMessage": "M"}, "'valueMessage' applies with option valueFormat=protobuf only"),
        ({"mode": "PERMISSIVE"}, "mode"),
        ({"valueFormat": "avro", "mode": "DROPMALFORMED"}, "mode"),
    ]:
        with pytest.raises(InvalidConfigError, match=match):
            options(**bad)
    with pytest.raises(InvalidConfigError, match="exactly one topic"):
        parse_source_options({"path": "/s", "subscribePattern": "o.*", "valueFormat": "avro"}, streaming=False)
