"""The three schema formats behind one interface, by Confluent's ``schemaType``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lakelog.schemas.avro_schemas import avro_canonical, avro_incompatibilities, parse_avro
from lakelog.schemas.json_schemas import json_canonical, json_incompatibilities, parse_json_schema
from lakelog.schemas.protobuf_schemas import (
    parse_protobuf,
    protobuf_canonical,
    protobuf_incompatibilities,
    serialized,
)
from lakelog.schemas.registry_errors import InvalidSchemaError

# Confluent answers GET /schemas/types in this order.
SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")


@dataclass(frozen=True)
class Format:
    parse: Callable[[str, Sequence[str]], Any]
    canonical: Callable[[Any], str]
    reader_problems: Callable[[Any, Any], list[str]]


FORMATS = {
    "AVRO": Format(parse_avro, avro_canonical, avro_incompatibilities),
    "JSON": Format(parse_json_schema, json_canonical, json_incompatibilities),
    "PROTOBUF": Format(parse_protobuf, protobuf_canonical, protobuf_incompatibilities),
}


def schema_format(schema_type: Any) -> Format:
    """The format named ``schema_type`` (None: AVRO, as in Confluent); else InvalidSchemaError (42201)."""
    name = "AVRO" if schema_type is None else schema_type
    if not isinstance(name, str) or name.upper() not in FORMATS:
        raise InvalidSchemaError(f"Invalid schema type {schema_type!r}; known: {', '.join(SCHEMA_TYPES)}")
    return FORMATS[name.upper()]


@dataclass(frozen=True)
class ParsedSchema:
    """A schema as registered (``text``) and parsed; ``canonical`` is equal for equal schemas."""

    schema_type: str
    text: str
    parsed: Any
    canonical: str


def parse_schema(schema_type: str, text: Any, references: Sequence[str] = ()) -> ParsedSchema:
    """``text`` parsed as ``schema_type`` after its references' texts. Raises InvalidSchemaError."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError(f"Invalid schema {text!r}: the schema must be a non-empty string")
    fmt = schema_format(schema_type)
    parsed = fmt.parse(text, references)
    return ParsedSchema(schema_type.upper(), text, parsed, fmt.canonical(parsed))


def formatted(schema: ParsedSchema, fmt: str | None) -> str:
    """The schema's text in Confluent's ``?format=``: ``serialized`` gives a Protobuf schema as its
    base64 ``FileDescriptorProto`` (what confluent-kafka's Protobuf serdes ask for); else as registered."""
    if fmt == "serialized" and schema.schema_type == "PROTOBUF":
        return serialized(schema.parsed)
    return schema.text
