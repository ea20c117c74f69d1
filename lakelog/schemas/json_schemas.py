"""JSON Schema: parsing checked by ``jsonschema`` (the schema's own draft), compatibility by hand.

``jsonschema`` validates documents, it does not compare schemas, and no
well-kept Python library does; so the reader/writer check below follows the
main rules of Confluent's ``JsonSchemaDiff`` (``io.confluent.kafka.schemaregistry.json.diff``),
written out here. A reader can read a writer's documents when, at every level:

* its ``type`` keeps every writer type (``integer`` -> ``number`` widens: TYPE_EXTENDED;
  anything else: TYPE_NARROWED/TYPE_CHANGED, incompatible);
* a property it adds was impossible in the writer's documents: allowed when the writer's
  content model is closed (``additionalProperties: false``) or the property accepts
  anything; incompatible when the writer's model is open (PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL);
* a property it drops is allowed only while its own model stays open
  (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL is incompatible), and it does not close an
  open model (ADDITIONAL_PROPERTIES_REMOVED);
* it requires no property the writer did not (REQUIRED_ATTRIBUTE_ADDED);
* its ``enum`` keeps every writer value (ENUM_ARRAY_NARROWED); its bounds (``maxLength``,
  ``maximum``, ``minItems``, ...) are not added nor tightened (MAX_*_ADDED/DECREASED,
  MIN_*_ADDED/INCREASED);
* ``items`` and each shared property compare recursively; ``anyOf``/``oneOf``: every writer
  branch is read by some reader branch; ``allOf``, ``$ref`` and ``not`` must be equal.

Not compared (they pass): ``patternProperties``, ``dependencies``, ``if/then/else``, formats and
patterns, and the contents of referenced schemas (a ``$ref`` is compared as its text).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema.exceptions
import jsonschema.validators

from lakelog.schemas.registry_errors import InvalidSchemaError

_UPPER_BOUNDS = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
_LOWER_BOUNDS = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")


def parse_json_schema(text: str, references: Sequence[str] = ()) -> Any:
    """The schema ``text`` as JSON, checked against the metaschema of its own ``$schema``
    (the newest draft if it names none). Raises InvalidSchemaError naming what is wrong."""
    for ref in references:
        _load(ref)
    return _load(text)


def _load(text: str) -> Any:
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid schema {text[:200]!r}: not JSON ({exc})") from exc
    if not isinstance(schema, dict | bool):
        raise InvalidSchemaError(f"Invalid schema {text[:200]!r}: a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidSchemaError(f"Invalid schema {text[:200]!r}: {exc.message}") from exc
    return schema


def json_canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _accepts_anything(schema: Any) -> bool:
    return schema is True or schema == {}


def _types(schema: dict[str, Any]) -> set[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


def json_incompatibilities(reader: Any, writer: Any, path: str = "#") -> list[str]:
    """Why ``reader`` may refuse documents valid under ``writer`` (empty: it accepts them all)."""
    if _accepts_anything(reader) or writer is False:
        return []
    if reader is False or writer is True:
        return [f"{path}: the reader accepts less than a writer that accepts anything"]
    problems: list[str] = []
    problems += _type_problems(reader, writer, path)
    problems += _object_problems(reader, writer, path)
    problems += _value_problems(reader, writer, path)
    if isinstance(reader.get("items"), dict | bool):
        writer_items = writer.get("items", True)
        if isinstance(writer_items, dict | bool):
            problems += json_incompatibilities(reader["items"], writer_items, f"{path}/items")
    for key in ("anyOf", "oneOf"):
        if key in reader:
            branches = writer.get(key, [writer])
            for i, branch in enumerate(branches):
                if all(json_incompatibilities(r, branch, f"{path}/{key}") for r in reader[key]):
                    problems.append(f"{path}/{key}: writer branch {i} is read by no reader branch (COMBINED_TYPE)")
    for key in ("allOf", "$ref", "not"):
        if reader.get(key) != writer.get(key):
            problems.append(f"{path}: {key} changed")
    return problems


def _type_problems(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    read, wrote = _types(reader), _types(writer)
    if read is None:
        return []
    if wrote is None:
        return [f"{path}: type {sorted(read)} added (TYPE_NARROWED)"]
    lost = {t for t in wrote - read if not (t == "integer" and "number" in read)}
    return [f"{path}: type {sorted(lost)} no longer accepted (TYPE_CHANGED)"] if lost else []


def _object_problems(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    read_props: dict[str, Any] = reader.get("properties", {})
    wrote_props: dict[str, Any] = writer.get("properties", {})
    for name in sorted(read_props.keys() & wrote_props.keys()):
        problems += json_incompatibilities(read_props[name], wrote_props[name], f"{path}/properties/{name}")
    for name in sorted(read_props.keys() - wrote_props.keys()):
        if _open(writer) and not _accepts_anything(read_props[name]):
            problems.append(f"{path}/properties/{name}: added to an open content model (PROPERTY_ADDED)")
    for name in sorted(wrote_props.keys() - read_props.keys()):
        if not _open(reader):
            problems.append(f"{path}/properties/{name}: removed from a closed content model (PROPERTY_REMOVED)")
    if _open(writer) and not _open(reader):
        problems.append(f"{path}: additionalProperties closed (ADDITIONAL_PROPERTIES_REMOVED)")
    added = sorted(set(reader.get("required", [])) - set(writer.get("required", [])))
    if added:
        problems.append(f"{path}: required {added} added (REQUIRED_ATTRIBUTE_ADDED)")
    return problems


def _value_problems(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    if "enum" in reader and ("enum" not in writer or any(v not in reader["enum"] for v in writer["enum"])):
        problems.append(f"{path}: enum narrowed (ENUM_ARRAY_NARROWED)")
    for key in _UPPER_BOUNDS:
        if key in reader and (key not in writer or reader[key] < writer[key]):
            problems.append(f"{path}: {key} added or decreased")
    for key in _LOWER_BOUNDS:
        if key in reader and (key not in writer or reader[key] > writer[key]):
            problems.append(f"{path}: {key} added or increased")
    return problems
