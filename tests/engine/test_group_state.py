"""Group membership and assignment as plain values (no Spark)."""

from __future__ import annotations

import pytest

from engine.consumer_offsets import GroupRecords, group_key, java_string_hash, offset_key, partition_for_group
from engine.errors import CommitFailedError, InvalidConfigError
from engine.group_state import GroupState, Member, assign, check_commit, heartbeat, leave
from engine.offsets import TopicPartition as TP


def member(mid, topics=("a",), timeout=10_000):
    return Member(mid, f"client-{mid}", tuple(topics), timeout, 0)


def test_range_assignor_matches_kafka():
    # Kafka's RangeAssignor: 3 partitions over 2 members -> [0, 1], [2]; per topic.
    got = assign("range", [member("m2", ("a", "b")), member("m1", ("a", "b"))], {"a": 3, "b": 2})
    assert got == {"m1": (TP("a", 0), TP("a", 1), TP("b", 0)), "m2": (TP("a", 2), TP("b", 1))}


def test_roundrobin_assignor_skips_members_not_subscribed():
    got = assign("roundrobin", [member("m1", ("a",)), member("m2", ("a", "b"))], {"a": 3, "b": 1})
    assert got == {"m1": (TP("a", 0), TP("a", 2)), "m2": (TP("a", 1), TP("b", 0))}
    with pytest.raises(InvalidConfigError, match="sticky"):
        assign("sticky", [], {})


def test_joins_and_leaves_start_generations_heartbeats_do_not():
    s = heartbeat(GroupState("g"), member("m1"), 1000, {"a": 4})
    assert s.generation == 1 and s.assigned("m1") == tuple(TP("a", p) for p in range(4))
    s = heartbeat(s, member("m2"), 2000, {"a": 4})
    assert s.generation == 2 and len(s.assigned("m1")) == 2 and len(s.assigned("m2")) == 2
    same = heartbeat(s, member("m1"), 3000, {"a": 4})
    assert same.generation == 2 and same.members["m1"].last_heartbeat_ms == 3000
    grown = heartbeat(same, member("m1"), 3500, {"a": 6})
    assert grown.generation == 3 and sum(len(grown.assigned(m)) for m in ("m1", "m2")) == 6
    gone = leave(grown, "m2", 4000, {"a": 6})
    assert gone.generation == 4 and len(gone.assigned("m1")) == 6


def test_a_silent_member_is_removed_by_the_next_heartbeat_after_its_session():
    s = heartbeat(GroupState("g"), member("m1", timeout=5000), 0, {"a": 2})
    s = heartbeat(s, member("m2", timeout=5000), 0, {"a": 2})
    later = heartbeat(s, member("m1", timeout=5000), 6000, {"a": 2})
    assert set(later.members) == {"m1"} and later.generation == s.generation + 1


def test_state_round_trips_through_json():
    s = heartbeat(heartbeat(GroupState("g"), member("m1"), 0, {"a": 3}), member("m2"), 1, {"a": 3})
    assert GroupState.from_json(s.to_json()) == s


def test_commits_need_the_current_generation():
    s = heartbeat(GroupState("g"), member("m1"), 0, {"a": 1})
    check_commit(s, s.generation, "m1", 100)
    with pytest.raises(CommitFailedError, match=r"generation 0 refused.*generation 1"):
        check_commit(s, 0, "m1", 100)
    with pytest.raises(CommitFailedError, match="not in group"):
        check_commit(s, s.generation, "m9", 100)
    with pytest.raises(CommitFailedError, match="live members"):
        check_commit(s, -1, None, 100)  # a manual-assign consumer while members are alive
    check_commit(s, -1, None, 60_000)  # ... and once they timed out


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
