"""Topic changes planned as plain functions: create, delete, grow, alter (and create
``__consumer_offsets``).

Each function takes the topics and table configuration as of a Delta
version and returns the :class:`TopicChange` to commit, or raises the
Kafka-style error explaining why not. The commit loop re-plans after a
conflict, so two clients creating one topic at once end with one topic and
one TopicExistsError.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from lakelog.engine.commit import TopicChange
from lakelog.engine.commit.info import admin_tags
from lakelog.engine.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    TopicExistsError,
)
from lakelog.engine.topics import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_CONFIG,
    OFFSETS_TOPIC_PARTITIONS,
    TOPIC_CONFIG_KEYS,
    TopicMetadata,
    collision_key,
    encode_topic,
    parse_topic_config,
    require_topic,
    topic_property_key,
    validate_partition_count,
    validate_topic_name,
)


def _with_topic(properties: Mapping[str, str], topic: TopicMetadata) -> dict[str, str]:
    updated = dict(properties)
    updated[topic_property_key(topic.name)] = encode_topic(topic)
    return updated


def plan_create(
    topics: Mapping[str, TopicMetadata],
    properties: Mapping[str, str],
    *,
    name: str,
    partitions: int,
    config: Mapping[str, Any] | None,
    now_ms: int,
    client_id: str,
    internal: bool = False,
) -> TopicChange:
    validate_topic_name(name)
    if name in INTERNAL_TOPICS and not internal:
        raise InvalidTopicError(f"topic {name!r} is reserved for lakelog's internal use")
    validate_partition_count(partitions)
    overrides = parse_topic_config(config)
    if name in topics:
        raise TopicExistsError(f"topic {name!r} already exists")
    for other in topics:
        if collision_key(other) == collision_key(name):
            raise InvalidTopicError(
                f"topic {name!r} collides with existing topic {other!r} (names may not differ only in '.' and '_')"
            )
    topic = TopicMetadata(name, str(uuid.uuid4()), partitions, overrides, now_ms)
    details = {"partitions": partitions, "config": {k: TOPIC_CONFIG_KEYS[k].render(v) for k, v in overrides.items()}}
    return TopicChange(_with_topic(properties, topic), admin_tags("create_topic", client_id, name, details))


def plan_create_offsets_topic(
    topics: Mapping[str, TopicMetadata], properties: Mapping[str, str], *, now_ms: int, client_id: str
) -> TopicChange:
    """Create ``__consumer_offsets`` (Kafka's 50 partitions, compacted)."""
    return plan_create(
        topics,
        properties,
        name=OFFSETS_TOPIC,
        partitions=OFFSETS_TOPIC_PARTITIONS,
        config=OFFSETS_TOPIC_CONFIG,
        now_ms=now_ms,
        client_id=client_id,
        internal=True,
    )


def plan_delete(
    topics: Mapping[str, TopicMetadata], properties: Mapping[str, str], *, name: str, client_id: str
) -> TopicChange:
    topic = require_topic(topics, name)
    if topic.internal:
        raise InvalidTopicError(f"topic {name!r} is internal and cannot be deleted")
    updated = {k: v for k, v in properties.items() if k != topic_property_key(name)}
    tags = admin_tags("delete_topic", client_id, name, {"topic_id": topic.topic_id})
    return TopicChange(updated, tags, delete_topic=name)


def plan_create_partitions(
    topics: Mapping[str, TopicMetadata], properties: Mapping[str, str], *, name: str, new_total: int, client_id: str
) -> TopicChange:
    topic = require_topic(topics, name)
    validate_partition_count(new_total, what="new partition count")
    if new_total < topic.partitions:
        raise InvalidPartitionsError(
            f"topic {name!r} has {topic.partitions} partitions; the count can only grow, not shrink to {new_total}"
        )
    if new_total == topic.partitions:
        raise InvalidPartitionsError(f"topic {name!r} already has {new_total} partitions")
    grown = TopicMetadata(topic.name, topic.topic_id, new_total, topic.overrides, topic.created_ms)
    tags = admin_tags("create_partitions", client_id, name, {"from": topic.partitions, "to": new_total})
    return TopicChange(_with_topic(properties, grown), tags)


def plan_alter_config(
    topics: Mapping[str, TopicMetadata],
    properties: Mapping[str, str],
    *,
    name: str,
    set_config: Mapping[str, Any] | None,
    delete_config: Iterable[str] | None,
    client_id: str,
) -> TopicChange:
    topic = require_topic(topics, name)
    to_set = parse_topic_config(set_config)
    to_delete = list(delete_config or [])
    for key in to_delete:
        if key not in TOPIC_CONFIG_KEYS:
            raise InvalidConfigError(
                f"unknown topic config key {key!r}; known keys: {', '.join(sorted(TOPIC_CONFIG_KEYS))}"
            )
        if key in to_set:
            raise InvalidConfigError(f"config {key!r} is both set and deleted")
    if not to_set and not to_delete:
        raise InvalidConfigError("nothing to alter: give configs to set or delete")
    overrides = {k: v for k, v in topic.overrides.items() if k not in to_delete}
    overrides.update(to_set)
    altered = TopicMetadata(topic.name, topic.topic_id, topic.partitions, overrides, topic.created_ms)
    details = {
        "set": {k: TOPIC_CONFIG_KEYS[k].render(v) for k, v in to_set.items()},
        "delete": sorted(to_delete),
    }
    return TopicChange(_with_topic(properties, altered), admin_tags("alter_config", client_id, name, details))
