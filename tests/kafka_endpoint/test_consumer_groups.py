"""Kafka's consumer group protocol (KIP-848) as lakelog serve answers it, request by request
(in-process Endpoints, no Spark): two agents on one store share a consumer-type group and hand
partitions over only once revoked; offsets are checked against member epochs; classic and
consumer-type groups do not mix; ConsumerGroupDescribe, DescribeGroups, ListGroups and
``lakelog groups describe`` show the group."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from lakelog.engine.admin.groups import describe_group, list_groups
from lakelog.engine.groups.consumer_protocol import decode_assignment, decode_subscription
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.groups import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DESCRIBE_GROUPS,
    JOIN_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
)
from lakelog.store import Store
from tests.kafka_endpoint.test_out_of_range import call, partitions
from tests.stores import store_with_records


@pytest.fixture
def agents(tmp_path):
    from lakelog.kafka_endpoint.endpoint import Endpoint

    store_with_records(tmp_path / "store", [3, 0, 2, 1]).close()
    a = Endpoint(Store.open(tmp_path / "store"), "127.0.0.1", 9092)
    b = Endpoint(Store.open(tmp_path / "store"), "127.0.0.1", 9093)
    yield a, b
    a.close()
    b.close()


def topic_id(agent) -> uuid.UUID:
    return uuid.UUID(agent.store.context.latest_topics()["t"].topic_id)


def heartbeat(agent, member_id, epoch, owned=None, group="g", join=False, instance_id=None):
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": instance_id}
    if join:
        body.update(rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=["t"], topic_partitions=[])
    elif owned is not None:
        body["topic_partitions"] = [{"topic_id": topic_id(agent), "partitions": sorted(owned)}]
    else:
        body["topic_partitions"] = None
    return call(agent, CONSUMER_GROUP_HEARTBEAT, 1, **body)


def assigned(response) -> set[int] | None:
    if response.assignment is None:
        return None
    return {p for t in response.assignment.topic_partitions for p in t.partitions}


def test_two_agents_share_a_consumer_group_and_hand_a_partition_over_only_once_revoked(agents):
    a, b = agents
    first = heartbeat(a, "m1", 0, join=True)
    assert (first.error_code, first.member_epoch, assigned(first)) == (ErrorCode.none, 1, {0, 1, 2, 3})
    assert first.heartbeat_interval == timedelta(seconds=5)
    assert first.assignment.topic_partitions[0].topic_id == topic_id(a)  # the id Metadata answers
    second = heartbeat(b, "m2", 0, join=True)
    assert (second.member_epoch, assigned(second)) == (2, set())
    # m1 (through the other agent) learns what to revoke, and keeps epoch 1 until it did.
    revoke = heartbeat(b, "m1", 1, owned={0, 1, 2, 3})
    assert revoke.member_epoch == 1 and len(assigned(revoke)) == 2
    waiting = heartbeat(a, "m2", 2)
    assert waiting.assignment is None
    done = heartbeat(a, "m1", 1, owned=assigned(revoke))
    assert done.member_epoch == 2
    handed = heartbeat(b, "m2", 2)
    assert assigned(handed) == {0, 1, 2, 3} - assigned(revoke)
    described = call(b, CONSUMER_GROUP_DESCRIBE, 0, group_ids=["g"], include_authorized_operations=False).groups[0]
    assert (described.error_code, described.group_state, described.group_epoch) == (ErrorCode.none, "Stable", 2)
    assert described.assignor_name == "uniform"
    members = {m.member_id: m for m in described.members}
    assert {p for p in members["m2"].assignment.topic_partitions[0].partitions} == assigned(handed)
    assert members["m2"].assignment.topic_partitions[0].topic_name == "t"
    # A member epoch the group does not know: fenced; an unknown member: UNKNOWN_MEMBER_ID.
    assert heartbeat(a, "m1", 7).error_code == ErrorCode.fenced_member_epoch
    assert heartbeat(a, "m9", 3).error_code == ErrorCode.unknown_member_id
    # Leaving: its partitions go to the other member at its next heartbeat.
    left = heartbeat(a, "m2", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    assert assigned(heartbeat(b, "m1", 2, owned=assigned(revoke))) == {0, 1, 2, 3}


def commit(agent, member_id, epoch, version=9):
    response = call(
        agent, OFFSET_COMMIT, version, group_id="g", generation_id_or_member_epoch=epoch, member_id=member_id,
        topics=[{"name": "t", "partitions": partitions({0: 1})}],
    )  # fmt: skip
    return response.topics[0].partitions[0].error_code


def fetch(agent, member_id, epoch):
    return call(
        agent, OFFSET_FETCH, 9, require_stable=False,
        groups=[{"group_id": "g", "member_id": member_id, "member_epoch": epoch,
                 "topics": [{"name": "t", "partition_indexes": [0]}]}],
    ).groups[0]  # fmt: skip


def test_offsets_of_consumer_group_members_are_checked_against_their_epoch(agents):
    a, b = agents
    heartbeat(a, "m1", 0, join=True)
    assert commit(a, "m1", 1) == ErrorCode.none
    assert commit(b, "m1", 0) == ErrorCode.stale_member_epoch
    assert commit(b, "m1", 1, version=8) == ErrorCode.unsupported_version
    assert commit(b, "", -1) == ErrorCode.unknown_member_id  # the group has members
    found = fetch(b, "m1", 1)
    assert found.error_code == ErrorCode.none
    assert found.topics[0].partitions[0].committed_offset == 1
    assert fetch(b, "m1", 3).error_code == ErrorCode.stale_member_epoch
    assert fetch(b, None, -1).error_code == ErrorCode.none  # an admin tool
    heartbeat(a, "m1", -1)
    assert commit(b, "", -1) == ErrorCode.none  # empty: anyone may


def join_classic(agent, group, instance_id=None):
    return call(
        agent, JOIN_GROUP, 7, group_id=group, session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=10), member_id="", group_instance_id=instance_id,
        protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}],
    )  # fmt: skip


def test_classic_and_consumer_groups_do_not_mix(agents):
    """A group id is classic or consumer type (GMM.getOrMaybeCreateConsumerGroup, classicGroupJoin)."""
    a, b = agents
    assert join_classic(a, "classic", instance_id="static-1").error_code == ErrorCode.none
    assert heartbeat(b, "m1", 0, group="classic", join=True).error_code == ErrorCode.group_id_not_found
    assert heartbeat(b, "m1", 0, group="new", join=True).error_code == ErrorCode.none
    assert join_classic(a, "new").error_code == ErrorCode.inconsistent_group_protocol
    assert heartbeat(b, "m1", 3, group="nothing").error_code == ErrorCode.group_id_not_found
    assert heartbeat(b, "m1", 0, group="", join=True).error_code == ErrorCode.invalid_request
    described = call(b, CONSUMER_GROUP_DESCRIBE, 0, group_ids=["classic"], include_authorized_operations=False)
    assert described.groups[0].error_code == ErrorCode.group_id_not_found
    # Once the consumer group is empty, a classic member may take the group id over.
    assert heartbeat(b, "m1", -1, group="new").error_code == ErrorCode.none
    assert join_classic(a, "new").error_code == ErrorCode.member_id_required


def test_list_and_describe_groups_show_a_consumer_type_group(agents):
    a, b = agents
    heartbeat(a, "m1", 0, join=True)
    listed = call(b, LIST_GROUPS, 5, states_filter=[], types_filter=[]).groups
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == [
        ("g", "consumer", "consumer", "Stable")
    ]
    assert call(b, LIST_GROUPS, 5, states_filter=[], types_filter=["classic"]).groups == ()
    group = call(b, DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=False).groups[0]
    assert (group.group_state, group.protocol_type, group.protocol_data) == ("Stable", "consumer", "uniform")
    (member,) = group.members
    assert decode_assignment(member.member_assignment) == {TopicPartition("t", p) for p in range(4)}
    assert list(decode_subscription(member.member_metadata).topics) == ["t"]
    described = describe_group(b.store.context, "g")
    assert (described.group_type, described.generation, described.assignment_epoch) == ("consumer", 1, 1)
    assert described.members[0].assignment == tuple(TopicPartition("t", p) for p in range(4))
    assert {p.owner for p in described.partitions} == {"m1"}
    assert [(g.group_id, g.group_type, g.members) for g in list_groups(b.store.context)] == [("g", "consumer", 1)]


def test_lakelog_groups_describe_shows_the_epochs_of_a_consumer_type_group(agents, capsys):
    from lakelog.cli import main

    a, _ = agents
    heartbeat(a, "m1", 0, join=True)
    capsys.readouterr()
    assert main(["--store", a.store.uri, "groups", "describe", "--group", "g"]) == 0
    captured = capsys.readouterr()
    assert "(consumer protocol, KIP-848) is Stable (group epoch 1, assignment epoch 1, assignor uniform)" in (
        captured.err
    )
    rows = [line.split() for line in captured.out.splitlines()[1:]]
    assert sorted((r[1], r[2], r[6]) for r in rows) == [("t", str(p), "m1") for p in range(4)]
