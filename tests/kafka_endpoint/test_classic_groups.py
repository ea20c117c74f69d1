"""Kafka's classic group protocol as lakelog serve answers it, request by request (in-process
Endpoint, no Spark): MEMBER_ID_REQUIRED, the leader's metadata and relayed assignments for any
protocol, one round per join, static members fenced and removed by instance id, offset commits
checked against the group, DescribeGroups reporting the group's own protocol."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from lakelog.kafka_endpoint.groups import (
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    SYNC_GROUP,
)
from tests.kafka_endpoint.test_out_of_range import call, partitions
from tests.stores import store_with_records


@pytest.fixture
def endpoint(tmp_path):
    from lakelog.kafka_endpoint.endpoint import Endpoint

    served = Endpoint(store_with_records(tmp_path / "store", [3, 0]), "127.0.0.1", 9092)
    yield served
    served.close()


def join(endpoint, member_id="", instance_id=None, protocols=(("stream", b"meta"),), ptype="consumer", version=7, **kw):
    return call(
        endpoint, JOIN_GROUP, version, group_id="g", **kw, session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=10), member_id=member_id, group_instance_id=instance_id,
        protocol_type=ptype, protocols=[{"name": n, "metadata": m} for n, m in protocols],
    )  # fmt: skip


def sync(endpoint, member_id, generation, assignments=(), instance_id=None):
    return call(
        endpoint, SYNC_GROUP, 5, group_id="g", generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocol_name="stream",
        assignments=[{"member_id": m, "assignment": a} for m, a in assignments],
    )  # fmt: skip


def heartbeat(endpoint, member_id, generation, instance_id=None):
    return call(
        endpoint, HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=member_id,
        group_instance_id=instance_id,
    ).error_code  # fmt: skip


def commit(endpoint, member_id, generation, instance_id=None):
    response = call(
        endpoint, OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id, topics=[{"name": "t", "partitions": partitions({0: 1})}],
    )  # fmt: skip
    return response.topics[0].partitions[0].error_code


def joined_member(endpoint, **kw):
    first = join(endpoint, **kw)
    if first.error_code == ErrorCode.member_id_required:
        first = join(endpoint, member_id=first.member_id, **kw)
    return first


def test_a_leader_gets_every_members_metadata_and_its_assignments_reach_each_member(endpoint):
    first = join(endpoint)
    assert first.error_code == ErrorCode.member_id_required and first.member_id  # KIP-394
    a = join(endpoint, member_id=first.member_id, protocols=[("stream", b"meta-a")])
    assert (a.error_code, a.leader, a.generation_id, a.protocol_name) == (ErrorCode.none, a.member_id, 1, "stream")
    assert [(m.member_id, m.metadata) for m in a.members] == [(a.member_id, b"meta-a")]
    assert sync(endpoint, a.member_id, 1, [(a.member_id, b"all yours")]).assignment == b"all yours"
    # A second member: its JoinGroup waits for the round, which a joins through its heartbeat's answer.
    answers = {}
    b_id = join(endpoint).member_id
    joining = threading.Thread(
        target=lambda: answers.update(b=join(endpoint, member_id=b_id, protocols=[("stream", b"meta-b")]))
    )
    joining.start()
    while heartbeat(endpoint, a.member_id, 1) != ErrorCode.rebalance_in_progress:
        pass
    a2 = join(endpoint, member_id=a.member_id, protocols=[("stream", b"meta-a")])
    joining.join(30)
    b = answers["b"]
    assert a2.generation_id == b.generation_id == 2 and a2.leader == b.leader == a.member_id
    assert {(m.member_id, m.metadata) for m in a2.members} == {(a.member_id, b"meta-a"), (b_id, b"meta-b")}
    assert b.members == ()  # followers get no metadata
    # The follower's SyncGroup waits for the leader's; a member the leader left out gets nothing.
    synced = {}
    waiting = threading.Thread(target=lambda: synced.update(b=sync(endpoint, b_id, 2)))
    waiting.start()
    assert sync(endpoint, a.member_id, 2, [(a.member_id, b"half")]).assignment == b"half"
    waiting.join(30)
    assert (synced["b"].error_code, synced["b"].assignment, synced["b"].protocol_type) == (
        ErrorCode.none,
        b"",
        "consumer",
    )
    assert heartbeat(endpoint, b_id, 1) == ErrorCode.illegal_generation
    assert heartbeat(endpoint, "nobody", 2) == ErrorCode.unknown_member_id
    # DescribeGroups and ListGroups report the group's own protocol and bytes.
    (group,) = call(endpoint, DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=False).groups
    assert (group.group_state, group.protocol_type, group.protocol_data) == ("Stable", "consumer", "stream")
    assert {(m.member_id, m.member_metadata, m.member_assignment) for m in group.members} == {
        (a.member_id, b"meta-a", b"half"),
        (b_id, b"meta-b", b""),
    }
    listed = call(endpoint, LIST_GROUPS, 4, states_filter=[]).groups
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed] == [("g", "consumer", "Stable")]


def test_a_member_that_shares_no_protocol_or_type_with_the_group_is_inconsistent(endpoint):
    joined_member(endpoint)
    assert join(endpoint, protocols=[("range", b"")]).error_code == ErrorCode.inconsistent_group_protocol
    assert join(endpoint, ptype="connect").error_code == ErrorCode.inconsistent_group_protocol


def test_offset_commits_are_checked_against_the_group(endpoint):
    assert commit(endpoint, "", -1) == ErrorCode.none  # a simple consumer, the group being empty
    a = joined_member(endpoint)
    assert commit(endpoint, "", -1) == ErrorCode.unknown_member_id  # not while it has a member
    assert commit(endpoint, a.member_id, a.generation_id + 1) == ErrorCode.illegal_generation
    assert commit(endpoint, "stranger", a.generation_id) == ErrorCode.unknown_member_id
    assert commit(endpoint, a.member_id, a.generation_id) == ErrorCode.none


def test_a_static_member_replaced_by_a_new_instance_is_fenced_and_leaves_by_its_instance_id(endpoint):
    old = joined_member(endpoint, instance_id="i")
    assert old.error_code == ErrorCode.none  # a static member needs no MEMBER_ID_REQUIRED round
    assert sync(endpoint, old.member_id, old.generation_id, [(old.member_id, b"mine")], "i").assignment == b"mine"
    new = join(endpoint, instance_id="i")
    assert new.error_code == ErrorCode.none and new.generation_id == old.generation_id  # no rebalance
    assert sync(endpoint, new.member_id, new.generation_id, (), "i").assignment == b"mine"
    assert heartbeat(endpoint, old.member_id, old.generation_id, "i") == ErrorCode.fenced_instance_id
    assert commit(endpoint, old.member_id, old.generation_id, "i") == ErrorCode.fenced_instance_id
    left = call(endpoint, LEAVE_GROUP, 4, group_id="g", members=[{"member_id": "", "group_instance_id": "i"}])
    assert [(m.member_id, m.error_code) for m in left.members] == [(new.member_id, ErrorCode.none)]
    assert heartbeat(endpoint, new.member_id, new.generation_id, "i") == ErrorCode.unknown_member_id


@pytest.mark.parametrize("version", [8, 9])
def test_join_group_v8_carries_a_reason_and_leave_group_v5_one_per_member(endpoint, version):
    a = joined_member(endpoint, version=version, reason="rebalance failed due to MemberIdRequiredException")
    assert (a.error_code, a.leader, a.generation_id) == (ErrorCode.none, a.member_id, 1)
    assert not getattr(a, "skip_assignment", False)  # a rebalance the leader completed: it runs its assignor
    left = call(endpoint, LEAVE_GROUP, 5, group_id="g", members=[{"member_id": a.member_id, "reason": "closing"}])
    assert [(m.member_id, m.error_code) for m in left.members] == [(a.member_id, ErrorCode.none)]


def test_a_static_leader_rejoining_a_stable_group_skips_its_assignor_from_join_group_v9(endpoint):
    """KIP-814 (GMM.updateStaticMemberThenRebalanceOrCompleteJoin): a static leader that restarts
    into a Stable group is told it leads, with every member's metadata and skip_assignment, and no
    rebalance; before v9 it is told the old leader leads (it runs no assignor and syncs as a follower)."""
    old = joined_member(endpoint, instance_id="a", version=9)
    assert sync(endpoint, old.member_id, old.generation_id, [(old.member_id, b"mine")], "a").assignment == b"mine"
    new = join(endpoint, instance_id="a", version=9, protocols=[("stream", b"meta-2")])
    assert (new.error_code, new.generation_id, new.leader) == (ErrorCode.none, old.generation_id, new.member_id)
    assert new.skip_assignment and [(m.member_id, m.group_instance_id, m.metadata) for m in new.members] == [
        (new.member_id, "a", b"meta-2")
    ]
    assert sync(endpoint, new.member_id, new.generation_id, (), "a").assignment == b"mine"
    older = join(endpoint, instance_id="a", version=8)
    assert (older.error_code, older.generation_id) == (ErrorCode.none, old.generation_id)
    assert (older.leader, older.members) == (new.member_id, ())  # v8 has no skip_assignment
    assert sync(endpoint, older.member_id, older.generation_id, (), "a").assignment == b"mine"
