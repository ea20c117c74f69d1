from __future__ import annotations

import pytest

from lakelog.engine.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.topic_changes import plan_alter_config, plan_create, plan_create_partitions, plan_delete
from lakelog.engine.topics import (
    TopicMetadata,
    decode_topic,
    encode_topic,
    parse_topic_config,
    topic_property_key,
    topics_from_properties,
    validate_partition_count,
    validate_topic_name,
)


@pytest.mark.parametrize("name", ["orders", "a", "A.b_c-9", "x" * 249, "__my_internal_looking"])
def test_legal_topic_names(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        (".", "cannot be '.'"),
        ("..", "cannot be '..'"),
        ("x" * 250, "is 250 characters; the limit is 249"),
        ("orders/eu", "contains '/'"),
        ("ordres é", "contains ' é'"),
        (42, "must be a string"),
    ],
)
def test_illegal_topic_names(name, fragment):
    with pytest.raises(InvalidTopicError, match=fragment):
        validate_topic_name(name)


@pytest.mark.parametrize("count", [0, -1, 1.5, "3", True, 100_001])
def test_bad_partition_counts(count):
    with pytest.raises(InvalidPartitionsError):
        validate_partition_count(count)


def test_topic_config_keys_are_typed():
    config = parse_topic_config(
        {
            "cleanup.policy": "compact,delete",
            "retention.ms": "-1",
            "retention.bytes": 10_000,
            "max.message.bytes": "2048",
            "message.timestamp.type": "logappendtime",
            "min.compaction.lag.ms": 0,
            "delete.retention.ms": 1000,
            "segment.bytes": 1 << 20,
        }
    )
    assert config["cleanup.policy"] == ("compact", "delete")
    assert config["retention.ms"] == -1
    assert config["message.timestamp.type"] == "LogAppendTime"


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"retention.hours": 1}, "unknown topic config key 'retention.hours'"),
        ({"cleanup.policy": "archive"}, "'archive' is not one of delete, compact"),
        ({"cleanup.policy": ""}, "at least one of"),
        ({"retention.ms": -2}, "must be at least -1"),
        ({"max.message.bytes": "big"}, "must be an integer"),
        ({"message.timestamp.type": "Now"}, "must be one of CreateTime, LogAppendTime"),
    ],
)
def test_bad_topic_configs(config, fragment):
    with pytest.raises(InvalidConfigError, match=fragment):
        parse_topic_config(config)


def test_topic_metadata_round_trips_through_its_property():
    topic = TopicMetadata("t.1", "id-1", 3, {"cleanup.policy": ("compact",), "retention.ms": 5}, 123)
    text = encode_topic(topic)
    assert decode_topic("t.1", text) == topic
    properties = {topic_property_key("t.1"): text, "delta.appendOnly": "false"}
    assert topics_from_properties(properties) == {"t.1": topic}
    assert topic.config()["max.message.bytes"] == 1_048_588
    assert topic.config()["cleanup.policy"] == ("compact",)


def test_corrupt_topic_property_is_reported_with_its_name():
    with pytest.raises(InvalidConfigError, match="topic 'x'"):
        decode_topic("x", "{not json")


def _topics(*topics: TopicMetadata) -> dict[str, TopicMetadata]:
    return {t.name: t for t in topics}


def _props(*topics: TopicMetadata) -> dict[str, str]:
    return {topic_property_key(t.name): encode_topic(t) for t in topics}


EXISTING = TopicMetadata("orders", "id-orders", 3, {"retention.ms": 1000}, 1)


def test_plan_create_adds_exactly_one_property():
    change = plan_create(
        _topics(EXISTING),
        _props(EXISTING),
        name="payments",
        partitions=2,
        config={"cleanup.policy": "compact"},
        now_ms=5,
        client_id="c",
    )
    added = set(change.properties) - set(_props(EXISTING))
    assert added == {topic_property_key("payments")}
    created = decode_topic("payments", change.properties[topic_property_key("payments")])
    assert created.partitions == 2 and created.overrides == {"cleanup.policy": ("compact",)}
    assert change.tags["lakelog.operation"] == "create_topic"


def test_plan_create_refuses_existing_colliding_and_reserved_names():
    with pytest.raises(TopicExistsError, match="'orders' already exists"):
        plan_create(_topics(EXISTING), {}, name="orders", partitions=1, config=None, now_ms=0, client_id="c")
    dotted = TopicMetadata("a.b", "id", 1)
    with pytest.raises(InvalidTopicError, match=r"collides with existing topic 'a\.b'"):
        plan_create(_topics(dotted), {}, name="a_b", partitions=1, config=None, now_ms=0, client_id="c")
    with pytest.raises(InvalidTopicError, match="reserved"):
        plan_create({}, {}, name="__consumer_offsets", partitions=1, config=None, now_ms=0, client_id="c")


def test_plan_delete_removes_the_property_and_names_the_topic():
    change = plan_delete(_topics(EXISTING), _props(EXISTING), name="orders", client_id="c")
    assert change.properties == {}
    assert change.delete_topic == "orders"
    with pytest.raises(UnknownTopicOrPartitionError, match="'nope' does not exist"):
        plan_delete(_topics(EXISTING), _props(EXISTING), name="nope", client_id="c")


def test_partitions_only_grow():
    change = plan_create_partitions(_topics(EXISTING), _props(EXISTING), name="orders", new_total=5, client_id="c")
    assert decode_topic("orders", change.properties[topic_property_key("orders")]).partitions == 5
    with pytest.raises(InvalidPartitionsError, match="can only grow"):
        plan_create_partitions(_topics(EXISTING), _props(EXISTING), name="orders", new_total=2, client_id="c")
    with pytest.raises(InvalidPartitionsError, match="already has 3"):
        plan_create_partitions(_topics(EXISTING), _props(EXISTING), name="orders", new_total=3, client_id="c")


def test_alter_sets_and_resets_configs():
    change = plan_alter_config(
        _topics(EXISTING),
        _props(EXISTING),
        name="orders",
        set_config={"cleanup.policy": "compact"},
        delete_config=["retention.ms"],
        client_id="c",
    )
    altered = decode_topic("orders", change.properties[topic_property_key("orders")])
    assert altered.overrides == {"cleanup.policy": ("compact",)}
    assert altered.topic_id == EXISTING.topic_id
    with pytest.raises(InvalidConfigError, match="unknown topic config key 'retention'"):
        plan_alter_config(
            _topics(EXISTING), {}, name="orders", set_config=None, delete_config=["retention"], client_id="c"
        )
    with pytest.raises(InvalidConfigError, match="nothing to alter"):
        plan_alter_config(_topics(EXISTING), {}, name="orders", set_config={}, delete_config=[], client_id="c")
