"""Group members in one process (no Spark): callbacks, cooperative rebalances, static members,
fencing, and liveness kept off the Delta log."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from lakelog.engine.admin.groups import describe_group
from lakelog.engine.errors import FencedInstanceIdError
from lakelog.engine.groups.classic import JoinRequest
from lakelog.engine.groups.classic_coordinator import ClassicCoordinator
from lakelog.engine.groups.consumer_protocol import encode_subscription
from lakelog.engine.topics import TopicPartition

FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2500, "auto_offset_reset": "earliest"}
TPS = {TopicPartition("t", p) for p in range(4)}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset]] = []

    def on_partitions_revoked(self, partitions):
        self.events.append(("revoked", frozenset(partitions)))

    def on_partitions_assigned(self, partitions):
        self.events.append(("assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions):
        self.events.append(("lost", frozenset(partitions)))


def until(condition, *consumers, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the group did not get there in time"
        for c in consumers:
            c.poll(timeout_ms=50)


def settled_pair(store, listener, config):
    """Members a (with ``listener``) and b of group g, each owning partitions of t."""
    a = store.consumer("g", client_id="a", **config)
    b = store.consumer("g", client_id="b", **config)
    a.subscribe(["t"], listener=listener)
    b.subscribe(["t"])
    until(lambda: a.assignment() and b.assignment(), a, b)
    return a, b


@pytest.fixture
def store(plain_store):
    plain_store.create_topic("t", partitions=4)
    with plain_store.producer(linger_ms=0) as producer:
        for i in range(40):
            producer.send("t", f"v{i}", partition=i % 4)
    return plain_store


def test_cooperative_rebalances_revoke_only_what_moves_and_the_rest_keeps_being_read(store):
    first, second = Recorder(), Recorder()
    a = store.consumer("g", client_id="a", partition_assignment_strategy="cooperative-sticky", **FAST)
    b = store.consumer("g", client_id="b", partition_assignment_strategy="cooperative-sticky", **FAST)
    try:
        a.subscribe(["t"], listener=first)
        until(lambda: a.assignment() == TPS, a)
        b.subscribe(["t"], listener=second)
        until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, a, b)
        (revoked,) = [p for kind, p in first.events if kind == "revoked"]
        assert len(revoked) == 2 and revoked == b.assignment()  # only what moved, and exactly that
        assert first.events[0] == ("assigned", frozenset(TPS))
        assert second.events == [("assigned", frozenset(b.assignment()))]
        d = describe_group(store.context, "g")
        assert (d.state, d.assignor) == ("Stable", "cooperative-sticky") and len(d.members) == 2
    finally:
        a.close()
        b.close()


def test_a_static_member_restarted_within_its_session_gets_its_partitions_back_without_a_rebalance(store):
    static = store.consumer("g", client_id="s", group_instance_id="worker-1", **FAST)
    other = store.consumer("g", client_id="o", **FAST)
    try:
        static.subscribe(["t"])
        other.subscribe(["t"])
        until(lambda: static.assignment() and other.assignment(), static, other)
        mine, generation = static.assignment(), static.group_metadata().generation
        static.close()  # a static member does not leave: its partitions wait for it
        assert describe_group(store.context, "g").generation == generation
        commits_before = len(store.history_entries())
        again = store.consumer("g", client_id="s2", group_instance_id="worker-1", **FAST)
        again.subscribe(["t"])
        until(lambda: again.assignment(), again, other)
        assert again.assignment() == mine and again.group_metadata().generation == generation
        joins = [e.operation for e in store.history_entries()[commits_before:]]
        assert joins == ["join_group"]  # it took its old place: no sync, no new generation
        other.poll(timeout_ms=50)
        assert other.group_metadata().generation == generation
        # A second instance with the same id takes the place over: the first is fenced.
        twin = store.consumer("g", client_id="s3", group_instance_id="worker-1", **FAST)
        twin.subscribe(["t"])
        until(lambda: twin.assignment(), twin)
        with pytest.raises(FencedInstanceIdError, match="worker-1"):
            again.poll(timeout_ms=0)
        twin.close()
    finally:
        other.close()


def test_a_member_removed_for_silence_finds_its_partitions_lost_and_the_rest_take_them(store):
    lost = Recorder()
    a, b = settled_pair(store, lost, FAST)
    try:
        mine = a.assignment()
        a.group_client._stop_heartbeats()  # a hung process: no lease renewals, no polls
        until(lambda: b.assignment() == TPS, b)
        assert ("lost", frozenset(mine)) not in lost.events  # a has not polled yet
        a.poll(timeout_ms=0)  # it wakes up: what it had is lost, and it joins again
        assert ("lost", frozenset(mine)) in lost.events
        operations = [e.operation for e in store.history_entries()]
        assert "group_deadlines" in operations and "heartbeat" not in operations
    finally:
        a.close()
        b.close()


def test_an_idle_group_writes_nothing_to_the_table(store):
    members = [store.consumer("g", client_id=f"m{i}", enable_auto_commit=False, **FAST) for i in range(3)]
    try:
        for m in members:
            m.subscribe(["t"])
        until(lambda: all(m.assignment() for m in members), *members)
        version = store.log.latest_version()
        for _ in range(20):  # several heartbeat intervals of polling that finds nothing new
            for m in members:
                m.poll(timeout_ms=50)
        assert store.log.latest_version() == version
        assert len(describe_group(store.context, "g").members) == 3
    finally:
        for m in members:
            m.close()


def test_a_member_that_joined_and_died_is_expired_after_its_session_and_the_round_completes_without_it(store):
    # A Kafka client that joined through an agent and died before its SyncGroup.
    ghost = ClassicCoordinator(store.context, "ghost")
    protocols = (("range", encode_subscription(["t"])),)
    request = JoinRequest("", "ghost", "consumer", protocols, FAST["session_timeout_ms"], 300_000)
    _, joined, _ = ghost.join_start("g", replace(request, requires_known_member_id=False))
    a = store.consumer("g", client_id="a", **FAST)
    try:
        a.subscribe(["t"])
        a.poll(timeout_ms=0)
        group = a.group_client.state()
        assert set(group.members) == {joined.member_id, a.group_client.member_id}
        assert group.state == "PreparingRebalance" and a.assignment() == set()  # waiting for the ghost
        until(lambda: a.assignment() == TPS, a)  # the ghost never renewed its lease: expired after its session
        assert set(a.group_client.state().members) == {a.group_client.member_id}
        assert "group_deadlines" in [e.operation for e in store.history_entries()]
    finally:
        a.close()


class _LeaseNotYetWritten:
    """A member's leases before its first one is written: the window between a JoinGroup's commit
    and the lease written after it."""

    def renew(self, member_id: str, instance_id: str | None) -> None:
        pass


def test_a_member_that_watched_the_group_for_a_session_gives_a_newcomer_its_session_before_its_first_lease(
    store, monkeypatch
):
    """A member is in the group from its JoinGroup's commit; its first lease comes after. A member
    that has watched the group for longer than a session and looks in between gave the newcomer no
    session at all (it counted the missing lease from its own first look) and dropped it at once:
    in a group of 8 processes, 5 of its 12 member ids, one of them after it had taken a partition."""
    a = store.consumer("g", client_id="a", **FAST)
    try:
        a.subscribe(["t"])
        until(lambda: a.assignment() == TPS, a)
        watched_until = time.monotonic() + FAST["session_timeout_ms"] / 1000 + 0.5
        while time.monotonic() < watched_until:  # a's coordinator looks at the group all along
            a.poll(timeout_ms=100)
        late = ClassicCoordinator(store.context, "late")
        monkeypatch.setattr(late, "_leases", lambda group_id: _LeaseNotYetWritten())
        protocols = (("range", encode_subscription(["t"])),)
        request = JoinRequest("", "late", "consumer", protocols, FAST["session_timeout_ms"], 300_000)
        _, joined, _ = late.join_start("g", replace(request, requires_known_member_id=False))
        a.group_client.coordinator.tick("g")  # a looks before the newcomer's first lease
        assert joined.member_id in a.group_client.state().members
        # Without a lease ever, it goes a session after a first saw it, as before.
        until(lambda: joined.member_id not in a.group_client.state().members, a)
    finally:
        a.close()


def test_a_waiting_poll_looks_often_while_its_group_rebalances_and_at_fetch_max_wait_once_stable(store, monkeypatch):
    """Kafka's JoinGroup/SyncGroup answer as soon as a rebalance completes: a member waiting on
    one looks at the log every few ms, not every fetch.max.wait.ms (here 1 s)."""
    from lakelog.engine.consume import consumer as consumer_module
    from lakelog.engine.consume import group_client as group_client_module

    slow = {**FAST, "fetch_max_wait_ms": 1000, "enable_auto_commit": False}
    a = store.consumer("g", client_id="a", **slow)
    b = store.consumer("g", client_id="b", **slow)
    pauses: list[float] = []
    real_sleep = time.sleep
    polling = threading.current_thread()

    def sleep(seconds: float) -> None:
        # Only the polling thread's pauses: time.sleep is the process's, and the members' lease
        # threads sleep too.
        if threading.current_thread() is polling:
            pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(consumer_module.time, "sleep", sleep)
    try:
        a.subscribe(["t"])
        until(lambda: a.assignment() == TPS, a)
        b.subscribe(["t"])
        b.poll(timeout_ms=0)  # b joins: a must revoke before anyone owns anything again
        assert b.assignment() == set()
        pauses.clear()
        b.poll(timeout_ms=100)  # a has not synced: b waits on the rebalance
        assert len(pauses) >= 5 and max(pauses) <= group_client_module.REBALANCE_LOOK_S
        until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, a, b)
        for c in (a, b):
            while c.poll(timeout_ms=0):
                pass
        pauses.clear()
        b.poll(timeout_ms=300)  # stable and read to the end: waits for data at fetch.max.wait.ms
        assert pauses and min(pauses) > group_client_module.REBALANCE_LOOK_S
    finally:
        a.close(autocommit=False)
        b.close(autocommit=False)


def test_members_starting_together_form_the_group_in_one_rebalance_with_the_initial_delay(tmp_path):
    """group.initial.rebalance.delay.ms (Kafka's): the first round of a new group waits for more
    members, so three members starting together get generation 1, each its share."""
    from lakelog.store import Store

    slow_start = Store.open(tmp_path / "delayed", **{"group.initial.rebalance.delay.ms": 1000})
    slow_start.create_topic("t", partitions=3)
    members = [slow_start.consumer("g", client_id=f"m{i}", **FAST) for i in range(3)]
    try:
        for m in members:
            m.subscribe(["t"])
            m.poll(timeout_ms=0)
        until(lambda: all(m.assignment() for m in members), *members)
        assert {m.group_metadata().generation for m in members} == {1}
        assert sorted(len(m.assignment()) for m in members) == [1, 1, 1]
    finally:
        for m in members:
            m.close()


def test_a_member_closing_in_the_middle_of_a_rebalance_loses_its_partitions(store):
    # As Java's ConsumerCoordinator.onLeavePrepare: a member that sent a JoinGroup it has not
    # synced yet does not revoke (an offset commit from its listener may be refused once the
    # round completes without it); its listener hears they are lost, and close() does not raise.
    # Cooperative: a keeps its partitions while it joins (an eager member revokes them first).
    first, cooperative = Recorder(), {"partition_assignment_strategy": "cooperative-sticky", **FAST}
    a, b = settled_pair(store, first, cooperative)
    c = store.consumer("g", client_id="c", **cooperative)
    try:
        mine, seen = a.assignment(), len(first.events)
        c.subscribe(["t"])
        c.poll(timeout_ms=0)  # c joins: the round waits for a and b
        a.poll(timeout_ms=0)  # a joins it too; b has not yet
        assert a.group_client.mid_rebalance
        a.close()
        assert first.events[seen:] == [("lost", frozenset(mine))]
        until(lambda: b.assignment() | c.assignment() == TPS and b.assignment() and c.assignment(), b, c)
    finally:
        a.close()
        b.close()
        c.close()


def test_a_member_closing_while_stable_revokes_and_may_commit(store):
    committed = []

    class Committing(Recorder):
        def on_partitions_revoked(self, partitions):
            super().on_partitions_revoked(partitions)
            a.commit({tp: a.position(tp) for tp in partitions})
            committed.append(frozenset(partitions))

    listener = Committing()
    a = store.consumer("g", client_id="a", enable_auto_commit=False, **FAST)
    try:
        a.subscribe(["t"], listener=listener)
        until(lambda: a.assignment() == TPS, a)
        assert not a.group_client.mid_rebalance
    finally:
        a.close()
    assert committed == [frozenset(TPS)] and listener.events[-1] == ("revoked", frozenset(TPS))
