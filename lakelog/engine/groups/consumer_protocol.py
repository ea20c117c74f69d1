"""Kafka's consumer protocol: the bytes a consumer group's members exchange through the coordinator.

A member's JoinGroup metadata is a ConsumerProtocolSubscription (its topics,
the partitions it owns and their generation, user data); the leader's
assignment of each member, relayed by SyncGroup, a ConsumerProtocolAssignment.
Each starts with its int16 version (Kafka's ``ConsumerProtocol``: written at
the version the consumer speaks, read at any). lakelog's consumers write these
so that they and Kafka's clients (Java, librdkafka) share one group, whoever
leads it.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from lakelog.engine.kio_import import import_kio_without_hypothesis

# Before kio's imports below (engine.kio_import says why); here rather than in the package's
# __init__, so that the rest of engine.groups (offsets, group ids) loads without kio.
import_kio_without_hypothesis()

from kio.index import load_entity_schema  # noqa: E402
from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment  # noqa: E402
from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as AssignedTopic  # noqa: E402
from kio.schema.consumer_protocol_subscription.v2.data import ConsumerProtocolSubscription  # noqa: E402
from kio.schema.consumer_protocol_subscription.v2.data import TopicPartition as OwnedTopic  # noqa: E402
from kio.schema.types import TopicName  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.static.constants import EntityType  # noqa: E402
from kio.static.primitive import i32  # noqa: E402

from lakelog.engine.errors import InvalidRecordError  # noqa: E402
from lakelog.engine.topics import TopicPartition  # noqa: E402

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 2  # topics, user data, owned partitions, their generation (Kafka 2.4+ / 3.x)
ASSIGNMENT_VERSION = 1


@dataclass(frozen=True)
class MemberSubscription:
    """A member's ConsumerProtocolSubscription as the leader reads it."""

    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = -1
    user_data: bytes | None = None


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def encode_subscription(
    topics: Iterable[str], owned: Iterable[TopicPartition] = (), generation: int = -1, user_data: bytes | None = None
) -> bytes:
    """A ConsumerProtocolSubscription v2."""
    out = io.BytesIO()
    out.write(struct.pack(">h", SUBSCRIPTION_VERSION))
    entity_writer(ConsumerProtocolSubscription)(
        out,
        ConsumerProtocolSubscription(
            topics=tuple(sorted(set(topics))),
            user_data=user_data,
            owned_partitions=tuple(
                OwnedTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in ps))
                for t, ps in _by_topic(owned).items()
            ),
            generation_id=i32(generation),
        ),
    )
    return out.getvalue()


def _read(kind: str, data: bytes, newest: int) -> object:
    if len(data) < 2:
        raise InvalidRecordError(f"a {kind} of {len(data)} bytes has no version")
    version = struct.unpack_from(">h", data, 0)[0]
    if version < 0:
        raise InvalidRecordError(f"a {kind} of version {version}")
    # Newer versions only add fields at the end (Kafka's ConsumerProtocol reads them at its newest).
    schema = load_entity_schema(kind, min(version, newest), EntityType.data)
    try:
        value, _ = entity_reader(schema)(memoryview(data), 2)
    except Exception as exc:
        raise InvalidRecordError(f"a {kind} that cannot be read: {exc}") from exc
    return value


def decode_subscription(data: bytes) -> MemberSubscription:
    """A ConsumerProtocolSubscription of any version (InvalidRecordError if unreadable)."""
    value = _read("consumer_protocol_subscription", data, 3)
    owned = tuple(
        TopicPartition(str(t.topic), int(p)) for t in getattr(value, "owned_partitions", ()) for p in t.partitions
    )
    return MemberSubscription(
        tuple(str(t) for t in value.topics),  # type: ignore[attr-defined]
        owned,
        int(getattr(value, "generation_id", -1)),
        value.user_data,  # type: ignore[attr-defined]
    )


def encode_assignment(partitions: Iterable[TopicPartition], user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment v1."""
    out = io.BytesIO()
    out.write(struct.pack(">h", ASSIGNMENT_VERSION))
    entity_writer(ConsumerProtocolAssignment)(
        out,
        ConsumerProtocolAssignment(
            assigned_partitions=tuple(
                AssignedTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in ps))
                for t, ps in _by_topic(partitions).items()
            ),
            user_data=user_data,
        ),
    )
    return out.getvalue()


def decode_assignment(data: bytes) -> set[TopicPartition]:
    """The partitions of a ConsumerProtocolAssignment of any version; empty bytes (a member the
    leader left out) are no partitions. InvalidRecordError if unreadable."""
    if not data:
        return set()
    value = _read("consumer_protocol_assignment", data, 3)
    return {
        TopicPartition(str(t.topic), int(p))
        for t in value.assigned_partitions  # type: ignore[attr-defined]
        for p in t.partitions
    }
