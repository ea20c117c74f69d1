"""Kafka's consumer group protocol (KIP-848) as pure functions (engine.groups.consumer_group):
the rules of Kafka's GroupMetadataManager / CurrentAssignmentBuilder checked case by case, then
as a hypothesis state machine of members whose clients own what they were last answered. No
Spark, no I/O."""

from __future__ import annotations

from dataclasses import replace

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from lakelog.engine.errors import StaleMemberEpochError, UnknownMemberIdError, UnsupportedVersionError
from lakelog.engine.groups.consumer_group import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ASSIGNING,
    GROUP_EMPTY,
    GROUP_RECONCILING,
    GROUP_STABLE,
    INVALID_REQUEST,
    NONE,
    STABLE,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    UNSUPPORTED_ASSIGNOR,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatRequest,
    TopicInfo,
    check_offset_commit,
    check_offset_fetch,
    count,
    expire,
    heartbeat,
    range_assignment,
    uniform_assignment,
    validate,
)
from lakelog.engine.groups.offsets_topic import GroupRecords, consumer_group_key, group_key

T1 = "11111111-1111-1111-1111-111111111111"
T2 = "22222222-2222-2222-2222-222222222222"
TOPICS = {"a": TopicInfo(T1, 6), "b": TopicInfo(T2, 3)}


def join(member_id: str, topics=("a",), instance_id=None, assignor=None) -> HeartbeatRequest:
    return HeartbeatRequest(
        member_id,
        0,
        instance_id=instance_id,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=tuple(topics),
        server_assignor=assignor,
        owned={},
    )


def beat(group: ConsumerGroup, member_id: str, owned=None, epoch=None, **kw) -> HeartbeatRequest:
    member = group.members[member_id]
    return HeartbeatRequest(
        member_id,
        member.member_epoch if epoch is None else epoch,
        owned=member.assigned if owned is None else owned,
        **kw,
    )


def run(group: ConsumerGroup, request: HeartbeatRequest, now_ms: int = 0, topics=TOPICS):
    assert validate(request, ("uniform", "range")) is None
    return heartbeat(group, request, topics, now_ms)


# -- Kafka's rules, one by one --------------------------------------------------------------------


def test_a_first_member_gets_every_partition_at_the_group_epoch() -> None:
    group, answer = run(ConsumerGroup("g"), join("m1"))
    assert (answer.error, answer.member_epoch) == (NONE, 1)
    assert answer.assignment == {T1: frozenset(range(6))}
    assert group.group_epoch == group.assignment_epoch == 1
    assert group.state == GROUP_STABLE


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    """CurrentAssignmentBuilder: the new member waits (unreleased) until the old owner's
    heartbeat no longer lists the partitions it must give up."""
    group, _ = run(ConsumerGroup("g"), join("m1"))
    group, second = run(group, join("m2"))
    assert second.member_epoch == 2 and second.assignment == {}
    assert group.members["m2"].state == UNRELEASED_PARTITIONS
    assert group.state == GROUP_RECONCILING
    # m1 learns it must revoke; it stays at epoch 1 until it did.
    group, first = run(group, beat(group, "m1"))
    m1 = group.members["m1"]
    assert (m1.state, m1.member_epoch) == (UNREVOKED_PARTITIONS, 1)
    assert count(first.assignment) == 3 and count(m1.pending_revocation) == 3
    # m2 heartbeats while m1 still holds them: still nothing.
    group, again = run(group, beat(group, "m2"))
    assert again.assignment is None and not group.members["m2"].assigned
    # m1 still reports the revoked partitions: no progress.
    group, _ = run(group, beat(group, "m1", owned={T1: frozenset(range(6))}))
    assert group.members["m1"].state == UNREVOKED_PARTITIONS
    # m1 revoked them: epoch 2; then m2 gets them.
    group, first = run(group, beat(group, "m1", owned=first.assignment))
    assert (group.members["m1"].member_epoch, group.members["m1"].state) == (2, STABLE)
    group, second = run(group, beat(group, "m2"))
    assert count(second.assignment) == 3
    assert group.state == GROUP_STABLE


def test_a_heartbeat_without_its_owned_partitions_does_not_count_as_revoking() -> None:
    group, _ = run(ConsumerGroup("g"), join("m1"))
    group, _ = run(group, join("m2"))
    group, _ = run(group, beat(group, "m1"))
    group, _ = run(group, HeartbeatRequest("m1", 1))  # owned not sent (unchanged)
    assert group.members["m1"].state == UNREVOKED_PARTITIONS


def test_member_epochs_are_checked() -> None:
    """GMM.throwIfConsumerGroupMemberEpochIsInvalid: a greater epoch, or a smaller one that is
    not the previous epoch with a subset of the assignment, is FENCED_MEMBER_EPOCH."""
    group, _ = run(ConsumerGroup("g"), join("m1"))
    _, ahead = run(group, beat(group, "m1", epoch=5))
    assert ahead.error == FENCED_MEMBER_EPOCH
    group2, _ = run(group, join("m2"))
    group2, _ = run(group2, beat(group2, "m1"))
    group2, _ = run(group2, beat(group2, "m1"))  # revoked: epoch 2, previous 1
    assert group2.members["m1"].member_epoch == 2
    _, lost_answer = run(group2, beat(group2, "m1", epoch=1))  # its owned partitions are a subset
    assert lost_answer.error == NONE
    _, behind = run(group2, beat(group2, "m1", epoch=1, owned={T1: frozenset(range(6))}))
    assert behind.error == FENCED_MEMBER_EPOCH
    _, unknown = run(group, HeartbeatRequest("nobody", 3, owned={}))
    assert unknown.error == UNKNOWN_MEMBER_ID


def test_leaving_frees_the_partitions_and_bumps_the_group_epoch() -> None:
    group, _ = run(ConsumerGroup("g"), join("m1"))
    group, _ = run(group, join("m2"))
    group, _ = run(group, beat(group, "m1"))
    group, _ = run(group, beat(group, "m1"))
    group, _ = run(group, beat(group, "m2"))
    epoch = group.group_epoch
    group, left = run(group, HeartbeatRequest("m2", -1))
    assert (left.error, left.member_epoch) == (NONE, -1)
    assert set(group.members) == {"m1"} and group.group_epoch == epoch + 1
    group, answer = run(group, beat(group, "m1"))
    assert answer.assignment == {T1: frozenset(range(6))}
    _, gone = run(group, HeartbeatRequest("m2", -1))
    assert gone.error == UNKNOWN_MEMBER_ID


def test_a_static_member_leaving_for_a_while_keeps_its_place() -> None:
    """Epoch -2 keeps the member and its assignment; its instance id rejoining under a new member
    id takes them over; while it is held, another member id is UNRELEASED_INSTANCE_ID, and a
    heartbeat of the old id FENCED_INSTANCE_ID."""
    group, _ = run(ConsumerGroup("g"), join("s1", instance_id="i1"))
    _, taken = run(group, join("s2", instance_id="i1"))
    assert taken.error == UNRELEASED_INSTANCE_ID
    group, left = run(group, HeartbeatRequest("s1", -2, instance_id="i1"))
    assert left.member_epoch == -2 and group.members["s1"].assigned == {T1: frozenset(range(6))}
    epoch = group.group_epoch
    group, back = run(group, join("s2", instance_id="i1"))
    assert back.error == NONE and set(group.members) == {"s2"}
    assert back.assignment == {T1: frozenset(range(6))} and group.group_epoch == epoch
    _, fenced = run(group, HeartbeatRequest("s1", 1, instance_id="i1"))
    assert fenced.error == FENCED_INSTANCE_ID


def test_expired_sessions_and_late_revocations_are_fenced() -> None:
    group, _ = run(ConsumerGroup("g"), join("m1"))
    group, _ = run(group, join("m2"))
    group, _ = run(group, beat(group, "m1"), now_ms=1_000)
    revoke_by = group.members["m1"].revoke_by_ms
    assert revoke_by == 31_000
    assert expire(group, (), revoke_by - 1) == group
    late = expire(group, (), revoke_by)
    assert set(late.members) == {"m2"} and late.group_epoch == group.group_epoch + 1
    assert set(expire(group, {"m2"}, 0).members) == {"m1"}


def test_malformed_heartbeats_are_refused() -> None:
    """GMM.throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    assigners = ("uniform", "range")
    assert validate(replace(join("m"), rebalance_timeout_ms=-1), assigners).error == INVALID_REQUEST
    assert validate(replace(join("m"), owned={T1: frozenset({0})}), assigners).error == INVALID_REQUEST
    assert validate(replace(join("m"), subscribed_topic_names=()), assigners).error == INVALID_REQUEST
    assert validate(HeartbeatRequest("", 3), assigners).error == INVALID_REQUEST
    assert validate(HeartbeatRequest("m", -2), assigners).error == INVALID_REQUEST  # no instance id
    assert validate(HeartbeatRequest("m", -3), assigners).error == INVALID_REQUEST
    assert validate(join("m", assignor="sticky"), assigners).error == UNSUPPORTED_ASSIGNOR
    assert validate(join("m", assignor="range"), assigners) is None


def test_subscriptions_and_new_partitions_bump_the_group_epoch() -> None:
    group, _ = run(ConsumerGroup("g"), join("m1"))
    group, _ = run(group, beat(group, "m1"))
    assert group.group_epoch == 1
    group, answer = run(group, beat(group, "m1", subscribed_topic_names=("a", "b")))
    assert group.group_epoch == 2 and answer.assignment == {T1: frozenset(range(6)), T2: frozenset(range(3))}
    more = {**TOPICS, "b": TopicInfo(T2, 4)}
    group, answer = run(group, beat(group, "m1"), topics=more)
    assert group.group_epoch == 3 and answer.assignment[T2] == frozenset(range(4))


def test_the_members_preferred_assignor_is_used() -> None:
    group, _ = run(ConsumerGroup("g"), join("m1", assignor="range"))
    group, _ = run(group, join("m2", assignor="range"))
    assert group.target["m1"] == {T1: frozenset({0, 1, 2})} and group.target["m2"] == {T1: frozenset({3, 4, 5})}
    assert group.state == GROUP_RECONCILING
    assert replace(group, group_epoch=group.group_epoch + 1).state == GROUP_ASSIGNING
    assert ConsumerGroup("g").state == GROUP_EMPTY


def test_offsets_of_members_are_checked_against_their_epoch() -> None:
    """ConsumerGroup.validateOffsetCommit / validateOffsetFetch."""
    group, _ = run(ConsumerGroup("g"), join("m1"))
    check_offset_commit(group, "m1", 1, 9)
    with pytest.raises(StaleMemberEpochError):
        check_offset_commit(group, "m1", 0, 9)
    with pytest.raises(UnsupportedVersionError):
        check_offset_commit(group, "m1", 1, 8)
    check_offset_commit(group, "m1", 1, 3, transactional=True)
    with pytest.raises(UnknownMemberIdError):
        check_offset_commit(group, None, -1, 9)  # not empty: an admin commit is refused
    check_offset_commit(ConsumerGroup("g"), None, -1, 2)
    check_offset_fetch(group, None, -1)
    check_offset_fetch(group, "m1", 1)
    with pytest.raises(StaleMemberEpochError):
        check_offset_fetch(group, "m1", 2)
    with pytest.raises(UnknownMemberIdError):
        check_offset_fetch(group, "m9", 1)


def test_the_group_is_a_record_of_its_own_beside_the_classic_one() -> None:
    group, _ = run(ConsumerGroup("g"), join("m1", topics=("a", "b")))
    assert ConsumerGroup.from_json(group.to_json()) == group
    records = GroupRecords("g")
    records.apply(consumer_group_key("g"), group.to_json().encode())
    assert records.consumer == group and records.state is None
    records.apply(group_key("g"), None)
    records.apply(consumer_group_key("g"), None)
    assert records.consumer is None


# -- assignors ------------------------------------------------------------------------------------

members_st = st.dictionaries(
    st.sampled_from([f"m{i}" for i in range(6)]),
    st.sampled_from([("a",), ("b",), ("a", "b")]),
    min_size=1,
)


@given(members_st, st.integers(0, 8), st.integers(0, 8), st.data())
def test_assignors_give_every_subscribed_partition_to_one_subscriber(subs, pa, pb, data) -> None:
    topics = {"a": TopicInfo(T1, pa), "b": TopicInfo(T2, pb)}
    members = {m: ConsumerMember(m, subscribed_topic_names=t) for m, t in subs.items()}
    previous = data.draw(st.sampled_from([{}, range_assignment(members, topics)]))
    for result in (range_assignment(members, topics), uniform_assignment(members, topics, previous)):
        seen = [(t, p) for a in result.values() for t, ps in a.items() for p in ps]
        assert len(seen) == len(set(seen))
        wanted = {(topics[n].topic_id, p) for t in subs.values() for n in t for p in range(topics[n].partitions)}
        assert set(seen) == wanted
        for m, a in result.items():
            assert all(t in {topics[n].topic_id for n in subs[m]} for t in a)
    uniform = uniform_assignment(members, topics, previous)
    if len(set(subs.values())) == 1:  # the same subscription: within one of each other
        sizes = [count(a) for a in uniform.values()]
        assert max(sizes) - min(sizes) <= 1


def test_uniform_keeps_partitions_where_they_were() -> None:
    members = {m: ConsumerMember(m, subscribed_topic_names=("a",)) for m in ("m1", "m2")}
    first = uniform_assignment(members, TOPICS, {})
    members["m3"] = ConsumerMember("m3", subscribed_topic_names=("a",))
    second = uniform_assignment(members, TOPICS, first)
    moved = sum(len(first[m][T1] - second[m].get(T1, frozenset())) for m in first)
    assert moved == 2 and all(count(a) == 2 for a in second.values())


# -- the state machine ------------------------------------------------------------------------------

CLIENTS = ["c1", "c2", "c3"]


class ConsumerGroupMachine(RuleBasedStateMachine):
    """Members join, heartbeat (owning what they were last given, sometimes not saying so), leave
    and expire; topics grow. A partition is never held by two members, epochs stay ordered, and
    once everyone heartbeats with what it owns the group settles on its target."""

    def __init__(self) -> None:
        super().__init__()
        self.group = ConsumerGroup("g")
        self.topics = dict(TOPICS)
        self.owned: dict[str, dict[str, frozenset[int]]] = {}  # what each client owns
        self.now = 0

    def _apply(self, client: str, request: HeartbeatRequest) -> None:
        self.now += 100
        group, answer = heartbeat(self.group, request, self.topics, self.now)
        if answer.error == NONE and request.member_epoch >= 0:
            if answer.assignment is not None:
                self.owned[client] = dict(answer.assignment)
        elif answer.error == NONE or answer.error in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            self.owned.pop(client, None)  # left, or fenced: it gives up its partitions
        self.group = group

    @rule(client=st.sampled_from(CLIENTS), topics=st.sampled_from([("a",), ("b",), ("a", "b")]))
    def join(self, client: str, topics: tuple[str, ...]) -> None:
        if client in self.owned:
            return
        self._apply(client, join(client, topics))

    @rule(client=st.sampled_from(CLIENTS + [f"s{i}" for i in range(4)]), say_owned=st.booleans())
    def heartbeat(self, client: str, say_owned: bool) -> None:
        member = self.group.members.get(client)
        if member is None or client not in self.owned or member.member_epoch < 0:
            return
        owned = self.owned[client] if say_owned else None
        self._apply(client, HeartbeatRequest(client, member.member_epoch, instance_id=member.instance_id, owned=owned))

    @rule(client=st.sampled_from(CLIENTS))
    def leave(self, client: str) -> None:
        if client in self.group.members:
            self._apply(client, HeartbeatRequest(client, -1))

    @rule(incarnation=st.integers(0, 3))
    def static_member_restarts(self, incarnation: int) -> None:
        """The static member (instance "i") leaves for a while (-2) and a new process with the same
        instance id and a new member id takes its place and partitions."""
        holder = self.group.static_member("i")
        if holder is not None and holder.member_epoch != -2:
            self._apply(holder.member_id, HeartbeatRequest(holder.member_id, -2, instance_id="i"))
            self.owned.pop(holder.member_id, None)
        new_id = f"s{incarnation}"
        if new_id not in self.group.members and new_id not in self.owned:
            self._apply(new_id, join(new_id, ("a", "b"), instance_id="i"))

    @rule(client=st.sampled_from(CLIENTS))
    def session_expires(self, client: str) -> None:
        self.group = expire(self.group, {client}, self.now)
        if client not in self.group.members:
            self.owned.pop(client, None)

    @rule(grow=st.integers(1, 3))
    def partitions_added(self, grow: int) -> None:
        info = self.topics["b"]
        self.topics["b"] = TopicInfo(info.topic_id, info.partitions + grow)

    @invariant()
    def no_partition_is_held_twice(self) -> None:
        # What the clients own (as answered) never overlaps, nor does what the group records.
        held = [(t, p) for a in self.owned.values() for t, ps in a.items() for p in ps]
        assert len(held) == len(set(held)), self.owned
        recorded = [
            (t, p)
            for m in self.group.members.values()
            for a in (m.assigned, m.pending_revocation)
            for t, ps in a.items()
            for p in ps
        ]
        assert len(recorded) == len(set(recorded))

    @invariant()
    def epochs_are_ordered(self) -> None:
        assert self.group.assignment_epoch <= self.group.group_epoch
        for m in self.group.members.values():
            assert m.member_epoch <= self.group.assignment_epoch
            assert m.previous_member_epoch < m.member_epoch or m.member_epoch in (0, -2)  # -2: left for a while

    @invariant()
    def it_round_trips(self) -> None:
        assert ConsumerGroup.from_json(self.group.to_json()) == self.group

    @invariant()
    def it_settles_once_everyone_reports(self) -> None:
        group, owned = self.group, {c: dict(a) for c, a in self.owned.items()}
        for _ in range(4):
            for client in list(group.members):
                if client not in owned:
                    continue
                member = group.members[client]
                request = HeartbeatRequest(
                    client, member.member_epoch, instance_id=member.instance_id, owned=owned[client]
                )
                group, answer = heartbeat(group, request, self.topics, self.now)
                assert answer.error == NONE
                if answer.assignment is not None:
                    owned[client] = dict(answer.assignment)
        live = {c: m for c, m in group.members.items() if c in owned}
        if len(live) == len(group.members):
            assert group.state in (GROUP_STABLE, GROUP_EMPTY), group
            for client, member in live.items():
                assert member.assigned == group.target.get(client, {})
                assert owned[client] == dict(member.assigned)
            subscribed = {n for m in live.values() for n in m.subscribed_topic_names}
            total = sum(self.topics[n].partitions for n in subscribed)
            assert sum(count(m.assigned) for m in live.values()) == total


TestConsumerGroupMachine = ConsumerGroupMachine.TestCase
TestConsumerGroupMachine.settings = settings(max_examples=150, stateful_step_count=40)
