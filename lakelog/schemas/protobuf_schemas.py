"""Protobuf schemas: one ``FileDescriptorProto`` per schema, compatibility by Confluent's main rules.

A schema arrives as ``.proto`` text (parsed by ``proto-schema-parser``, a pure-Python
parser of the protobuf grammar, and turned into a ``FileDescriptorProto`` here) or, as
confluent-kafka's ``ProtobufSerializer`` registers it, as a base64 serialized
``FileDescriptorProto`` (protobuf's own ``descriptor_pb2``). Both end as the same
descriptor, which is what ``?format=serialized`` answers with.

protobuf has no compatibility checker of its own, so the rules are written out here,
those of Confluent's ``ProtobufSchema`` diff (``io.confluent.kafka.schemaregistry.protobuf.diff``)
that decide most cases, comparing messages by full name and fields by number:

* PACKAGE_CHANGED, MESSAGE_REMOVED: incompatible;
* a field whose number stays but whose type changes: incompatible (FIELD_KIND_CHANGED,
  FIELD_NAMED_TYPE_CHANGED), except between wire-compatible scalars (int32/uint32/int64/
  uint64/bool; sint32/sint64; fixed32/sfixed32; fixed64/sfixed64; string/bytes);
* a field added or removed: compatible (proto3 readers skip unknown fields and default
  missing ones), unless it is ``required`` (REQUIRED_FIELD_ADDED/REMOVED);
* a field moved into a oneof that existed before: incompatible (FIELD_MOVED_TO_EXISTING_ONEOF).

Not compared: enum constants, options, services, and the contents of imported files.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from lakelog.schemas.registry_errors import InvalidSchemaError

FDP = descriptor_pb2.FileDescriptorProto
# Imported for their descriptors: Protobuf schemas import these well-known files without
# registering them (confluent-kafka's skip.known.types).
WELL_KNOWN = (any_pb2, duration_pb2, empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2)
FieldProto = descriptor_pb2.FieldDescriptorProto

_SCALARS = {
    "double": FieldProto.TYPE_DOUBLE,
    "float": FieldProto.TYPE_FLOAT,
    "int64": FieldProto.TYPE_INT64,
    "uint64": FieldProto.TYPE_UINT64,
    "int32": FieldProto.TYPE_INT32,
    "fixed64": FieldProto.TYPE_FIXED64,
    "fixed32": FieldProto.TYPE_FIXED32,
    "bool": FieldProto.TYPE_BOOL,
    "string": FieldProto.TYPE_STRING,
    "bytes": FieldProto.TYPE_BYTES,
    "uint32": FieldProto.TYPE_UINT32,
    "sfixed32": FieldProto.TYPE_SFIXED32,
    "sfixed64": FieldProto.TYPE_SFIXED64,
    "sint32": FieldProto.TYPE_SINT32,
    "sint64": FieldProto.TYPE_SINT64,
}
# Scalars one wire type reads as another (Protobuf language guide, "Updating A Message Type").
_WIRE_GROUPS = [
    {
        FieldProto.TYPE_INT32,
        FieldProto.TYPE_UINT32,
        FieldProto.TYPE_INT64,
        FieldProto.TYPE_UINT64,
        FieldProto.TYPE_BOOL,
    },
    {FieldProto.TYPE_SINT32, FieldProto.TYPE_SINT64},
    {FieldProto.TYPE_FIXED32, FieldProto.TYPE_SFIXED32},
    {FieldProto.TYPE_FIXED64, FieldProto.TYPE_SFIXED64},
    {FieldProto.TYPE_STRING, FieldProto.TYPE_BYTES},
]
_LABELS = {
    None: FieldProto.LABEL_OPTIONAL,
    ast.FieldCardinality.OPTIONAL: FieldProto.LABEL_OPTIONAL,
    ast.FieldCardinality.REQUIRED: FieldProto.LABEL_REQUIRED,
    ast.FieldCardinality.REPEATED: FieldProto.LABEL_REPEATED,
}


def parse_protobuf(text: str, references: Sequence[str] = ()) -> FDP:
    """The descriptor of ``text`` (base64 ``FileDescriptorProto`` or ``.proto`` text).
    Raises InvalidSchemaError naming what does not parse."""
    for ref in references:
        _descriptor(ref)
    return _descriptor(text)


def file_set(text: str, imports: Sequence[tuple[str, str]] = ()) -> descriptor_pb2.FileDescriptorSet:
    """The schema ``text`` with every file it imports, each after the files it imports, as a
    descriptor pool resolves them (type names fully qualified); the schema's own file is the last.
    ``imports`` are (import name, schema text) of its registered references, each after those it
    imports; any other import must be one of protobuf's well-known files. Raises
    InvalidSchemaError naming what does not parse, is not imported or does not resolve."""
    files = []
    for name, imported in imports:
        proto = parse_protobuf(imported)
        proto.name = name
        files.append(proto)
    files.append(parse_protobuf(text))
    pool = descriptor_pool.DescriptorPool()
    ordered: list[str] = []
    for f in files:
        for dependency in f.dependency:
            if dependency not in ordered and dependency not in {g.name for g in files}:
                try:
                    known = descriptor_pool.Default().FindFileByName(dependency)
                except KeyError as exc:
                    problem = f"Invalid schema: {f.name} imports {dependency}, which is no reference"
                    raise InvalidSchemaError(problem) from exc
                proto = FDP()
                known.CopyToProto(proto)
                pool.Add(proto)
                ordered.append(dependency)
        try:
            pool.Add(f)
        except (TypeError, ValueError) as exc:  # the pool's "Couldn't build proto file" errors
            raise InvalidSchemaError(f"Invalid schema: {f.name} does not resolve ({exc})") from exc
        ordered.append(f.name)
    out = descriptor_pb2.FileDescriptorSet()
    for name in ordered:
        pool.FindFileByName(name).CopyToProto(out.file.add())
    return out


def serialized(descriptor: FDP) -> str:
    """Confluent's ``format=serialized``: the base64 ``FileDescriptorProto``."""
    return base64.standard_b64encode(descriptor.SerializeToString(deterministic=True)).decode("ascii")


def protobuf_canonical(descriptor: FDP) -> str:
    unnamed = FDP()
    unnamed.CopyFrom(descriptor)
    unnamed.ClearField("name")  # a file name is not part of what a schema says
    return serialized(unnamed)


def _descriptor(text: str) -> FDP:
    stripped = text.strip()
    if stripped and not any(c.isspace() for c in stripped):
        try:
            descriptor = FDP()
            descriptor.ParseFromString(base64.b64decode(stripped, validate=True))
            if descriptor.message_type or descriptor.enum_type or descriptor.package:
                return descriptor
        except (binascii.Error, DecodeError, ValueError):
            pass
    try:
        parsed = Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)
    except InvalidSchemaError:
        raise
    except Exception as exc:  # the ANTLR parser raises its own exception classes
        raise InvalidSchemaError(f"Invalid schema {text[:200]!r}: not a .proto file ({exc})") from exc
    if not any(isinstance(e, ast.Message | ast.Enum) for e in parsed.file_elements):
        raise InvalidSchemaError(f"Invalid schema {text[:200]!r}: a .proto schema defines a message or an enum")
    return _FileBuilder(parsed).build()


class _RaisingListener(ErrorListener):
    """ANTLR recovers from a syntax error and prints it; a schema with one is refused instead."""

    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int, msg: str, e: Any) -> None:
        raise InvalidSchemaError(f"Invalid schema: not a .proto file (line {line}:{column} {msg})")


def _strict(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_RaisingListener())


class _FileBuilder:
    """``.proto`` AST -> ``FileDescriptorProto``: type names resolved as protoc resolves them
    (innermost scope first), a name defined in no scope of this file kept as an imported one."""

    def __init__(self, parsed: ast.File) -> None:
        self.parsed = parsed
        packages = [e.name for e in parsed.file_elements if isinstance(e, ast.Package)]
        self.package = packages[0] if packages else ""
        self.kinds: dict[str, int] = {}  # ".pkg.Outer.Inner" -> TYPE_MESSAGE / TYPE_ENUM
        self.imports = any(isinstance(e, ast.Import) for e in parsed.file_elements)
        self._collect(parsed.file_elements, f".{self.package}" if self.package else "")

    def _collect(self, elements: Iterable[Any], scope: str) -> None:
        for e in elements:
            if isinstance(e, ast.Message):
                self.kinds[f"{scope}.{e.name}"] = FieldProto.TYPE_MESSAGE
                self._collect(e.elements, f"{scope}.{e.name}")
            elif isinstance(e, ast.Enum):
                self.kinds[f"{scope}.{e.name}"] = FieldProto.TYPE_ENUM

    def build(self) -> FDP:
        fdp = FDP(name="schema.proto", syntax=self.parsed.syntax or "proto2")
        if self.package:
            fdp.package = self.package
        scope = f".{self.package}" if self.package else ""
        for e in self.parsed.file_elements:
            if isinstance(e, ast.Import):
                fdp.dependency.append(e.name)
            elif isinstance(e, ast.Message):
                fdp.message_type.append(self._message(e, scope))
            elif isinstance(e, ast.Enum):
                fdp.enum_type.append(_enum(e))
        return fdp

    def _message(self, message: ast.Message, scope: str) -> descriptor_pb2.DescriptorProto:
        out = descriptor_pb2.DescriptorProto(name=message.name)
        inner = f"{scope}.{message.name}"
        for e in message.elements:
            if isinstance(e, ast.Field):
                out.field.append(self._field(e, inner))
            elif isinstance(e, ast.OneOf):
                out.oneof_decl.add(name=e.name)
                for f in e.elements:
                    if isinstance(f, ast.Field):
                        out.field.append(self._field(f, inner, oneof=len(out.oneof_decl) - 1))
            elif isinstance(e, ast.MapField):
                entry = "".join(p[:1].upper() + p[1:] for p in e.name.split("_")) + "Entry"
                nested = out.nested_type.add(name=entry)
                nested.options.map_entry = True
                nested.field.append(self._field(ast.Field("key", 1, e.key_type), inner))
                nested.field.append(self._field(ast.Field("value", 2, e.value_type), inner))
                out.field.add(
                    name=e.name,
                    number=e.number,
                    label=FieldProto.LABEL_REPEATED,
                    type=FieldProto.TYPE_MESSAGE,
                    type_name=f"{inner}.{entry}",
                )
            elif isinstance(e, ast.Message):
                out.nested_type.append(self._message(e, inner))
            elif isinstance(e, ast.Enum):
                out.enum_type.append(_enum(e))
        return out

    def _field(self, field: ast.Field, scope: str, oneof: int | None = None) -> FieldProto:
        out = FieldProto(name=field.name, number=field.number, label=_LABELS.get(field.cardinality))
        if field.type in _SCALARS:
            out.type = _SCALARS[field.type]
        else:
            out.type_name = self._resolve(field.type, scope)
            out.type = self.kinds.get(out.type_name, FieldProto.TYPE_MESSAGE)
        if oneof is not None:
            out.oneof_index = oneof
        return out

    def _resolve(self, name: str, scope: str) -> str:
        if name.startswith("."):
            return name
        while True:
            candidate = f"{scope}.{name}"
            if candidate in self.kinds:
                return candidate
            if not scope:
                if not self.imports:
                    raise InvalidSchemaError(f"Invalid schema: type {name!r} is neither a scalar nor defined")
                return f".{name}"  # from an imported file
            scope = scope.rpartition(".")[0]


def _enum(enum: ast.Enum) -> descriptor_pb2.EnumDescriptorProto:
    out = descriptor_pb2.EnumDescriptorProto(name=enum.name)
    for v in enum.elements:
        if isinstance(v, ast.EnumValue):
            out.value.add(name=v.name, number=v.number)
    return out


def _messages(fdp: FDP) -> dict[str, descriptor_pb2.DescriptorProto]:
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(messages: Iterable[descriptor_pb2.DescriptorProto], scope: str) -> None:
        for m in messages:
            if m.options.map_entry:
                continue
            found[f"{scope}.{m.name}"] = m
            walk(m.nested_type, f"{scope}.{m.name}")

    walk(fdp.message_type, f".{fdp.package}" if fdp.package else "")
    return found


def _field_type(field: FieldProto, package: str) -> Any:
    if field.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_ENUM):
        prefix = f".{package}"
        # Compared relative to the file's package: PACKAGE_CHANGED is reported once, not per field.
        return field.type_name.removeprefix(prefix) if package else field.type_name
    return next((i for i, g in enumerate(_WIRE_GROUPS) if field.type in g), f"scalar {field.type}")


def _type_label(field: FieldProto) -> str:
    return field.type_name or FieldProto.Type.Name(field.type).removeprefix("TYPE_").lower()


def protobuf_incompatibilities(reader: FDP, writer: FDP) -> list[str]:
    """Why ``reader`` may misread messages written with ``writer`` (empty: it reads them)."""
    problems: list[str] = []
    if reader.package != writer.package:
        problems.append(f"package changed from {writer.package!r} to {reader.package!r} (PACKAGE_CHANGED)")
    strip_r, strip_w = f".{reader.package}", f".{writer.package}"
    read_rel = {k.removeprefix(strip_r): v for k, v in _messages(reader).items()}
    for name, old in _messages(writer).items():
        rel = name.removeprefix(strip_w)
        new = read_rel.get(rel)
        if new is None:
            problems.append(f"message {rel.lstrip('.')} removed (MESSAGE_REMOVED)")
            continue
        problems += _field_problems(rel.lstrip("."), new, old, reader.package, writer.package)
    return problems


def _field_problems(
    message: str, new: descriptor_pb2.DescriptorProto, old: descriptor_pb2.DescriptorProto, new_pkg: str, old_pkg: str
) -> list[str]:
    problems: list[str] = []
    new_fields = {f.number: f for f in new.field}
    old_fields = {f.number: f for f in old.field}
    for number in sorted(old_fields.keys() | new_fields.keys()):
        n, o = new_fields.get(number), old_fields.get(number)
        where = f"{message} field {number}"
        if n is None or o is None:
            field = n or o
            assert field is not None
            if field.label == FieldProto.LABEL_REQUIRED:
                change = "added" if o is None else "removed"
                problems.append(f"{where} ({field.name}) required and {change} (REQUIRED_FIELD_{change.upper()})")
            continue
        if _field_type(n, new_pkg) != _field_type(o, old_pkg):
            was, now = _type_label(o), _type_label(n)
            problems.append(f"{where} ({o.name}) type changed from {was} to {now} (FIELD_KIND_CHANGED)")
        if n.HasField("oneof_index") and not o.HasField("oneof_index"):
            oneof = new.oneof_decl[n.oneof_index].name
            if any(d.name == oneof for d in old.oneof_decl):
                problems.append(f"{where} moved into existing oneof {oneof} (FIELD_MOVED_TO_EXISTING_ONEOF)")
    return problems
