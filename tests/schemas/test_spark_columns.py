"""The typed read's decoding expression and options, planned without Spark (pure)."""

from __future__ import annotations

import json

import pytest

from lakelog.engine.errors import InvalidConfigError
from lakelog.schemas.schemas_topic import RegistryState, SchemaVersion, schema_record
from lakelog.schemas.spark_columns import Decoding, TypedReadError, avro_expression, header
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


def options(**extra: str):
    return parse_source_options({"path": "/s", "subscribe": "orders", **extra}, streaming=False)


def test_format_options():
    assert options().decodings == ()
    (value,) = options(valueFormat="AVRO", mode="permissive").decodings
    assert value == Decoding("value", "orders", "orders-value", "PERMISSIVE")
    key, value = options(keyFormat="avro", valueFormat="avro", valueSubject="s").decodings
    assert (key.subject, value.subject) == ("orders-key", "s")
    for bad, match in [
        ({"valueFormat": "xml"}, "valueFormat"),
        ({"valueSubject": "s"}, "valueSubject"),
        ({"mode": "PERMISSIVE"}, "mode"),
        ({"valueFormat": "avro", "mode": "DROPMALFORMED"}, "mode"),
    ]:
        with pytest.raises(InvalidConfigError, match=match):
            options(**bad)
    with pytest.raises(InvalidConfigError, match="exactly one topic"):
        parse_source_options({"path": "/s", "subscribePattern": "o.*", "valueFormat": "avro"}, streaming=False)
