"""JSON Schema -> the Spark type ``from_json`` reads into (pure; pyspark's types parse the result
without a JVM, so each case checks that Spark would accept the schema too)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import StructType

from lakelog.schemas.json_spark_types import JsonSchemaMappingError, spark_struct


def simple(schema: dict, references: dict | None = None) -> str:
    return StructType.fromJson(spark_struct(schema, "s-value", references)).simpleString()


def obj(**properties) -> dict:
    return {"type": "object", "properties": properties}


CASES = [
    (obj(a={"type": "string"}), "struct<a:string>"),
    (obj(a={"type": "integer"}, b={"type": "number"}, c={"type": "boolean"}), "struct<a:bigint,b:double,c:boolean>"),
    (obj(t={"type": "string", "format": "date-time"}), "struct<t:string>"),
    (obj(a={"type": ["integer", "null"]}), "struct<a:bigint>"),
    (obj(a={"type": ["integer", "number"]}), "struct<a:double>"),
    (obj(a={"type": "array", "items": {"type": "string"}}), "struct<a:array<string>>"),
    (
        obj(a=obj(b={"type": "array", "items": obj(c={"type": "integer"})})),
        "struct<a:struct<b:array<struct<c:bigint>>>>",
    ),
    (obj(m={"type": "object", "additionalProperties": {"type": "integer"}}), "struct<m:map<string,bigint>>"),
    (obj(a={"anyOf": [{"type": "string"}, {"type": "null"}]}), "struct<a:string>"),
    (obj(a={"oneOf": [{"type": "integer"}, {"type": "integer", "minimum": 5}]}), "struct<a:bigint>"),
    (obj(e={"enum": ["x", "y"]}), "struct<e:string>"),
    (obj(c={"const": 3}), "struct<c:bigint>"),
    ({"properties": {"a": {"type": "string"}}}, "struct<a:string>"),  # an object without "type"
    (
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/A"}},
            "definitions": {"A": obj(x={"type": "boolean"})},
        },
        "struct<a:struct<x:boolean>>",
    ),
    (
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}},
        "struct<a:string>",
    ),
    ({"allOf": [obj(a={"type": "string"}), {"properties": {"b": {"type": "integer"}}}]}, "struct<a:string,b:bigint>"),
]


@pytest.mark.parametrize(("schema", "expected"), CASES)
def test_mapping(schema, expected):
    assert simple(schema) == expected


def test_nullability_follows_required_and_null_types():
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "note": {"type": "string"},
            "maybe": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"type": ["string", "null"]}},
        },
        "required": ["id", "maybe", "tags"],
    }
    struct = StructType.fromJson(spark_struct(schema, "s-value"))
    assert [(f.name, f.nullable) for f in struct.fields] == [
        ("id", False),
        ("note", True),
        ("maybe", True),
        ("tags", False),
    ]
    assert struct["tags"].dataType.containsNull is True


def test_a_registered_reference_is_followed():
    schema = obj(customer={"$ref": "customer.json"}, addr={"$ref": "customer.json#/definitions/Address"})
    customer = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "home": {"$ref": "#/definitions/Address"}},
        "definitions": {"Address": obj(city={"type": "string"})},
    }
    assert simple(schema, {"customer.json": customer}) == (
        "struct<customer:struct<name:string,home:struct<city:string>>,addr:struct<city:string>>"
    )


REFUSED = [
    (
        obj(a={"oneOf": [{"type": "string"}, {"type": "integer"}]}),
        "'oneOf' of branches of different types",
        "#/properties/a",
    ),
    (obj(a={"anyOf": [{"type": "string"}, obj(b={"type": "string"})]}), "'anyOf' of branches", "#/properties/a"),
    (obj(a={"type": ["string", "integer"]}), "several types", "#/properties/a"),
    (obj(a={"$ref": "other.json"}), "no registered reference", "#/properties/a"),
    (obj(a={"$ref": "#/definitions/Missing"}), "points at nothing", "#/properties/a"),
    (
        {
            "type": "object",
            "properties": {"n": {"$ref": "#/definitions/N"}},
            "definitions": {"N": obj(next={"$ref": "#/definitions/N"})},
        },
        "recursive '\\$ref'",
        "#/properties/n",
    ),
    (obj(a={"type": "object"}), "neither 'properties' nor an 'additionalProperties' schema", "#/properties/a"),
    (obj(a={"type": "array"}), "without one 'items'", "#/properties/a"),
    (obj(a={"type": "array", "items": [{"type": "string"}]}), "without one 'items'", "#/properties/a"),
    (obj(a={}), "accepts any value", "#/properties/a"),
    (obj(a={"type": "null"}), "type 'null' only", "#/properties/a"),
    (obj(a={"description": "?"}), "without 'type'", "#/properties/a"),
    ({"type": "string"}, "root must be an object", None),
    ({"type": "object", "additionalProperties": {"type": "string"}}, "root must be an object", None),
]


@pytest.mark.parametrize(("schema", "match", "where"), REFUSED)
def test_refused_constructs_name_subject_and_place(schema, match, where):
    with pytest.raises(JsonSchemaMappingError, match=match) as error:
        spark_struct(schema, "s-value")
    assert "subject 's-value'" in str(error.value)
    if where is not None:
        assert f"at {where}" in str(error.value)


_LEAVES = st.sampled_from([("string", "string"), ("integer", "bigint"), ("number", "double"), ("boolean", "boolean")])
_NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


@st.composite
def _leaf(draw) -> tuple[dict, str]:
    kind, spark = draw(_LEAVES)
    return ({"type": [kind, "null"]} if draw(st.booleans()) else {"type": kind}), spark


def _objects(children):
    def build(fields: dict) -> tuple[dict, str]:
        schema = {"type": "object", "properties": {n: s for n, (s, _) in fields.items()}}
        return schema, "struct<" + ",".join(f"{n}:{t}" for n, (_, t) in fields.items()) + ">"

    return st.dictionaries(_NAMES, children, min_size=1, max_size=4).map(build)


def _nested(children):
    arrays = children.map(lambda c: ({"type": "array", "items": c[0]}, f"array<{c[1]}>"))
    return st.one_of(arrays, _objects(children))


@settings(max_examples=200)
@given(_objects(st.recursive(_leaf(), _nested, max_leaves=12)))
def test_nested_objects_and_arrays_map_member_by_member(case):
    schema, expected = case
    assert simple(schema) == expected
