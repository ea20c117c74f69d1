"""Records of the internal compacted topic ``__consumer_offsets``.

As in Kafka, the topic holds two kinds of records, keyed so that log
compaction (latest value per key) keeps exactly what is needed:

* offset commits, key ``{"group", "topic", "partition"}`` -> value
  ``{"offset", "metadata", "commit_timestamp", "generation", "member_id"}``;
* group state, key ``{"group"}`` -> :class:`engine.groups.classic.ClassicGroup` JSON
  (Kafka's classic group protocol: lakelog's consumers and Kafka's clients
  through ``lakelog serve`` alike);
* a consumer-type group's state (KIP-848), key ``{"group", "type": "consumer"}`` ->
  :class:`engine.groups.consumer_group.ConsumerGroup` JSON. A group id is of one type at a
  time: whichever record has members (the other is then absent or empty).

A null value is a tombstone (a deleted group's offsets). Keys and values
are compact JSON so that the topic stays readable from any Delta reader;
keys are written with sorted fields so equal keys are equal bytes.

A group lives in one partition, chosen as Kafka does
(``abs(groupId.hashCode()) % offsets.topic.num.partitions``), so its offset
commits and membership changes conflict with each other -- and with nothing
else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakelog.engine.errors import InvalidConfigError, InvalidOffsetError
from lakelog.engine.topics import OFFSETS_TOPIC_PARTITIONS, TopicPartition

if TYPE_CHECKING:
    from lakelog.engine.groups.classic import ClassicGroup
    from lakelog.engine.groups.consumer_group import ConsumerGroup

# Kafka's protocol carries a group id as a STRING: an int16 length, then that many UTF-8 bytes
# (Kafka protocol guide, "Protocol Primitive Types"). A longer id could not be named by any Kafka
# client, nor listed through lakelog serve (ListGroups could not encode it).
GROUP_ID_MAX_BYTES = 32_767


# Kafka's offsets are Java longs; its OffsetAndMetadata refuses a negative one ("Invalid negative offset").
MAX_OFFSET = 2**63 - 1
MIN_LONG = -(2**63)


def check_offset(offset: object, what: str, low: int = 0) -> int:
    """``offset`` if it is an int in [``low``, :data:`MAX_OFFSET`] (by default a valid Kafka offset;
    ``MIN_LONG`` for any Java long, as a reset target that is clamped afterwards); else
    InvalidOffsetError naming ``what``, the value and the range."""
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidOffsetError(f"{what} must be an int, got {offset!r}")
    if not low <= offset <= MAX_OFFSET:
        kind = "non-negative Java longs" if low == 0 else "Java longs"
        raise InvalidOffsetError(f"{what} {offset} is outside {low}..{MAX_OFFSET} (Kafka's offsets are {kind})")
    return offset


def check_group_id(group_id: object, key: str = "group.id") -> str:
    """``group_id`` if it is a non-empty string of at most :data:`GROUP_ID_MAX_BYTES` UTF-8
    bytes; else InvalidConfigError naming ``key`` and the limit."""
    if not isinstance(group_id, str) or not group_id:
        raise InvalidConfigError(f"{key} must be a non-empty string, got {group_id!r}")
    size = len(group_id.encode("utf-8", "surrogatepass"))
    if size > GROUP_ID_MAX_BYTES:
        raise InvalidConfigError(
            f"{key} {group_id[:20]!r}... is {size} bytes in UTF-8; Kafka's protocol carries a group id "
            f"of at most {GROUP_ID_MAX_BYTES} bytes"
        )
    return group_id


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit signed)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """Kafka's ``GroupCoordinator.partitionFor``: ``Utils.abs(groupId.hashCode) % partitions``."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _dumps(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def offset_key(group_id: str, tp: TopicPartition) -> bytes:
    return _dumps({"group": group_id, "partition": tp.partition, "topic": tp.topic})


def group_key(group_id: str) -> bytes:
    return _dumps({"group": group_id})


def consumer_group_key(group_id: str) -> bytes:
    return _dumps({"group": group_id, "type": "consumer"})


def is_group_record(key: bytes | None, group_id: str) -> bool:
    """Whether a record with ``key`` holds ``group_id``'s classic state (not one of its offsets)."""
    if key is None:
        return False
    k = json.loads(key)
    return k.get("group") == group_id and "topic" not in k and "type" not in k


def is_consumer_group_record(key: bytes | None, group_id: str) -> bool:
    """Whether a record with ``key`` holds ``group_id``'s consumer-type (KIP-848) state."""
    if key is None:
        return False
    k = json.loads(key)
    return k.get("group") == group_id and k.get("type") == "consumer"


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: the next offset the group will read, as in Kafka."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    generation: int = -1
    member_id: str | None = None
    # The id of the topic the offset was committed for: an offset of a deleted topic
    # never applies to a topic created later under the same name (Kafka removes a
    # deleted topic's offsets from its groups).
    topic_id: str | None = None


def offset_value(committed: OffsetAndMetadata) -> bytes:
    value = {
        "commit_timestamp": committed.commit_timestamp,
        "generation": committed.generation,
        "member_id": committed.member_id,
        "metadata": committed.metadata,
        "offset": committed.offset,
    }
    if committed.topic_id is not None:
        value["topic_id"] = committed.topic_id
    return _dumps(value)


def current_offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata], topic_ids: Mapping[str, str]
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The committed offsets that belong to topics as they exist now (``topic_ids``: name -> id)."""
    return {
        tp: o
        for tp, o in offsets.items()
        if tp.topic in topic_ids and (o.topic_id is None or o.topic_id == topic_ids[tp.topic])
    }


@dataclass
class GroupRecords:
    """The latest value of every key of one group, folded from its partition's records."""

    group_id: str
    state: ClassicGroup | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    consumer: ConsumerGroup | None = None  # the group's state if it is of the consumer type

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Fold one record (records must be applied in offset order)."""
        if key is None:
            return
        k = json.loads(key)
        if k.get("group") != self.group_id:
            return
        if "topic" in k:
            tp = TopicPartition(k["topic"], int(k["partition"]))
            if value is None:
                self.offsets.pop(tp, None)
            else:
                v = json.loads(value)
                self.offsets[tp] = OffsetAndMetadata(
                    v["offset"],
                    v.get("metadata", ""),
                    v.get("commit_timestamp", -1),
                    v.get("generation", -1),
                    v.get("member_id"),
                    v.get("topic_id"),
                )
        elif k.get("type") == "consumer":
            from lakelog.engine.groups.consumer_group import ConsumerGroup

            self.consumer = None if value is None else ConsumerGroup.from_json(value.decode())
        else:
            # Imported when a group's state is read: the CLI's offset checks (check_offset)
            # load this module in every command, which need neither protocol's state machine.
            from lakelog.engine.groups.classic import ClassicGroup

            self.state = None if value is None else ClassicGroup.from_json(value.decode())


def fold_groups(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, GroupRecords]:
    """Every group's latest state and offsets from (key, value) records in offset order."""
    groups: dict[str, GroupRecords] = {}
    for key, value in records:
        if key is None:
            continue
        group_id = json.loads(key).get("group")
        if group_id is None:
            continue
        groups.setdefault(group_id, GroupRecords(group_id)).apply(key, value)
    return groups
