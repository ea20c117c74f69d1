"""Records in Confluent's wire format decoded with the store's registry, without Spark.

A key or value framed as Confluent's serializers frame it (byte 0, the 4-byte big-endian
schema id, then the data; Protobuf data after the message indexes, a zigzag-varint array
naming the message in its file) decodes to Python values: an Avro record or a JSON object
to a dict, a Protobuf message to a dict of its fields (``json_format.MessageToDict``,
field names as declared). With a subject named, Avro data is resolved to the subject's
latest live schema, so records written with an older compatible schema show the fields
added since with their defaults (Avro's schema resolution).
"""

from __future__ import annotations

import functools
import io
import json
from typing import Any, Protocol

import avro.errors
import avro.io
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from lakelog.engine.context import StoreContext
from lakelog.engine.errors import FatalError
from lakelog.schemas.formats import ParsedSchema
from lakelog.schemas.protobuf_schemas import file_set
from lakelog.schemas.registry import Registry
from lakelog.schemas.registry_errors import InvalidSchemaError
from lakelog.schemas.schemas_topic import Reference, RegistryState
from lakelog.schemas.subject_rules import get_version, parse_version_schema
from lakelog.schemas.validation import schema_id_of


class RecordDecodeError(FatalError, ValueError):
    """A key or value that does not decode: not in Confluent's wire format, an id the registry does
    not know, or data its schema does not read. The message names the record (topic, partition,
    offset) when the caller gave them."""


class OpenedStore(Protocol):
    """What the decoder needs of a :class:`lakelog.store.Store` (which sits above this package)."""

    @property
    def context(self) -> StoreContext: ...


class RecordDecoder:
    """Decodes keys and values with the schemas of ``store``'s ``_schemas`` topic (the one any agent
    serving the store registers in), reading its latest records at each call. Thread-safe."""

    def __init__(self, store: OpenedStore) -> None:
        self._registry = Registry(store.context)

    def decode(self, payload: bytes | None, subject: str | None = None, where: str = "") -> Any:
        """``payload`` decoded (None stays None); ``subject``: resolve Avro data to its latest schema.
        Raises RecordDecodeError naming ``where`` (for example ``orders-0@17``)."""
        if payload is None:
            return None
        at = f" ({where})" if where else ""
        schema_id = schema_id_of(payload)
        if schema_id is None:
            raise RecordDecodeError(f"record{at} is not in Confluent's wire format (magic byte 0 and a schema id)")
        state = self._registry.state()
        found = state.with_id(schema_id)
        if not found:
            raise RecordDecodeError(f"record{at} names schema id {schema_id}, which the registry does not know")
        writer = parse_version_schema(state, found[0])
        try:
            if writer.schema_type == "AVRO":
                return _avro(writer, _reader(state, subject, writer), payload[5:])
            if writer.schema_type == "JSON":
                return json.loads(payload[5:])
            return _protobuf(found[0].schema, imported_files(state, found[0].references), payload[5:])
        except (
            ValueError,
            TypeError,
            KeyError,
            IndexError,
            DecodeError,
            InvalidSchemaError,
            avro.errors.AvroException,
        ) as exc:
            raise RecordDecodeError(f"record{at} does not decode with schema id {schema_id}: {exc}") from exc

    def value(self, record: Any) -> Any:
        """The value of a consumer record (``topic``, ``partition``, ``offset``, ``value``), decoded
        with the latest schema of ``<topic>-value``."""
        where = f"topic {record.topic!r}, partition {record.partition}, offset {record.offset}"
        return self.decode(record.value, f"{record.topic}-value", where)

    def key(self, record: Any) -> Any:
        """The key of a consumer record, decoded with the latest schema of ``<topic>-key``."""
        where = f"topic {record.topic!r}, partition {record.partition}, offset {record.offset}"
        return self.decode(record.key, f"{record.topic}-key", where)


def _reader(state: RegistryState, subject: str | None, writer: ParsedSchema) -> ParsedSchema:
    live = state.versions(subject) if subject else []
    if live and live[-1].schema_type == "AVRO":
        return parse_version_schema(state, live[-1])
    return writer


def _avro(writer: ParsedSchema, reader: ParsedSchema, data: bytes) -> Any:
    return avro.io.DatumReader(writer.parsed, reader.parsed).read(avro.io.BinaryDecoder(io.BytesIO(data)))


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at  # zigzag
        shift += 7


def message_indexes(data: bytes) -> tuple[list[int], int]:
    """The message indexes Confluent's Protobuf framing puts before the data, and where the data
    starts (a single 0 byte stands for ``[0]``, the file's first message)."""
    count, at = _varint(data, 0)
    if count == 0:
        return [0], at
    indexes = []
    for _ in range(count):
        index, at = _varint(data, at)
        indexes.append(index)
    return indexes, at


def imported_files(state: RegistryState, references: tuple[Reference, ...]) -> tuple[tuple[str, str], ...]:
    """(import name, schema text) of each referenced file and of theirs, each after what it imports."""
    files: list[tuple[str, str]] = []
    for ref in references:
        sv = get_version(state, ref.subject, "latest" if ref.version == -1 else ref.version)
        files += [f for f in imported_files(state, sv.references) if f not in files]
        files.append((ref.name, sv.schema))
    return tuple(files)


def _protobuf(text: str, imports: tuple[tuple[str, str], ...], data: bytes) -> Any:
    indexes, at = message_indexes(data)
    message = _message_class(text, imports, tuple(indexes))()
    message.ParseFromString(data[at:])
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


@functools.lru_cache(maxsize=1024)
def _message_class(text: str, imports: tuple[tuple[str, str], ...], indexes: tuple[int, ...]) -> Any:
    """The message class ``indexes`` names in the file ``text``, built in a pool of its own with the
    files it imports (registered references, else protobuf's well-known files)."""
    pool = descriptor_pool.DescriptorPool()
    files = file_set(text, imports).file
    for f in files:
        pool.Add(f)
    main = files[-1]
    message = main.message_type[indexes[0]]
    name = message.name
    for index in indexes[1:]:
        message = message.nested_type[index]
        name = f"{name}.{message.name}"
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{main.package}.{name}" if main.package else name)
    )
