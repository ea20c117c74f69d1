"""Topics: the (topic, partition) pair, Kafka's naming rules, topic configuration keys, the
internal topics, and how topic metadata is kept in the log table.

Topic metadata lives in the log table's Delta properties, one property per
topic (``lakelog.topic.<name>`` = JSON). Every topic change is therefore a
Delta metadata change, and Delta fails every concurrent commit that read the
old metadata (``MetadataChangedException``): a record can never be committed
against a topic that was deleted or re-created meanwhile. Only explicitly set
configs are stored; the others resolve to the defaults below at read time,
as Kafka resolves them against broker defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from lakelog.engine.config import INT_MAX, ConfigKey, key_table, resolve_config
from lakelog.engine.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    UnknownTopicOrPartitionError,
)

TOPIC_PROPERTY_PREFIX = "lakelog.topic."
STORE_FORMAT_PROPERTY = "lakelog.format.version"
STORE_FORMAT_VERSION = "1"

MAX_TOPIC_NAME_LENGTH = 249  # Kafka's Topic.MAX_NAME_LENGTH
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")

# Consumer groups' offsets and state (engine.groups.offsets_topic holds its records' format).
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50  # Kafka's offsets.topic.num.partitions
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact"}

# Topics the engine itself owns; users cannot create or delete them.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})

MAX_PARTITIONS = 100_000


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def _positive_or_unlimited(value: int) -> str | None:
    return None if value == -1 or value >= 0 else "must be -1 (unlimited) or non-negative"


TOPIC_CONFIG_KEYS = key_table(
    [
        ConfigKey(
            "cleanup.policy",
            "list",
            ("delete",),
            "delete: drop whole files past retention; compact: keep the latest value per key.",
            choices=("delete", "compact"),
            check=lambda v: None if v else "must name at least one of delete, compact",
        ),
        ConfigKey(
            "retention.ms",
            "long",
            604_800_000,
            "Age after which whole files of a partition become eligible for deletion (-1: never).",
            minimum=-1,
            check=_positive_or_unlimited,
        ),
        ConfigKey(
            "retention.bytes",
            "long",
            -1,
            "Per-partition size above which the oldest files become eligible for deletion (-1: no limit).",
            minimum=-1,
        ),
        ConfigKey(
            "max.message.bytes",
            "int",
            1_048_588,
            "Largest record accepted (key + value + header keys and values, in bytes).",
            minimum=0,
            maximum=INT_MAX,
        ),
        ConfigKey(
            "message.timestamp.type",
            "enum",
            "CreateTime",
            "CreateTime keeps the producer's timestamp; LogAppendTime stamps records when they are written.",
            choices=("CreateTime", "LogAppendTime"),
        ),
        ConfigKey(
            "min.compaction.lag.ms",
            "long",
            0,
            "Records younger than this are never compacted.",
            minimum=0,
        ),
        ConfigKey(
            "delete.retention.ms",
            "long",
            86_400_000,
            "How long a tombstone stays readable after compaction reached it.",
            minimum=0,
        ),
        ConfigKey(
            "segment.bytes",
            "int",
            134_217_728,
            "Target data file size for OPTIMIZE, the equivalent of Kafka's segment size.",
            minimum=1024,
            maximum=INT_MAX,
        ),
        # Confluent Server's broker-side schema validation, enforced by lakelog serve's Produce.
        ConfigKey(
            "confluent.key.schema.validation",
            "bool",
            False,
            "lakelog serve refuses (INVALID_RECORD) a record whose non-null key does not carry the id "
            "of a schema registered under the subject TOPIC-key.",
        ),
        ConfigKey(
            "confluent.value.schema.validation",
            "bool",
            False,
            "lakelog serve refuses (INVALID_RECORD) a record whose non-null value does not carry the id "
            "of a schema registered under the subject TOPIC-value.",
        ),
    ]
)

TIMESTAMP_TYPE_CODES = {"CreateTime": 0, "LogAppendTime": 1}


def validate_topic_name(name: Any) -> str:
    """Apply Kafka's topic name rules; return the name or raise InvalidTopicError."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"topic name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name {name[:40]!r}... is {len(name)} characters; the limit is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC.match(name):
        bad = sorted({ch for ch in name if not re.match(r"[a-zA-Z0-9._-]", ch)})
        raise InvalidTopicError(
            f"topic name {name!r} contains {''.join(bad)!r}; "
            "legal characters are ASCII letters, digits, '.', '_' and '-'"
        )
    return name


def collision_key(name: str) -> str:
    """Kafka refuses topics whose names differ only in '.' versus '_' (metric names collide)."""
    return name.replace(".", "_")


def validate_partition_count(count: Any, *, what: str = "partitions") -> int:
    """Return ``count`` if it is a usable partition count, else raise InvalidPartitionsError."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise InvalidPartitionsError(f"{what} must be an integer, got {count!r}")
    if count < 1:
        raise InvalidPartitionsError(f"{what} must be at least 1, got {count}")
    if count > MAX_PARTITIONS:
        raise InvalidPartitionsError(f"{what} must be at most {MAX_PARTITIONS}, got {count}")
    return count


def parse_topic_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate explicit topic config overrides (no defaults filled in)."""
    return resolve_config(TOPIC_CONFIG_KEYS, config, what="topic config", with_defaults=False)


@dataclass(frozen=True)
class TopicMetadata:
    """What the store knows about one topic.

    ``overrides`` holds only the configs set explicitly; :meth:`config` gives
    the effective configuration.
    """

    name: str
    topic_id: str
    partitions: int
    overrides: Mapping[str, Any] = field(default_factory=dict)
    created_ms: int = 0

    def config(self) -> dict[str, Any]:
        values = {name: key.default for name, key in TOPIC_CONFIG_KEYS.items()}
        values.update(self.overrides)
        return values

    def config_value(self, name: str) -> Any:
        if name in self.overrides:
            return self.overrides[name]
        return TOPIC_CONFIG_KEYS[name].default

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @cached_property
    def max_message_bytes(self) -> int:
        # Cached (in the instance's __dict__, which a frozen dataclass allows): send() checks
        # every record against it.
        return int(self.config_value("max.message.bytes"))

    @property
    def log_append_time(self) -> bool:
        return self.config_value("message.timestamp.type") == "LogAppendTime"


def topic_property_key(name: str) -> str:
    return TOPIC_PROPERTY_PREFIX + name


def encode_topic(topic: TopicMetadata) -> str:
    """Serialize a topic for its table property (config values as Kafka renders them)."""
    overrides = {name: TOPIC_CONFIG_KEYS[name].render(value) for name, value in sorted(topic.overrides.items())}
    return json.dumps(
        {
            "id": topic.topic_id,
            "partitions": topic.partitions,
            "config": overrides,
            "created": topic.created_ms,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def decode_topic(name: str, text: str) -> TopicMetadata:
    """Parse a topic property written by :func:`encode_topic`."""
    try:
        data = json.loads(text)
        overrides = parse_topic_config(data.get("config") or {})
        return TopicMetadata(
            name=name,
            topic_id=str(data["id"]),
            partitions=int(data["partitions"]),
            overrides=overrides,
            created_ms=int(data.get("created", 0)),
        )
    except (ValueError, KeyError, TypeError, InvalidConfigError) as exc:
        raise InvalidConfigError(f"store metadata for topic {name!r} is unreadable: {exc}") from exc


def topics_from_properties(properties: Mapping[str, str]) -> dict[str, TopicMetadata]:
    """All topics described by a table's properties, by name."""
    topics = {}
    for key, value in properties.items():
        if key.startswith(TOPIC_PROPERTY_PREFIX):
            name = key[len(TOPIC_PROPERTY_PREFIX) :]
            topics[name] = decode_topic(name, value)
    return topics


def require_topic(topics: Mapping[str, TopicMetadata], name: str) -> TopicMetadata:
    """The topic ``name`` of ``topics``; UnknownTopicOrPartitionError when it does not exist."""
    topic = topics.get(name)
    if topic is None:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    return topic


def require_partition(topics: Mapping[str, TopicMetadata], name: str, partition: int) -> TopicMetadata:
    """The topic holding ``partition``; UnknownTopicOrPartitionError when either does not exist."""
    topic = topics.get(name)
    if topic is None or not 0 <= partition < topic.partitions:
        raise UnknownTopicOrPartitionError(f"partition {partition} of topic {name!r} does not exist")
    return topic


def resolve_topic_names(spec: Any, topics: Mapping[str, TopicMetadata]) -> list[str]:
    """Topics named by ``spec``: a name, a list of names, or a compiled regex.

    Names must exist; a pattern selects the existing non-internal topics it
    matches in full (Kafka's subscribePattern), possibly none.
    """
    if isinstance(spec, re.Pattern):
        return sorted(name for name, t in topics.items() if not t.internal and spec.fullmatch(name))
    names = [spec] if isinstance(spec, str) else list(spec) if isinstance(spec, Iterable) else None
    if not names or not all(isinstance(n, str) for n in names):
        raise InvalidTopicError(f"topics must be a name, a list of names or a re.Pattern, got {spec!r}")
    for name in names:
        if name not in topics:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    return sorted(set(names))
