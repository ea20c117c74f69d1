"""Admin APIs of the endpoint: topics, configs and consumer groups, onto the store's own admin.

DeleteTopics, CreatePartitions and IncrementalAlterConfigs are one Delta
metadata commit each, as ``lakelog topics delete/alter`` make them;
DescribeConfigs reads a topic's effective configuration; ListGroups,
DescribeGroups, DeleteGroups and OffsetDelete read and tombstone
``__consumer_offsets`` as ``lakelog groups`` does, so Kafka's ``kafka-consumer-groups`` and lakelog's
CLI see the same groups (lakelog's consumers as members, with their
assignments in Kafka's consumer protocol encoding).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Collection
from typing import Any

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from lakelog.engine.admin.groups import delete_group, delete_offsets, describe_group, list_groups
from lakelog.engine.errors import GroupIdNotFoundError, InvalidConfigError, InvalidPartitionsError
from lakelog.engine.offsets import TopicPartition
from lakelog.engine.topics import TOPIC_CONFIG_KEYS, TopicMetadata
from lakelog.kafka_endpoint.messages import Request, build, response_class

DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 20, 37, 32, 44
LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 16, 15, 42, 47

VERSIONS: dict[int, tuple[int, int]] = {
    DELETE_TOPICS: (1, 5),  # v6 names topics by id
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_CONFIGS: (1, 4),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    LIST_GROUPS: (0, 4),
    DESCRIBE_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
}

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations (APPEND/SUBTRACT are for list configs)
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # DescribeConfigs config sources


def _outcome(action: Callable[[], Any], error_code: Callable[[BaseException], ErrorCode]) -> dict[str, Any]:
    try:
        action()
    except Exception as exc:
        return {"error_code": error_code(exc), "error_message": str(exc)}
    return {"error_code": ErrorCode.none, "error_message": None}


def delete_topics(store: Any, request: Request, error_code: Callable[[BaseException], ErrorCode]) -> Any:
    responses = [
        {"name": name, **_outcome(lambda name=name: store.delete_topic(name), error_code)}
        for name in request.body.topic_names
    ]
    return build(response_class(DELETE_TOPICS, request.api_version), responses=responses)


def create_partitions(store: Any, request: Request, error_code: Callable[[BaseException], ErrorCode]) -> Any:
    def grow(topic: Any) -> None:
        if topic.assignments:
            raise InvalidPartitionsError("manual replica assignments: every partition lives in the store")
        if not request.body.validate_only:
            store.create_partitions(topic.name, int(topic.count))

    results = [{"name": t.name, **_outcome(lambda t=t: grow(t), error_code)} for t in request.body.topics]
    return build(response_class(CREATE_PARTITIONS, request.api_version), results=results)


def describe_configs(store: Any, request: Request, error_code: Callable[[BaseException], ErrorCode]) -> Any:
    topics = store._latest_topics()
    results = []
    for resource in request.body.resources:
        answer: dict[str, Any] = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.none,
            "error_message": None,
            "configs": [],
        }
        if resource.resource_type == TOPIC_RESOURCE:
            topic = topics.get(resource.resource_name)
            if topic is None:
                answer.update(error_code=ErrorCode.unknown_topic_or_partition, error_message="no such topic")
            else:
                answer["configs"] = topic_config_entries(topic, resource.configuration_keys)
        elif resource.resource_type != BROKER_RESOURCE:
            answer.update(error_code=ErrorCode.invalid_request, error_message="only topic and broker configs")
        results.append(answer)
    return build(response_class(DESCRIBE_CONFIGS, request.api_version), results=results)


def topic_config_entries(topic: TopicMetadata, wanted: Collection[str] | None = None) -> list[dict[str, Any]]:
    """A topic's effective configuration as Kafka's config entries, sorted by name (every field
    DescribeConfigs has; CreateTopics' CreatableTopicConfigs takes the ones it has): the
    overrides as DYNAMIC_TOPIC_CONFIG, the rest as DEFAULT_CONFIG; only ``wanted`` names when
    given."""
    return [
        {
            "name": name,
            "value": _config_text(value),
            "read_only": False,
            "is_default": name not in topic.overrides,
            "config_source": DYNAMIC_TOPIC_CONFIG if name in topic.overrides else DEFAULT_CONFIG,
            "is_sensitive": False,
            "synonyms": [],
            "documentation": TOPIC_CONFIG_KEYS[name].doc if name in TOPIC_CONFIG_KEYS else None,
        }
        for name, value in sorted(topic.config().items())
        if wanted is None or name in wanted
    ]


def _config_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def incremental_alter_configs(store: Any, request: Request, error_code: Callable[[BaseException], ErrorCode]) -> Any:
    def alter(resource: Any) -> None:
        if resource.resource_type != TOPIC_RESOURCE:
            raise InvalidConfigError("only topic configs can be altered")
        setting = {c.name: c.value for c in resource.configs if c.config_operation == SET}
        deleting = [c.name for c in resource.configs if c.config_operation == DELETE]
        if len(setting) + len(deleting) != len(resource.configs):
            raise InvalidConfigError("APPEND and SUBTRACT apply to list configs, which topics here do not have")
        if not request.body.validate_only:
            store.alter_topic_config(resource.resource_name, setting or None, deleting or None)

    responses = [
        {
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            **_outcome(lambda r=r: alter(r), error_code),
        }
        for r in request.body.resources
    ]
    return build(response_class(INCREMENTAL_ALTER_CONFIGS, request.api_version), responses=responses)


def list_consumer_groups(store: Any, request: Request) -> Any:
    wanted = set(getattr(request.body, "states_filter", ()) or ())
    groups = [
        {"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state}
        for g in list_groups(store)
        if not wanted or g.state in wanted
    ]
    return build(response_class(LIST_GROUPS, request.api_version), error_code=ErrorCode.none, groups=groups)


def encode_assignment(partitions: Any) -> bytes:
    """A member's assignment in Kafka's consumer protocol (ConsumerProtocolAssignment v0)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = io.BytesIO()
    out.write(struct.pack(">h", 0))
    entity_writer(ConsumerProtocolAssignment)(
        out,
        build(
            ConsumerProtocolAssignment,
            assigned_partitions=[{"topic": t, "partitions": ps} for t, ps in sorted(by_topic.items())],
        ),
    )
    return out.getvalue()


def describe_consumer_groups(store: Any, request: Request) -> Any:
    groups = []
    for group_id in request.body.groups:
        try:
            found = describe_group(store, group_id)
        except GroupIdNotFoundError:
            groups.append({"error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead", "members": []})
            continue
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": "/lakelog",
                "member_metadata": b"",
                "member_assignment": encode_assignment(m.assignment),
            }
            for m in found.members
        ]
        groups.append(
            {
                "error_code": ErrorCode.none,
                "group_id": group_id,
                "group_state": found.state,
                "protocol_type": "consumer",
                "protocol_data": found.assignor or "",
                "members": members,
                "authorized_operations": -2147483648,
            }
        )
    return build(response_class(DESCRIBE_GROUPS, request.api_version), groups=groups)


def delete_consumer_groups(store: Any, request: Request, error_code: Callable[[BaseException], ErrorCode]) -> Any:
    results = [
        {"group_id": g, **{"error_code": _outcome(lambda g=g: delete_group(store, g), error_code)["error_code"]}}
        for g in request.body.groups_names
    ]
    return build(response_class(DELETE_GROUPS, request.api_version), results=results)


def delete_consumer_group_offsets(
    store: Any, request: Request, error_code: Callable[[BaseException], ErrorCode]
) -> Any:
    """OffsetDelete (KIP-496): per topic, the group's offsets of the partitions that exist are
    deleted in one commit, or the topic's partitions carry the error (GROUP_SUBSCRIBED_TO_TOPIC
    while live members subscribe to it); a group that does not exist is a top-level
    GROUP_ID_NOT_FOUND, as Kafka's coordinator answers."""
    group_id = request.body.group_id
    topics = store._latest_topics()
    answers = []
    for topic in request.body.topics:
        meta = topics.get(topic.name)
        count = 0 if meta is None or meta.internal else meta.partitions
        asked = [int(p.partition_index) for p in topic.partitions]
        codes = {p: ErrorCode.unknown_topic_or_partition for p in asked if not 0 <= p < count}
        known = [TopicPartition(topic.name, p) for p in asked if p not in codes]
        if known:
            try:
                delete_offsets(store, group_id, known)
            except GroupIdNotFoundError as exc:
                return build(response_class(OFFSET_DELETE, request.api_version), error_code=error_code(exc))
            except Exception as exc:
                codes.update(dict.fromkeys((tp.partition for tp in known), error_code(exc)))
        partitions = [{"partition_index": p, "error_code": codes.get(p, ErrorCode.none)} for p in asked]
        answers.append({"name": topic.name, "partitions": partitions})
    return build(response_class(OFFSET_DELETE, request.api_version), error_code=ErrorCode.none, topics=answers)
