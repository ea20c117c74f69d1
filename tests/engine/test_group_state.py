"""The group state machine against Kafka's rules, as plain values (no Spark, no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.engine.errors import CommitFailedError, FencedInstanceIdError
from lakelog.engine.groups.offsets_topic import (
    GroupRecords,
    group_key,
    java_string_hash,
    offset_key,
    partition_for_group,
)
from lakelog.engine.groups.state import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    GroupState,
    Member,
    check_commit,
    expire,
    join,
    join_all,
    leave,
    overdue,
    refresh,
    sync,
)
from lakelog.engine.topics import TopicPartition as TP

COUNTS = {"a": 4}


def member(mid, topics=("a",), instance=None, rebalance_timeout=60_000):
    return Member(mid, f"client-{mid}", tuple(topics), 10_000, rebalance_timeout, instance)


def owned(state: GroupState) -> dict[TP, str]:
    """Every partition with its one owner; fails if any partition has two."""
    owners: dict[TP, str] = {}
    for m, tps in state.assignment.items():
        for tp in tps:
            assert tp not in owners, f"{tp} owned by {owners[tp]} and {m}"
            owners[tp] = m
    return owners


def settle(state: GroupState) -> GroupState:
    """Every member revokes what it must and syncs (in member order)."""
    while state.rebalancing:
        m = next(m for m in sorted(state.members) if state.to_revoke(m))
        state = sync(state, m, state.to_revoke(m))
    return state


def test_the_first_member_gets_everything_at_once():
    s = join(GroupState("g"), member("m1"), 0, COUNTS)
    assert (s.state, s.generation) == (STABLE, 1)
    assert s.assigned("m1") == tuple(TP("a", p) for p in range(4))


def test_members_joining_together_form_the_group_in_one_rebalance():
    members = [member(f"m{i}") for i in range(4)]
    together = join_all(GroupState("g"), members, 0, COUNTS)
    assert (together.state, together.generation) == (STABLE, 1)
    assert dict(together.assignment) == {f"m{i}": (TP("a", i),) for i in range(4)}
    one_by_one = GroupState("g")
    for m in members:
        one_by_one = settle(join(one_by_one, m, 0, COUNTS))
    assert one_by_one.generation == 4 and one_by_one.assignment == together.assignment
    assert join_all(together, members[1:3], 1, COUNTS) == together  # members already in: nothing changes


def test_eager_a_join_makes_everyone_revoke_before_anything_is_reassigned():
    s = join(GroupState("g"), member("m1"), 0, COUNTS)
    s = join(s, member("m2"), 10, COUNTS)
    assert s.state == PREPARING_REBALANCE and s.generation == 1
    assert s.to_revoke("m1") == s.assigned("m1") and len(s.assigned("m1")) == 4
    assert s.assigned("m2") == ()  # nothing until m1 revoked
    check_commit(s, 1, "m1", [TP("a", 0)])  # m1 may still commit what it revokes
    half = sync(s, "m1", [TP("a", 0)])  # not all of it: nothing changes
    assert half == s
    done = sync(s, "m1", s.to_revoke("m1"))
    assert (done.state, done.generation) == (STABLE, 2)
    assert done.assigned("m1") == (TP("a", 0), TP("a", 1)) and done.assigned("m2") == (TP("a", 2), TP("a", 3))


def test_cooperative_only_the_moving_partitions_are_revoked_and_the_rest_keep_their_owner():
    s = join(GroupState("g"), member("m1"), 0, COUNTS, "cooperative-sticky")
    s = join(s, member("m2"), 10, COUNTS)
    assert s.state == COMPLETING_REBALANCE
    moving = set(s.to_revoke("m1"))
    assert len(moving) == 2 and set(s.assigned("m1")) >= moving  # m1 keeps reading all until it revokes
    assert s.assigned("m2") == ()
    done = sync(s, "m1", moving)
    assert done.state == STABLE and set(done.assigned("m2")) == moving
    assert set(done.assigned("m1")) == {TP("a", p) for p in range(4)} - moving


def test_leaving_or_expiring_frees_partitions_at_once():
    s = settle(join(join(GroupState("g"), member("m1"), 0, COUNTS), member("m2"), 0, COUNTS))
    gone = settle(leave(s, "m2", 20, COUNTS))
    assert set(gone.members) == {"m1"} and len(gone.assigned("m1")) == 4
    expired = settle(expire(s, ["m1", "nobody"], 20, COUNTS))
    assert set(expired.members) == {"m2"} and len(expired.assigned("m2")) == 4
    empty = leave(gone, "m1", 30, COUNTS)
    assert empty.state == EMPTY and empty.assignment == {}


def test_a_static_member_returning_under_a_new_id_keeps_its_partitions_without_a_rebalance():
    s = settle(join(join(GroupState("g"), member("m1", instance="i1"), 0, COUNTS), member("m2"), 0, COUNTS))
    before = s.assigned("m1")
    back = join(s, member("m1-restarted", instance="i1"), 50, COUNTS)
    assert back.generation == s.generation and back.state == STABLE
    assert back.assigned("m1-restarted") == before and "m1" not in back.members
    with pytest.raises(FencedInstanceIdError):
        check_commit(back, back.generation, "m1", [], instance_id="i1")


def test_a_grown_topic_or_changed_subscription_rebalances_an_unchanged_join_does_not():
    s = join(GroupState("g"), member("m1"), 0, COUNTS)
    assert join(s, member("m1"), 5, COUNTS) == s
    grown = settle(refresh(s, 5, {"a": 6}))
    assert grown.generation == s.generation + 1 and len(grown.assigned("m1")) == 6
    moved = settle(join(s, member("m1", topics=("a", "b")), 5, {"a": 4, "b": 2}))
    assert len(moved.assigned("m1")) == 6


def test_members_that_do_not_revoke_in_time_are_overdue():
    s = join(GroupState("g"), member("m1", rebalance_timeout=1000), 0, COUNTS)
    s = join(s, member("m2"), 100, COUNTS)
    assert overdue(s, 900) == [] and overdue(s, 1200) == ["m1"]


def test_commits_need_membership_the_generation_and_ownership():
    s = settle(join(join(GroupState("g"), member("m1"), 0, COUNTS), member("m2"), 0, COUNTS))
    mine = s.assigned("m1")
    check_commit(s, s.generation, "m1", mine)
    with pytest.raises(CommitFailedError, match=r"generation 1 refused.*generation 2"):
        check_commit(s, 1, "m1", [*mine, *s.assigned("m2")])  # partitions that moved since
    check_commit(s, 1, "m1", mine)  # what it still owns: a rebalance it did not take part in
    with pytest.raises(CommitFailedError, match="not in group"):
        check_commit(s, s.generation, "m9", [])
    with pytest.raises(CommitFailedError, match="does not own a-"):
        check_commit(s, s.generation, "m1", s.assigned("m2"))
    with pytest.raises(CommitFailedError, match="live members"):
        check_commit(s, -1, None, [])  # a manual-assign consumer while members are alive
    check_commit(s, -1, None, [], live=[])  # ... and once their leases went stale


def test_state_round_trips_through_json():
    s = join(GroupState("g"), member("m1", instance="i"), 0, COUNTS, "cooperative-sticky")
    s = join(s, member("m2"), 1, COUNTS)
    assert s.rebalancing and GroupState.from_json(s.to_json()) == s
    done = settle(s)
    assert GroupState.from_json(done.to_json()) == done


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["join", "join_all", "leave", "expire", "sync", "grow", "restart"]),
        st.integers(0, 5),
        st.sampled_from([("a",), ("a", "b"), ("b",)]),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events=EVENTS, assignor=st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]))
def test_no_partition_ever_has_two_owners_and_the_group_settles_on_a_full_assignment(events, assignor):
    counts = {"a": 5, "b": 3}
    s = GroupState("g")
    for step, (kind, who, topics) in enumerate(events):
        mid = f"m{who}"
        before = owned(s)
        if kind == "join":
            s = join(s, member(mid, topics, instance=f"i{who}" if who % 2 else None), step, counts, assignor)
        elif kind == "join_all":  # this member and the next one, announced together
            pair = [member(f"m{m}", topics, instance=f"i{m}" if m % 2 else None) for m in (who, (who + 1) % 6)]
            s = join_all(s, pair, step, counts, assignor)
        elif kind == "leave":
            s = leave(s, mid, step, counts)
        elif kind == "expire":
            s = expire(s, [mid], step, counts)
        elif kind == "restart" and who % 2:
            s = join(s, member(f"{mid}-{step}", topics, instance=f"i{who}"), step, counts, assignor)
        elif kind == "grow":
            counts = {**counts, "a": counts["a"] + 1}
            s = refresh(s, step, counts)
        elif kind == "sync" and s.to_revoke(mid):
            s = sync(s, mid, s.to_revoke(mid))
        after = owned(s)
        # A partition changes hands only once its owner gave it up: the owner's own sync (it
        # revoked the partition before committing it), or the owner left, was expired or was
        # replaced by its restarted static instance.
        for tp, owner in after.items():
            if tp in before and before[tp] != owner:
                previous = before[tp]
                given_up = previous not in s.members or (kind == "sync" and previous == mid)
                assert given_up, f"{tp} moved from {previous} to {owner} in one step ({kind})"
        for m in s.members:
            assert set(s.to_revoke(m)) <= set(s.assigned(m))
    s = settle(s)
    owners = owned(s)
    if s.members:
        assert s.state == STABLE
        wanted = {t for m in s.members.values() for t in m.topics}
        expected = {TP(t, p) for t in wanted for p in range(counts[t])}
        assert set(owners) == expected
        for tp, m in owners.items():
            assert tp.topic in s.members[m].topics
    else:
        assert s.state == EMPTY and owners == {}


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
    g.apply(group_key("g"), GroupState("g", 3).to_json().encode())
    assert {tp: o.offset for tp, o in g.offsets.items()} == {TP("a", 0): 7}
    assert g.state.generation == 3
