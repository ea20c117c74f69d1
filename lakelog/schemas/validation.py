"""Broker-side schema validation, as Confluent Server names it (``confluent.value.schema.validation``).

A topic with ``confluent.value.schema.validation=true`` (``confluent.key.schema.validation`` for
keys) takes only records whose value (key) is in Confluent's wire format -- magic byte 0, then
the 4-byte big-endian id of a schema -- with an id registered under the subject
``<topic>-value`` (``<topic>-key``: Confluent's default TopicNameStrategy) in a version not
deleted. Null values and keys carry no schema and pass. ``lakelog serve`` refuses a produce
request's records for a partition whole, with INVALID_RECORD, when one of them fails; nothing
of them is committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from lakelog.engine.context import StoreContext
from lakelog.engine.errors import InvalidRecordError
from lakelog.engine.topics import TopicMetadata
from lakelog.schemas.registry import Registry
from lakelog.schemas.schemas_topic import RegistryState

MAGIC = 0


class RecordBatch(Protocol):
    """What is checked of a produce request's batch: its records' keys and values."""

    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]


def schema_id_of(payload: bytes) -> int | None:
    """The schema id a payload in Confluent's wire format names, or None if it is not framed so."""
    if len(payload) < 5 or payload[0] != MAGIC:
        return None
    return int.from_bytes(payload[1:5], "big")


def unregistered(state: RegistryState, subject: str, payloads: Iterable[bytes | None]) -> str | None:
    """Why a payload of ``payloads`` is refused for ``subject`` (the first), or None if all pass."""
    ids = {sv.schema_id for sv in state.versions(subject)}
    for index, payload in enumerate(payloads):
        if payload is None:
            continue
        schema_id = schema_id_of(payload)
        if schema_id is None:
            return f"record {index} is not framed with a schema id (magic byte 0 and a 4-byte id)"
        if schema_id not in ids:
            return f"record {index} names schema id {schema_id}, which is not registered under subject {subject!r}"
    return None


class SchemaValidation:
    """Checks records for topics that ask for it, against the store's registry (read only then)."""

    def __init__(self, context: StoreContext) -> None:
        self._registry = Registry(context)

    def check(self, topic: TopicMetadata | None, batches: Sequence[RecordBatch]) -> None:
        """Raise InvalidRecordError (INVALID_RECORD) naming the topic, the subject and the record when
        ``topic`` validates keys or values and one of ``batches``' is refused; nothing is read (and
        the batches are not looked at) when it validates neither."""
        if topic is None:
            return
        wanted = [part for part in ("key", "value") if topic.config_value(f"confluent.{part}.schema.validation")]
        if not wanted:
            return
        state = self._registry.state()
        for part in wanted:
            payloads = [p for b in batches for p in (b.keys if part == "key" else b.values)]
            problem = unregistered(state, f"{topic.name}-{part}", payloads)
            if problem is not None:
                raise InvalidRecordError(f"topic {topic.name!r} validates its {part}s: {problem}")
