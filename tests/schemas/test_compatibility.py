"""The compatibility decisions of each format under each level, as pure functions (no store)."""

from __future__ import annotations

import json

import pytest

from lakelog.schemas.compatibility_levels import LEVELS, check_level, incompatibilities
from lakelog.schemas.formats import parse_schema, schema_format
from lakelog.schemas.registry_errors import InvalidCompatibilityLevelError, InvalidSchemaError


def _avro(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "User", "fields": list(fields)})


def _json(props: dict, required: list[str] = (), closed: bool = False) -> str:
    schema = {"type": "object", "properties": props, "required": list(required)}
    if closed:
        schema["additionalProperties"] = False
    return json.dumps(schema)


def _proto(body: str) -> str:
    return f'syntax = "proto3";\npackage shop;\nmessage Order {{ {body} }}\n'


# (format, old, new, which directions the change keeps): "backward" = the new schema reads old data,
# "forward" = the old schema reads new data.
CHANGES = {
    "avro: field with default added": (
        "AVRO",
        _avro({"name": "id", "type": "long"}),
        _avro({"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": ""}),
        {"backward", "forward"},
    ),
    "avro: field without default added": (
        "AVRO",
        _avro({"name": "id", "type": "long"}),
        _avro({"name": "id", "type": "long"}, {"name": "email", "type": "string"}),
        {"forward"},
    ),
    "avro: field without default removed": (
        "AVRO",
        _avro({"name": "id", "type": "long"}, {"name": "email", "type": "string"}),
        _avro({"name": "id", "type": "long"}),
        {"backward"},
    ),
    "avro: int widened to long": (
        "AVRO",
        _avro({"name": "id", "type": "int"}),
        _avro({"name": "id", "type": "long"}),
        {"backward"},
    ),
    "avro: type changed": (
        "AVRO",
        _avro({"name": "id", "type": "long"}),
        _avro({"name": "id", "type": "string"}),
        set(),
    ),
    "json: property added to a closed model": (
        "JSON",
        _json({"id": {"type": "integer"}}, closed=True),
        _json({"id": {"type": "integer"}, "email": {"type": "string"}}, closed=True),
        {"backward"},
    ),
    "json: property added to an open model": (
        "JSON",
        _json({"id": {"type": "integer"}}),
        _json({"id": {"type": "integer"}, "email": {"type": "string"}}),
        {"forward"},
    ),
    "json: required added": (
        "JSON",
        _json({"id": {"type": "integer"}}, closed=True),
        _json({"id": {"type": "integer"}}, ["id"], closed=True),
        {"forward"},
    ),
    "json: integer widened to number": (
        "JSON",
        _json({"id": {"type": "integer"}}),
        _json({"id": {"type": "number"}}),
        {"backward"},
    ),
    "json: type changed": (
        "JSON",
        _json({"id": {"type": "integer"}}),
        _json({"id": {"type": "string"}}),
        set(),
    ),
    "json: a description added": (
        "JSON",
        _json({"id": {"type": "integer"}}),
        _json({"id": {"type": "integer", "description": "the user's id"}}),
        {"backward", "forward"},
    ),
    "json: enum extended": (
        "JSON",
        json.dumps({"enum": ["a", "b"]}),
        json.dumps({"enum": ["a", "b", "c"]}),
        {"backward"},
    ),
    "protobuf: field added": (
        "PROTOBUF",
        _proto("int64 id = 1;"),
        _proto("int64 id = 1; string email = 2;"),
        {"backward", "forward"},
    ),
    "protobuf: int32 to int64 (one wire type)": (
        "PROTOBUF",
        _proto("int32 id = 1;"),
        _proto("int64 id = 1;"),
        {"backward", "forward"},
    ),
    "protobuf: field number reused with another type": (
        "PROTOBUF",
        _proto("int64 id = 1; string email = 2;"),
        _proto("int64 id = 1; int64 age = 2;"),
        set(),
    ),
    "protobuf: string read as bytes (one wire type)": (
        "PROTOBUF",
        _proto("int64 id = 1; string email = 2;"),
        _proto("int64 id = 1; bytes email = 2;"),
        {"backward", "forward"},
    ),
    "protobuf: message added (a removal, read the other way)": (
        "PROTOBUF",
        _proto("int64 id = 1;"),
        _proto("int64 id = 1; message Line { int32 qty = 1; }"),
        {"backward"},
    ),
    "protobuf: field type changed": (
        "PROTOBUF",
        _proto("int64 id = 1;"),
        _proto("string id = 1;"),
        set(),
    ),
    "protobuf: message removed": (
        "PROTOBUF",
        _proto("int64 id = 1; message Line { int32 qty = 1; }"),
        _proto("int64 id = 1;"),
        {"forward"},
    ),
}


def allowed(level: str, keeps: set[str]) -> bool:
    needs = {"NONE": set(), "BACKWARD": {"backward"}, "FORWARD": {"forward"}, "FULL": {"backward", "forward"}}
    return needs[level.removesuffix("_TRANSITIVE")] <= keeps


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_change_is_refused_exactly_where_its_level_demands(change: str, level: str) -> None:
    schema_type, old, new, keeps = CHANGES[change]
    fmt = schema_format(schema_type)
    previous = [parse_schema(schema_type, old)]
    problems = incompatibilities(
        level, parse_schema(schema_type, new), previous, lambda r, w: fmt.reader_problems(r.parsed, w.parsed)
    )
    assert (not problems) == allowed(level, keeps), problems


@pytest.mark.parametrize("level", ["BACKWARD", "FORWARD", "FULL"])
@pytest.mark.parametrize("schema_type", ["AVRO", "JSON", "PROTOBUF"])
def test_transitive_levels_check_every_live_version_the_others_the_latest(schema_type: str, level: str) -> None:
    # v1 and v2 disagree on a field's type (v2 was registered under NONE); v3 repeats v2.
    v1, v2 = {
        "AVRO": (_avro({"name": "id", "type": "long"}), _avro({"name": "id", "type": "string"})),
        "JSON": (_json({"id": {"type": "integer"}}), _json({"id": {"type": "string"}})),
        "PROTOBUF": (_proto("int64 id = 1;"), _proto("string id = 1;")),
    }[schema_type]
    fmt = schema_format(schema_type)
    history = [parse_schema(schema_type, v1), parse_schema(schema_type, v2)]
    new = parse_schema(schema_type, v2)

    def problems(level: str) -> list[str]:
        return incompatibilities(level, new, history, lambda r, w: fmt.reader_problems(r.parsed, w.parsed))

    assert problems(level) == []
    assert problems(f"{level}_TRANSITIVE") != []


@pytest.mark.parametrize(
    ("schema_type", "text"),
    [
        ("AVRO", '{"type": "recrd", "name": "x"}'),
        ("AVRO", "not json"),
        ("JSON", '{"type": 12}'),
        ("JSON", "[1, 2]"),
        ("PROTOBUF", "message { int32 = ; }"),
        ("PROTOBUF", 'syntax = "proto3";'),
        ("XML", "<a/>"),
    ],
)
def test_a_malformed_schema_is_an_invalid_schema_error(schema_type: str, text: str) -> None:
    with pytest.raises(InvalidSchemaError) as caught:
        parse_schema(schema_type, text)
    assert caught.value.error_code == 42201


def test_a_level_confluent_lacks_is_refused_with_42203() -> None:
    assert check_level("full_transitive") == "FULL_TRANSITIVE"
    with pytest.raises(InvalidCompatibilityLevelError) as caught:
        check_level("SIDEWAYS")
    assert caught.value.error_code == 42203


def test_protobuf_text_and_confluent_kafkas_base64_descriptor_are_one_schema() -> None:
    from lakelog.schemas.protobuf_schemas import serialized

    text = _proto("int64 id = 1; repeated string tags = 2; map<string, int32> counts = 3;")
    as_text = parse_schema("PROTOBUF", text)
    as_descriptor = parse_schema("PROTOBUF", serialized(as_text.parsed))
    assert as_text.canonical == as_descriptor.canonical
