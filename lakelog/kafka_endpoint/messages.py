"""Kafka protocol messages through ``kio`` (classes generated from Kafka's own message schemas).

A request frame is ``int32 size`` + request header + body; a response frame
``int32 size`` + response header + body. Which header version a message uses
is part of its generated class (``__header_schema__``: flexible versions use
request header v2 and response header v1, ApiVersions always answers with
header v0 so that a client can parse the answer before it knows the
versions). :func:`build` makes a response of any version from plain values:
fields the version does not have are left out, fields it has that are not
given get their schema default or zero, nested entities are built from dicts;
a name no version of the message has is refused (ValueError naming it), so a
misspelt field fails where it is written instead of vanishing from answers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import io
import pkgutil
import re
import struct
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from lakelog.kafka_endpoint.produce_encoding import produce_response_body

_SIZE = struct.Struct(">i")
# kio generates a module per message version: kio.schema.<message>.v<N>.<kind>.
_VERSION_PART = re.compile(r"^v\d+$")
_KEY_VERSION = struct.Struct(">hh")
# Produce's API key, as a number: importing a kio Produce module for it would load a version
# no answer asked for (see test_messages).
_PRODUCE = 0


class MalformedRequestError(ValueError):
    """A frame that is not a request of a version this endpoint parses: the connection ends."""


@dataclass(frozen=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kio request entity
    # The connection's security state (kafka_endpoint.sasl.Session); None outside a listener (tests).
    session: Any = None


def parse_request(
    frame: bytes, supported: Mapping[int, tuple[int, int]], session: Any = None
) -> Request | tuple[int, int, int]:
    """The request in ``frame`` (without its size prefix), from the connection whose security
    state is ``session``; for an API or version outside ``supported`` (api key -> (min, max))
    only (api_key, api_version, correlation_id), to answer with UNSUPPORTED_VERSION. Raises
    MalformedRequestError for anything unparseable."""
    if len(frame) < 8:
        raise MalformedRequestError(f"a request frame of {len(frame)} bytes")
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    correlation_id = _SIZE.unpack_from(frame, 4)[0]
    low, high = supported.get(api_key, (0, -1))
    if not low <= api_version <= high:
        return api_key, api_version, correlation_id
    try:
        schema = request_class(api_key, api_version)
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except Exception as exc:  # kio raises ValueError/struct.error/UnicodeError...: all mean "not a request"
        raise MalformedRequestError(f"api {api_key} v{api_version}: {type(exc).__name__}: {exc}") from exc
    return Request(api_key, api_version, header.correlation_id, header.client_id, body, session)


def header_client_id(frame: bytes) -> str | None:
    """The client id in a request frame's header (without its size prefix), read without parsing
    the body: every request header version (v1, v2) has it right after the correlation id as a
    non-compact nullable string. None when the frame has none or is too short to say."""
    if len(frame) < 10:
        return None
    size = struct.unpack_from(">h", frame, 8)[0]
    if size < 0 or len(frame) < 10 + size:
        return None
    return frame[10 : 10 + size].decode("utf-8", errors="replace")


def api_name(api_key: int, api_version: int) -> str:
    """Kafka's name of an API in snake case (``delete_records``), as kio's schemas name it, for
    messages; ``api <key>`` for a key kio does not know."""
    for version in (api_version, 0):
        try:
            module = request_class(api_key, version).__module__  # kio.schema.<name>.v<n>.request
        except Exception:  # kio's UnknownAPIKey / UnknownEntity: no such schema
            continue
        return module.split(".")[2]
    return f"api {api_key}"


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """The size-prefixed frame of a response ``body`` (a kio entity of that API and version)."""
    schema = response_class(api_key, api_version)
    header_schema = schema.__header_schema__
    encoded = produce_response_body(api_version, body) if api_key == _PRODUCE else None
    if encoded is not None:
        # Response header v0 is the correlation id; v1 (flexible versions) adds tagged fields.
        header = _SIZE.pack(correlation_id) + (b"\x00" if header_schema.__flexible__ else b"")
        return _SIZE.pack(len(header) + len(encoded)) + header + encoded
    out = io.BytesIO()
    entity_writer(header_schema)(out, build(header_schema, correlation_id=correlation_id))
    entity_writer(schema)(out, body)
    payload = out.getvalue()
    return _SIZE.pack(len(payload)) + payload


def api_key(request_class: type) -> int:
    """The API key of a kio request class (any version's: the key is the API's)."""
    return int(request_class.__api_key__)  # type: ignore[attr-defined]


@cache
def response_class(api_key: int, api_version: int) -> type:
    """The kio response class of an API version (kio resolves it by module name on each
    call; every answer needs it). Raises kio's error for an API or version it does not know."""
    return load_response_schema(api_key, api_version)


@cache
def request_class(api_key: int, api_version: int) -> type:
    """The kio request class of an API version, as :func:`response_class`."""
    return load_request_schema(api_key, api_version)


def nested_class(response: type, name: str) -> type:
    """A nested entity class of the module ``response`` was generated in."""
    return getattr(sys.modules[response.__module__], name)


def item_class(cls: type, name: str) -> type:
    """The entity class of the items of ``cls``'s list field ``name`` (``ProduceResponse``,
    ``"responses"`` -> ``TopicProduceResponse``)."""
    return typing.get_args(_hints(cls)[name])[0]


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _own_fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


@cache
def known_fields(cls: type) -> frozenset[str]:
    """The field names of the kio entity ``cls`` in any version of its message (the class of
    the same name in each version's module)."""
    names = {f.name for f in dataclasses.fields(cls)}
    parts = cls.__module__.split(".")
    at = next((i for i, part in enumerate(parts) if _VERSION_PART.match(part)), None)
    if at is None:
        return frozenset(names)
    package = importlib.import_module(".".join(parts[:at]))
    for version in pkgutil.iter_modules(package.__path__):
        if not _VERSION_PART.match(version.name):
            continue
        try:
            module = importlib.import_module(".".join([*parts[:at], version.name, *parts[at + 1 :]]))
        except ImportError:  # this version has no such module (a request-only message)
            continue
        other = getattr(module, cls.__name__, None)
        if other is not None and dataclasses.is_dataclass(other):
            names.update(f.name for f in dataclasses.fields(other))
    return frozenset(names)


def build(cls: type, **values: Any) -> Any:
    """An instance of the kio entity ``cls`` from plain values (see the module docstring).
    Raises ValueError naming a value no version of the entity has a field for."""
    # This version's own fields first: the other versions' modules are imported only for a
    # value this one lacks (importing them all took ~0.3 s on a new agent's first answers).
    extra = values.keys() - _own_fields(cls)
    unknown = sorted(extra - known_fields(cls)) if extra else []
    if unknown:
        raise ValueError(
            f"{cls.__module__}.{cls.__name__} has no field {unknown[0]!r} in any version "
            f"(fields: {', '.join(sorted(known_fields(cls)))})"
        )
    kwargs = {}
    for name, convert, zero in _plan(cls):
        if name in values:
            kwargs[name] = convert(values[name])
        elif zero is not _HAS_DEFAULT:
            kwargs[name] = _zero(zero.kind) if isinstance(zero, _NoZero) else zero
    return cls(**kwargs)


_HAS_DEFAULT = object()


@cache
def _plan(cls: type) -> tuple[tuple[str, Callable[[Any], Any], Any], ...]:
    """Per field of ``cls``: its name, its value converter and its zero (:data:`_HAS_DEFAULT`
    when the schema gives a default). Worked out once per class: every answer of the agent is
    built through here, and resolving type hints per value cost a Fetch answer more than its
    records did."""
    hints = _hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        zero: Any = _HAS_DEFAULT
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            try:
                zero = _zero(kind)  # immutable values: one serves every build
            except TypeError:
                zero = _NoZero(kind)
        plan.append((f.name, _converter(kind), zero))
    return tuple(plan)


@dataclass(frozen=True)
class _NoZero:
    # A field without a default or a zero: only a build that leaves it out fails (TypeError).
    kind: Any


@cache
def _converter(kind: Any) -> Callable[[Any], Any]:
    """A value given for a field of ``kind`` as the field holds it: None stays None, tuples
    item by item, nested entities built from mappings, milliseconds as timedeltas, plain values
    as kio's refined types (the type inspection done once per kind)."""
    origin = typing.get_origin(kind)
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if origin is tuple:
        item = _converter(args[0])
        return lambda value: None if value is None else tuple(item(v) for v in value)
    if origin in (typing.Union, types.UnionType) and args:
        return _converter(args[0])
    entity = dataclasses.is_dataclass(kind)
    timedelta = _bound(kind) is dt.timedelta
    coerce = isinstance(kind, type) and kind not in (str, bytes, bool)

    def convert(value: Any) -> Any:
        if value is None:
            return None
        if entity and isinstance(value, Mapping):
            return build(kind, **value)
        if timedelta and isinstance(value, int | float):
            return kind.parse(dt.timedelta(milliseconds=value))
        if coerce and not isinstance(value, kind):
            try:
                return kind(value)
            except TypeError:
                return value
        return value

    return convert


def _zero(kind: Any) -> Any:
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if type(None) in args:
        return None
    if origin is tuple:
        return ()
    if _bound(kind) is dt.timedelta:
        return kind.parse(dt.timedelta(0))
    if isinstance(kind, type):
        if issubclass(kind, bool):
            return False
        if issubclass(kind, int):
            return kind(0)
        if issubclass(kind, str):
            return ""
        if issubclass(kind, bytes):
            return b""
        if issubclass(kind, uuid.UUID):
            return uuid.UUID(int=0)
    raise TypeError(f"no zero value for {kind!r}")


def _bound(kind: Any) -> type | None:
    """The type a kio phantom type refines (``i32Timedelta`` -> timedelta), else None."""
    return getattr(kind, "__bound__", None)
