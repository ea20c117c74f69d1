"""Kafka's admin APIs through the agent (confluent-kafka's AdminClient): topics, partitions,
configs and consumer groups, seen the same way by lakelog's own admin."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from lakelog.engine.topics import TopicPartition
from lakelog.store import Store


def _admin(agent) -> AdminClient:
    return AdminClient({"bootstrap.servers": agent.bootstrap})


def test_topics_partitions_and_configs(agent):
    admin = _admin(agent)
    admin.create_topics([NewTopic("a", num_partitions=2, config={"retention.ms": "60000"})])["a"].result(30)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("a", num_partitions=2)])["a"].result(30)
    with pytest.raises(KafkaException, match=r"TOPIC_EXCEPTION.*legal characters"):  # INVALID_TOPIC_EXCEPTION (17)
        admin.create_topics([NewTopic("bad name!", num_partitions=1)])["bad name!"].result(30)
    admin.create_partitions([NewPartitions("a", 4)])["a"].result(30)
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        admin.create_partitions([NewPartitions("a", 2)])["a"].result(30)  # never shrink
    store = Store.open(agent.store, create=False)
    assert store.describe_topic("a").partitions == 4

    resource = ConfigResource(ConfigResource.Type.TOPIC, "a")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "60000" and not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default
    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        "a",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    topic = Store.open(agent.store, create=False).describe_topic("a")
    assert topic.config_value("cleanup.policy") == ("compact",) and "retention.ms" not in topic.overrides
    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        "a",
        incremental_configs=[ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.incremental_alter_configs([bad])[bad].result(30)

    admin.delete_topics(["a"])["a"].result(30)
    assert "a" not in Store.open(agent.store, create=False).list_topics()
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        admin.delete_topics(["a"])["a"].result(30)


def test_groups_are_listed_described_and_deleted(agent):
    consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": "g1", "enable.auto.commit": False})
    consumer.assign([KafkaTP("t", 0, 0)])
    consumer.commit(offsets=[KafkaTP("t", 0, 0)], asynchronous=False)
    consumer.close()
    store = Store.open(agent.store, create=False)
    mine = store.consumer("g2", enable_auto_commit=False)  # a lakelog group with a live member
    mine.subscribe(["t"])
    mine.poll(timeout_ms=500)
    admin = _admin(agent)
    try:
        listed = {g.group_id: g.state.name for g in admin.list_consumer_groups().result(30).valid}
        assert listed["g1"] == "EMPTY" and listed["g2"] == "STABLE"
        described = admin.describe_consumer_groups(["g1", "g2"])
        g2 = described["g2"].result(30)
        assert g2.state.name == "STABLE" and len(g2.members) == 1
        assert sorted(tp.partition for tp in g2.members[0].assignment.topic_partitions) == [0, 1]
        assert described["g1"].result(30).members == []
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["g2"])["g2"].result(30)
        admin.delete_consumer_groups(["g1"])["g1"].result(30)
        assert "g1" not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    finally:
        mine.close(autocommit=False)
    from lakelog.engine.admin.groups import list_groups

    assert [g.group_id for g in list_groups(Store.open(agent.store, create=False).context)] == ["g2"]  # lakelog agrees


def test_a_groups_offsets_are_deleted_per_partition_as_kafkas_offset_delete(agent):
    """kafka-python's delete_group_offsets (OffsetDelete, KIP-496): unsubscribed partitions are
    deleted, a topic live members subscribe to is GROUP_SUBSCRIBED_TO_TOPIC, an unknown group
    is GROUP_ID_NOT_FOUND."""
    from kafka import TopicPartition as PyTP
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError, UnknownTopicOrPartitionError

    store = Store.open(agent.store, create=False)
    store.create_topic("u", partitions=1)
    committer = store.consumer("g", enable_auto_commit=False)
    committer.assign([("t", 0), ("t", 1), ("u", 0)])
    committer.commit({("t", 0): 3, ("t", 1): 4, ("u", 0): 5})
    committer.close()
    admin = KafkaAdminClient(bootstrap_servers=agent.bootstrap)
    try:
        answer = admin.delete_group_offsets("g", [PyTP("t", 0), PyTP("t", 9)])
        assert answer == {PyTP("t", 0): NoError, PyTP("t", 9): UnknownTopicOrPartitionError}
        left = Store.open(agent.store, create=False).consumer("g").committed([("t", 0), ("t", 1)])
        assert left[TopicPartition("t", 0)] is None and left[TopicPartition("t", 1)].offset == 4
        member = store.consumer("g", enable_auto_commit=False)  # live, subscribed to t only
        member.subscribe(["t"])
        member.poll(timeout_ms=500)
        try:
            answer = admin.delete_group_offsets("g", [PyTP("t", 1), PyTP("u", 0)])
            assert answer == {PyTP("t", 1): GroupSubscribedToTopicError, PyTP("u", 0): NoError}
        finally:
            member.close(autocommit=False)
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("nobody", [PyTP("t", 0)])
    finally:
        admin.close()
