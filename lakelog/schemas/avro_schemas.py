"""Avro schemas: parsing with Apache's ``avro`` package, compatibility by its own checker.

A reader schema can read a writer schema's data when Avro's schema resolution
succeeds: ``avro.compatibility.ReaderWriterCompatibilityChecker`` (the Python
port of Java's ``SchemaCompatibility``, which Confluent's ``AvroSchema`` calls).
Named types of referenced schemas are known by name in the referencing one, as
Confluent resolves references.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from lakelog.schemas.registry_errors import InvalidSchemaError


def parse_avro(text: str, references: Sequence[str] = ()) -> avro.schema.Schema:
    """The schema ``text`` after the texts of its ``references`` (in order, each may use the
    names of those before it). Raises InvalidSchemaError naming what does not parse."""
    names = avro.name.Names()
    try:
        for ref in references:
            avro.schema.make_avsc_object(json.loads(ref), names)
        return avro.schema.make_avsc_object(json.loads(text), names)
    except (ValueError, TypeError, AttributeError, avro.errors.AvroException) as exc:
        raise InvalidSchemaError(f"Invalid schema {text[:200]!r}: not an Avro schema ({exc})") from exc


def avro_canonical(schema: avro.schema.Schema) -> str:
    """A text equal for equal schemas whatever their spacing (defaults, docs and order kept:
    two schemas differing there are different schemas, as in Confluent)."""
    return json.dumps(schema.to_json(), sort_keys=True, separators=(",", ":"))


def avro_incompatibilities(reader: avro.schema.Schema, writer: avro.schema.Schema) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    where = ", ".join(sorted(result.locations))
    return [f"{m} at {where}" for m in sorted(result.messages)] or [f"incompatible at {where}"]
