"""The group state machine -- Kafka's classic group protocol as pure functions (engine.groups.classic) --
checked against what Kafka's coordinator does (GroupMetadataManager / ClassicGroup), then as a
hypothesis state machine; and the records of ``__consumer_offsets``. No Spark, no I/O."""

from __future__ import annotations

from dataclasses import replace

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lakelog.engine.errors import CommitFailedError, FencedInstanceIdError, UnknownMemberIdError
from lakelog.engine.groups.classic import (
    COMPLETING_REBALANCE,
    EMPTY,
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    NONE,
    PREPARING_REBALANCE,
    REBALANCE_IN_PROGRESS,
    STABLE,
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    ClassicMember,
    JoinRequest,
    SyncRequest,
    advance,
    candidate_protocols,
    check_offset_commit,
    heartbeat,
    join,
    join_outcome,
    leave,
    select_protocol,
    sync_outcome,
)
from lakelog.engine.groups.classic import sync as sync_group
from lakelog.engine.groups.offsets_topic import (
    GroupRecords,
    group_key,
    java_string_hash,
    offset_key,
    partition_for_group,
)
from lakelog.engine.topics import TopicPartition as TP


def sync(group: ClassicGroup, *request) -> tuple[ClassicGroup, str]:
    return sync_group(group, SyncRequest(*request))


def request(member_id: str = "", protocols=(("range", b"m"),), instance_id=None, ptype="consumer", **kw) -> JoinRequest:
    return JoinRequest(
        member_id=member_id,
        client_id="c",
        protocol_type=ptype,
        protocols=tuple(protocols),
        session_timeout_ms=kw.get("session", 10_000),
        rebalance_timeout_ms=kw.get("rebalance", 30_000),
        instance_id=instance_id,
        requires_known_member_id=kw.get("v4", True),
    )


def joined(group: ClassicGroup, name: str, now: int = 0, **kw) -> tuple[ClassicGroup, str]:
    """``name`` joins as a new dynamic member (MEMBER_ID_REQUIRED, then again with the id)."""
    group, result = join(group, request(**kw), name, now, initial_delay_ms=0)
    assert result.error == MEMBER_ID_REQUIRED and result.member_id == name
    group, result = join(group, request(name, **kw), "unused", now, initial_delay_ms=0)
    assert result.error == NONE and result.wait
    return group, name


def stable(*names: str) -> ClassicGroup:
    """A Stable group of ``names`` (the first leads) whose leader assigned each its name."""
    group = ClassicGroup("g")
    for name in names:
        group, _ = joined(group, name)
        for other in group.members:
            if other != name and group.state == PREPARING_REBALANCE:
                group, _ = join(group, request(other), "unused", 0, initial_delay_ms=0)
        if group.state == COMPLETING_REBALANCE:
            group, error = sync(
                group, group.leader, None, group.generation, "consumer", None, {n: n.encode() for n in group.members}
            )
            assert error == NONE
    assert group.state == STABLE and set(group.members) == set(names)
    return group


def member(name: str, *protocols: str) -> ClassicMember:
    return ClassicMember(name, "c", 10_000, 30_000, tuple((p, b"") for p in protocols))


def test_the_protocol_is_kafkas_vote_among_the_protocols_every_member_supports():
    # Candidates: what everyone supports; each votes its first candidate; most votes wins.
    members = [member("a", "x", "y"), member("b", "y", "x"), member("c", "x", "y", "z")]
    assert candidate_protocols(members) == ["x", "y"]
    assert select_protocol(members) == "x"
    assert select_protocol([member("a", "x", "y"), member("b", "y"), member("c", "x", "y")]) == "y"
    assert select_protocol([member("a", "x"), member("b", "y")]) is None


def test_a_join_that_cannot_share_the_groups_protocol_is_inconsistent():
    group = stable("a")
    for bad in (request(ptype="connect"), request(protocols=[("other", b"")]), request(protocols=[])):
        assert join(group, bad, "n", 0)[1].error == INCONSISTENT_GROUP_PROTOCOL
    assert join(ClassicGroup("g"), request(ptype=""), "n", 0)[1].error == INCONSISTENT_GROUP_PROTOCOL
    # Any protocol type and protocol for an empty group: the coordinator never reads metadata.
    assert join(ClassicGroup("g"), request(ptype="connect", protocols=[("sessioned", b"\x00")]), "n", 0)[1].error == (
        MEMBER_ID_REQUIRED
    )


def test_a_new_member_gets_an_id_first_v4_and_joins_at_once_before_v4():
    group, result = join(ClassicGroup("g"), request(), "c-1", 0)
    assert result.error == MEMBER_ID_REQUIRED and "c-1" in group.pending and not group.members
    group, result = join(ClassicGroup("g"), request(v4=False), "c-1", 0, initial_delay_ms=0)
    assert result.error == NONE and group.state == COMPLETING_REBALANCE and group.leader == "c-1"
    # An unknown member id is refused; a pending id lapses after its session timeout.
    group, result = join(ClassicGroup("g"), request(), "c-1", 0)
    assert join(group, request("nobody"), "x", 0)[1].error == UNKNOWN_MEMBER_ID
    assert advance(group, 10_001).pending == {}


def test_one_round_per_join_the_leader_gets_every_members_metadata_and_relays_assignments():
    group = stable("a")
    assert group.generation == 1
    group, _ = joined(group, "b", protocols=[("range", b"meta-b")])
    assert group.state == PREPARING_REBALANCE and heartbeat(group, "a", None, 1) == REBALANCE_IN_PROGRESS
    assert join_outcome(group, "b", 1) is None  # b waits for a
    group, result = join(group, request("a", protocols=[("range", b"meta-a")]), "x", 5)
    assert result.wait and group.state == COMPLETING_REBALANCE and group.generation == 2
    leader, follower = join_outcome(group, "a", 1), join_outcome(group, "b", 1)
    assert leader.leader == "a" and follower.leader == "a" and leader.generation == 2 == follower.generation
    assert set(leader.members) == {("a", None, b"meta-a"), ("b", None, b"meta-b")} and follower.members == ()
    # The follower's SyncGroup waits for the leader's; members the leader left out get nothing.
    group, error = sync(group, "b", None, 2, "consumer", "range", {})
    assert error == NONE and sync_outcome(group, "b", 2) is None
    group, error = sync(group, "a", None, 2, "consumer", "range", {"a": b"for-a"})
    assert error == NONE and group.state == STABLE
    assert sync_outcome(group, "a", 2) == (NONE, b"for-a") and sync_outcome(group, "b", 2) == (NONE, b"")
    assert sync(group, "a", None, 1, None, None, {})[1] == ILLEGAL_GENERATION
    assert sync(group, "a", None, 2, "connect", None, {})[1] == INCONSISTENT_GROUP_PROTOCOL
    # A follower rejoining unchanged in Stable gets the generation back, no rebalance.
    again, result = join(group, request("b", protocols=[("range", b"meta-b")]), "x", 6)
    assert again == group and not result.wait


def test_members_that_do_not_rejoin_in_time_are_dropped_unless_static():
    group = stable("a", "b")
    group, _ = join(group, request(instance_id="s"), "s-1", 0, initial_delay_ms=0)
    group = advance(group, 31_000)  # nobody rejoined: the dynamic ones go, the static one stays
    assert group.state == COMPLETING_REBALANCE and set(group.members) == {"s-1"} and group.leader == "s-1"
    group = stable("a", "b")
    group, _ = joined(group, "c", now=100)
    group, _ = join(group, request("b"), "x", 200)
    group = advance(group, 30_100)  # a did not rejoin: dropped, the leader is elected among the rejoined
    assert set(group.members) == {"b", "c"} and group.leader == "b" and group.generation == 3


def test_a_leader_that_never_syncs_is_removed_at_the_rebalance_timeout():
    group = stable("a")
    group, _ = joined(group, "b")
    group, _ = join(group, request("a"), "x", 0)
    assert group.state == COMPLETING_REBALANCE
    group, _ = sync(group, "b", None, group.generation, None, None, {})
    group = advance(group, 30_001)
    assert set(group.members) == {"b"} and group.state == PREPARING_REBALANCE
    assert sync_outcome(group, "b", group.generation) == (REBALANCE_IN_PROGRESS, b"")
    group, _ = join(group, request("b"), "x", 30_002)
    assert group.state == COMPLETING_REBALANCE and group.leader == "b"


def test_static_membership_replaces_the_old_member_without_a_rebalance_and_fences_it():
    group, result = join(ClassicGroup("g"), request(instance_id="i"), "i-1", 0, initial_delay_ms=0)
    assert result.error == NONE  # a static member needs no MEMBER_ID_REQUIRED round
    group, _ = sync(group, "i-1", "i", 1, None, None, {"i-1": b"mine"})
    group, result = join(group, request(instance_id="i"), "i-2", 1)
    assert result.error == NONE and not result.wait and group.generation == 1 and group.state == STABLE
    assert set(group.members) == {"i-2"} and sync_outcome(group, "i-2", 1) == (NONE, b"mine")
    assert heartbeat(group, "i-1", "i", 1) == FENCED_INSTANCE_ID
    assert sync(group, "i-1", "i", 1, None, None, {})[1] == FENCED_INSTANCE_ID
    with pytest.raises(FencedInstanceIdError):
        check_offset_commit(group, "i-1", "i", 1)
    group, errors = leave(group, [("", "i")], 2)  # LeaveGroup v3+ by instance id alone
    assert errors == [("i-2", NONE)] and group.state == EMPTY and group.generation == 2


def test_leaving_rebalances_the_rest():
    group = stable("a", "b")
    group, errors = leave(group, [("a", None), ("zz", None)], 0)
    assert errors == [("a", NONE), ("zz", UNKNOWN_MEMBER_ID)]
    assert group.state == PREPARING_REBALANCE and group.leader == "b"
    group, _ = join(group, request("b"), "x", 0)
    assert group.state == COMPLETING_REBALANCE and group.generation == 3


def test_offset_commits_are_checked_as_kafkas_classic_group_checks_them():
    group = stable("a", "b")
    check_offset_commit(group, "a", None, group.generation)
    with pytest.raises(UnknownMemberIdError):
        check_offset_commit(group, "zz", None, group.generation)
    with pytest.raises(CommitFailedError):
        check_offset_commit(group, "a", None, group.generation - 1)
    with pytest.raises(UnknownMemberIdError):  # a simple consumer while the group has members
        check_offset_commit(group, None, None, -1)
    check_offset_commit(group, None, None, -1, transactional=True)
    check_offset_commit(group, None, None, -1, live=[])  # nobody alive: the group is empty
    check_offset_commit(None, None, None, -1)
    check_offset_commit(ClassicGroup("g"), None, None, -1)


def test_the_group_survives_its_json_form():
    group = stable("a", "b")
    group, _ = join(group, request(instance_id="s", protocols=[("range", b"\x00\xff")]), "s-1", 7)
    assert ClassicGroup.from_json(group.to_json()) == group


def test_a_new_group_waits_the_initial_delay_for_more_members():
    group, _ = join(ClassicGroup("g"), request(instance_id="a"), "a", 0, initial_delay_ms=3000)
    group, _ = join(group, request(instance_id="b"), "b", 2000, initial_delay_ms=3000)
    assert group.state == PREPARING_REBALANCE and advance(group, 4000) == group  # b pushed the end to 5000
    group = advance(group, 5000)
    assert group.state == COMPLETING_REBALANCE and set(group.members) == {"a", "b"} and group.generation == 1


def test_group_partition_is_kafkas():
    # Java: "hello".hashCode() == 99162322; Kafka: Utils.abs(hash) % 50.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # the famous MIN_VALUE string
    assert partition_for_group("hello") == 99162322 % 50
    assert partition_for_group("polygenelubricants") == 0


def test_latest_record_per_key_wins_and_tombstones_delete():
    g = GroupRecords("g")
    g.apply(offset_key("g", TP("a", 0)), b'{"offset": 5}')
    g.apply(offset_key("other", TP("a", 0)), b'{"offset": 9}')
    g.apply(offset_key("g", TP("a", 0)), b'{"offset": 7}')
    g.apply(offset_key("g", TP("a", 1)), b'{"offset": 1}')
    g.apply(offset_key("g", TP("a", 1)), None)
    g.apply(group_key("g"), ClassicGroup("g", generation=3).to_json().encode())
    assert {tp: o.offset for tp, o in g.offsets.items()} == {TP("a", 0): 7}
    assert g.state.generation == 3


# -- the state machine -------------------------------------------------------------------------

CLIENTS = ["d1", "d2", "d3", "s1", "s2"]  # s*: static members (group.instance.id = the name)
PROTOCOLS = [(("range", b"r"),), (("cooperative-sticky", b"c"), ("range", b"r")), (("stream", b"s"),)]


class ClassicGroupMachine(RuleBasedStateMachine):
    """Clients join, rejoin, sync, heartbeat, leave and time passes, in any order; the group
    always holds Kafka's invariants, and members get exactly what the leader assigned them."""

    def __init__(self) -> None:
        super().__init__()
        self.group = ClassicGroup("g")
        self.now = 0
        self.ids: dict[str, str] = {}  # client -> its member id as it believes it
        self.counter = 0
        self.assigned: dict[int, dict[str, bytes]] = {}  # generation -> what its leader assigned

    def _request(self, client: str, protocols) -> JoinRequest:
        return request(
            self.ids.get(client, ""), protocols, instance_id=client if client.startswith("s") else None, session=5_000
        )

    @rule(client=st.sampled_from(CLIENTS), protocols=st.sampled_from(PROTOCOLS))
    def join(self, client, protocols):
        self.counter += 1
        before = self.group
        self.group, result = join(self.group, self._request(client, protocols), f"{client}-{self.counter}", self.now)
        if result.error in (NONE, MEMBER_ID_REQUIRED):
            self.ids[client] = result.member_id
        elif result.error == UNKNOWN_MEMBER_ID:
            self.ids.pop(client, None)
        elif result.error == INCONSISTENT_GROUP_PROTOCOL:
            assert self.group == before and not before.empty
        if result.error == NONE and not result.wait:
            assert self.group.state in (STABLE, COMPLETING_REBALANCE)

    @rule(client=st.sampled_from(CLIENTS), data=st.data())
    def sync(self, client, data):
        mid = self.ids.get(client)
        if mid is None:
            return
        group = self.group
        assignments = {}
        if mid == group.leader and group.state == COMPLETING_REBALANCE:
            chosen = data.draw(st.lists(st.sampled_from(sorted(group.members)), unique=True))
            assignments = {m: f"{m}@{group.generation}".encode() for m in chosen}
        self.group, error = sync(group, mid, self._instance(client), group.generation, None, None, assignments)
        if error == NONE and group.state == COMPLETING_REBALANCE and mid == group.leader:
            self.assigned[group.generation] = assignments

    def _instance(self, client: str) -> str | None:
        return client if client.startswith("s") else None

    @rule(client=st.sampled_from(CLIENTS))
    def heartbeat(self, client):
        mid = self.ids.get(client)
        if mid is not None:
            assert heartbeat(self.group, mid, self._instance(client), self.group.generation) in (
                NONE,
                REBALANCE_IN_PROGRESS,
                UNKNOWN_MEMBER_ID,
                FENCED_INSTANCE_ID,
            )

    @rule(client=st.sampled_from(CLIENTS))
    def leave(self, client):
        mid = self.ids.pop(client, "")
        self.group, errors = leave(self.group, [(mid, self._instance(client))], self.now)
        assert len(errors) == 1

    @rule(ms=st.sampled_from([100, 3_000, 6_000, 31_000]), expire=st.lists(st.sampled_from(CLIENTS), max_size=2))
    def time_passes(self, ms, expire):
        self.now += ms
        gone = [self.ids[c] for c in expire if c in self.ids]
        self.group = advance(self.group, self.now, gone)

    @precondition(lambda self: self.group.state == STABLE)
    @invariant()
    def members_get_what_the_leader_assigned(self):
        given = self.assigned.get(self.group.generation)
        if given is None:  # Stable without a sync of this generation: a static member's replacement
            return
        for mid, m in self.group.members.items():
            expected = given.get(mid, b"")
            # A static member's new id carries its old id's assignment (KIP-345).
            assert m.assignment == expected or (
                m.instance_id is not None and m.assignment.startswith(m.instance_id.encode())
            )
            assert sync_outcome(self.group, mid, self.group.generation) == (NONE, m.assignment)

    @invariant()
    def kafkas_invariants_hold(self):
        g = self.group
        assert (g.state == EMPTY) == g.empty
        if g.members:
            assert g.leader in g.members
        assert g.pending_sync <= set(g.members)
        instances = [m.instance_id for m in g.members.values() if m.instance_id is not None]
        assert len(instances) == len(set(instances))
        if g.state in (COMPLETING_REBALANCE, STABLE):
            assert g.protocol in candidate_protocols(g.members.values())
            assert not any(m.awaiting_join for m in g.members.values())
        assert ClassicGroup.from_json(g.to_json()) == g
        assert replace(g) == g


TestClassicGroupMachine = ClassicGroupMachine.TestCase
TestClassicGroupMachine.settings = settings(max_examples=150, stateful_step_count=40)
