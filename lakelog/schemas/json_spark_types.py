"""A registered JSON Schema as the Spark SQL type ``from_json`` reads its documents into (pure).

Typed reads of JSON Schema topics (:func:`lakelog.schemas.spark_columns.json_expression`) hand
Spark's built-in ``from_json`` a schema; this module writes it, in Spark's JSON form of a
``DataType`` (``DataType.json()``: ``{"type": "struct", "fields": [...]}``), which ``from_json``
accepts beside DDL (``ExprUtils.evalSchemaExpr`` falls back to ``DataType.fromJson``), so no
JVM is needed to build it. The mapping:

* ``object`` with ``properties`` -> ``struct`` of the properties in their order; a property is
  nullable unless ``required`` (and not ``null``-typed); properties a document has beyond them
  are dropped by ``from_json``. An ``object`` with no ``properties`` but an
  ``additionalProperties`` schema -> ``map<string, ...>``;
* ``string`` -> ``string`` (``format`` such as ``date-time`` stays a string: ``from_json``
  would parse a timestamp with a session-dependent pattern), ``integer`` -> ``long``,
  ``number`` -> ``double`` (``[integer, number]`` too), ``boolean`` -> ``boolean``,
  ``array`` with one ``items`` schema -> ``array<...>``;
* ``type: [x, "null"]``, and ``anyOf``/``oneOf`` whose branches map to one type (``null``
  branches making it nullable), are that type; ``allOf`` of objects merges their properties;
  ``enum``/``const`` without ``type`` take the type of their values;
* ``$ref``: ``#/...`` pointers into the schema itself and the names of the version's registered
  references (``other.json`` or ``other.json#/...``; ``#/...`` inside one points into it) are followed.

Whatever else -- branches of different types, a ``$ref`` that names nothing (or itself, through
a cycle: Spark types are finite), tuple ``items``, an object with neither ``properties`` nor an
``additionalProperties`` schema, a schema that accepts anything -- is refused with
:class:`JsonSchemaMappingError` naming the subject, the construct and where it is.
Spark's ``from_json`` reads every field as nullable (``JsonToStructs`` uses ``schema.asNullable``),
so ``nullable`` here says what the schema allows, not what the column will be declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakelog.engine.errors import InvalidConfigError

_PRIMITIVES = {"string": "string", "integer": "long", "number": "double", "boolean": "boolean"}
_COMBINERS = ("anyOf", "oneOf")


class JsonSchemaMappingError(InvalidConfigError):
    """A JSON Schema with a construct that has no Spark SQL type; the message names the subject,
    the construct and its JSON pointer."""


def spark_struct(schema: Any, subject: str, references: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Spark ``StructType`` (as ``DataType.json()`` writes it) that ``from_json`` reads
    documents of ``schema`` into; ``references`` maps the names of the version's registered
    references to their parsed schemas. Raises JsonSchemaMappingError when the root is not an
    object or a construct cannot be mapped (see the module docstring)."""
    mapper = _Mapper(schema, subject, dict(references or {}))
    spark_type, _ = mapper.map(schema, "#", ())
    if not isinstance(spark_type, dict) or spark_type.get("type") != "struct":
        raise JsonSchemaMappingError(
            f"subject {subject!r}: the schema's root must be an object with properties to read as columns"
        )
    return spark_type


class _Mapper:
    def __init__(self, root: Any, subject: str, references: dict[str, Any], document: str = "") -> None:
        self.root = root  # what "#..." pointers point into: the schema, or the reference being read
        self.subject = subject
        self.references = references
        self.document = document  # the reference's name ("": the schema itself)

    def fail(self, where: str, what: str) -> JsonSchemaMappingError:
        return JsonSchemaMappingError(f"subject {self.subject!r}: {what} at {where} has no Spark SQL type")

    def map(self, schema: Any, where: str, refs: tuple[str, ...]) -> tuple[Any, bool]:
        """(Spark type, nullable) of ``schema`` at JSON pointer ``where``; ``refs`` are the
        ``$ref``s being followed (a cycle is refused)."""
        if schema is True or schema == {}:
            raise self.fail(where, "a schema that accepts any value")
        if schema is False or not isinstance(schema, dict):
            raise self.fail(where, f"the schema {schema!r}")
        if "$ref" in schema:
            return self.reference(schema, where, refs)
        for combiner in _COMBINERS:
            if combiner in schema:
                return self.alternatives(schema, combiner, where, refs)
        if "allOf" in schema:
            return self.all_of(schema, where, refs)
        types, nullable = self.types(schema, where)
        if types == {"integer", "number"}:
            return "double", nullable
        if len(types) != 1:
            raise self.fail(where, f"'type' {sorted(types)} (several types)")
        (kind,) = types
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind], nullable
        if kind == "array":
            return self.array(schema, where, refs), nullable
        return self.object(schema, where, refs), nullable

    def types(self, schema: dict[str, Any], where: str) -> tuple[set[str], bool]:
        declared = schema.get("type")
        if declared is None:
            types = self.inferred(schema, where)
        else:
            types = {declared} if isinstance(declared, str) else set(declared)
        nullable = "null" in types
        types.discard("null")
        if not types:
            raise self.fail(where, "a schema of type 'null' only")
        return types, nullable

    def inferred(self, schema: dict[str, Any], where: str) -> set[str]:
        if "properties" in schema or "additionalProperties" in schema:
            return {"object"}
        if "items" in schema:
            return {"array"}
        values = schema["enum"] if "enum" in schema else [schema["const"]] if "const" in schema else None
        if values is None:
            raise self.fail(where, "a schema without 'type'")
        names = {
            "null"
            if v is None
            else "boolean"
            if isinstance(v, bool)
            else "integer"
            if isinstance(v, int)
            else "number"
            if isinstance(v, float)
            else "string"
            if isinstance(v, str)
            else "object"
            if isinstance(v, dict)
            else "array"
            for v in values
        }
        if names - {"null", "integer", "number", "string", "boolean"}:
            raise self.fail(where, "an 'enum' of objects or arrays")
        return names

    def reference(self, schema: dict[str, Any], where: str, refs: tuple[str, ...]) -> tuple[Any, bool]:
        ref = schema["$ref"]
        document = ref.partition("#")[0] or self.document
        followed = f"{document}#{ref.partition('#')[2]}"  # "#/x" of two documents are two places
        if followed in refs:
            raise self.fail(where, f"the recursive '$ref' {ref!r}")
        target = self.target(ref, where)
        # Pointers inside a registered reference point into that reference.
        mapper = (
            self
            if document == self.document
            else _Mapper(self.references[document], self.subject, self.references, document)
        )
        return mapper.map(target, f"{where}/$ref({ref})", (*refs, followed))

    def target(self, ref: str, where: str) -> Any:
        """What ``$ref`` ``ref`` points at: in the schema itself (``#/...``) or in a registered reference."""
        document, _, pointer = ref.partition("#")
        if document:
            if document not in self.references:
                raise self.fail(where, f"'$ref' {ref!r} (no registered reference of that name)")
            target = self.references[document]
        else:
            target = self.root
        for token in [t for t in pointer.split("/") if t]:
            token = token.replace("~1", "/").replace("~0", "~")  # RFC 6901 escapes
            if not isinstance(target, dict) or token not in target:
                raise self.fail(where, f"'$ref' {ref!r} (it points at nothing)")
            target = target[token]
        return target

    def alternatives(
        self, schema: dict[str, Any], combiner: str, where: str, refs: tuple[str, ...]
    ) -> tuple[Any, bool]:
        found = []
        nullable = False
        for i, branch in enumerate(schema[combiner]):
            if isinstance(branch, dict) and branch.get("type") == "null":
                nullable = True
                continue
            spark_type, branch_nullable = self.map(branch, f"{where}/{combiner}/{i}", refs)
            nullable = nullable or branch_nullable
            found.append(spark_type)
        if not found or any(t != found[0] for t in found):
            raise self.fail(where, f"'{combiner}' of branches of different types")
        return found[0], nullable

    def all_of(self, schema: dict[str, Any], where: str, refs: tuple[str, ...]) -> tuple[Any, bool]:
        merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        for i, branch in enumerate(schema["allOf"]):
            target, seen = branch, refs
            while isinstance(target, dict) and "$ref" in target:
                if target["$ref"] in seen:
                    raise self.fail(f"{where}/allOf/{i}", f"the recursive '$ref' {target['$ref']!r}")
                seen = (*seen, target["$ref"])
                target = self.target(target["$ref"], f"{where}/allOf/{i}")
            if not isinstance(target, dict) or not ("properties" in target or target.get("type") == "object"):
                raise self.fail(f"{where}/allOf/{i}", "'allOf' of schemas that are not all objects")
            merged["properties"].update(target.get("properties", {}))
            merged["required"].extend(target.get("required", []))
        merged["properties"].update(schema.get("properties", {}))
        merged["required"].extend(schema.get("required", []))
        return self.object(merged, where, refs), False

    def array(self, schema: dict[str, Any], where: str, refs: tuple[str, ...]) -> dict[str, Any]:
        items = schema.get("items")
        if items is None or isinstance(items, list) or "prefixItems" in schema:
            raise self.fail(where, "an array without one 'items' schema (tuple or untyped items)")
        element, nullable = self.map(items, f"{where}/items", refs)
        return {"type": "array", "elementType": element, "containsNull": nullable}

    def object(self, schema: dict[str, Any], where: str, refs: tuple[str, ...]) -> dict[str, Any]:
        properties = schema.get("properties")
        if properties:
            required = set(schema.get("required", []))
            fields = []
            for name, prop in properties.items():
                spark_type, nullable = self.map(prop, f"{where}/properties/{name}", refs)
                fields.append(
                    {"name": name, "type": spark_type, "nullable": nullable or name not in required, "metadata": {}}
                )
            return {"type": "struct", "fields": fields}
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            value, nullable = self.map(extra, f"{where}/additionalProperties", refs)
            return {"type": "map", "keyType": "string", "valueType": value, "valueContainsNull": nullable}
        raise self.fail(where, "an object with neither 'properties' nor an 'additionalProperties' schema")
