"""Java consumers (kafka-clients 4.4) in groups, against a real Kafka broker and against
``lakelog serve``: eager range members (what the agent serves today), cooperative-sticky
members (KIP-429), static members (KIP-345) and KIP-848 members (``group.protocol=consumer``)
consume every record, and at the end every partition is owned by exactly one member (issue 31)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from benchmarks.java_programs import (
    GROUP_CONSUMER,
    HarnessError,
    JavaProgram,
    owned_partitions,
    stopped_after,
)
from tests.kafka_endpoint.frameworks.conftest import Target, against_kafka_and_lakelog

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

PARTITIONS = 6
RECORDS = 600
RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"
COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"


def _member(
    target: Target, workdir: Path, name: str, group: str, topic: str, settings: Mapping[str, str]
) -> JavaProgram:
    return JavaProgram(
        GROUP_CONSUMER,
        workdir,
        name,
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "topics": topic,
            "client.id": name,
            **settings,
        },
        log_levels={"org.apache.kafka.clients.consumer": "INFO"},
    )


def _consumed(member: JavaProgram) -> set[tuple[int, int]]:
    return {(int(p), int(o)) for _, p, o in member.events("R")}


def _produce(target: Target, topic: str) -> None:
    target.create_topic(topic, PARTITIONS)
    target.produce(topic, [f"record-{i}".encode() for i in range(RECORDS)], [f"k{i}".encode() for i in range(RECORDS)])


def _wait_until_settled(members: list[JavaProgram], topic: str, timeout_s: float = 90.0) -> None:
    """Until every partition is owned by exactly one member and every record was consumed."""
    everything = {f"{topic}-{p}" for p in range(PARTITIONS)}

    def settled(_: JavaProgram) -> bool:
        owned = [owned_partitions(m) for m in members]
        disjoint = sum(len(o) for o in owned) == len(set().union(*owned))
        consumed = set().union(*(_consumed(m) for m in members))
        return disjoint and set().union(*owned) == everything and len(consumed) == RECORDS and all(owned)

    for member in members:
        # Each member's wait fails at once when that member dies; the condition looks at all.
        member.wait_for(settled, timeout_s, "a settled group that consumed every record")


def _check_offsets(target: Target, members: list[JavaProgram], topic: str) -> None:
    """Every offset of every partition was consumed (offsets are dense: the ends add up to RECORDS)."""
    consumed = set().union(*(_consumed(m) for m in members))
    per_partition: dict[int, set[int]] = {}
    for partition, offset in consumed:
        per_partition.setdefault(partition, set()).add(offset)
    for partition, offsets in per_partition.items():
        assert offsets == set(range(len(offsets))), f"{topic}-{partition}: gaps in {sorted(offsets)[:20]}..."
    assert sum(len(o) for o in per_partition.values()) == RECORDS


def _run_group(target: Target, workdir: Path, name: str, settings: Mapping[str, str], count: int = 2) -> None:
    topic = f"{name}-topic"
    _produce(target, topic)
    with stopped_after([]) as members:
        members += [_member(target, workdir, f"{name}-{i}", f"{name}-group", topic, settings) for i in range(count)]
        _wait_until_settled(members, topic)
        _check_offsets(target, members, topic)


FAST_CLASSIC = {"heartbeat.interval.ms": "500", "session.timeout.ms": "10000"}


@against_kafka_and_lakelog()
def test_eager_range_members_consume_everything(target: Target, tmp_path: Path) -> None:
    _run_group(target, tmp_path, "range", {"partition.assignment.strategy": RANGE, **FAST_CLASSIC})


@against_kafka_and_lakelog()
def test_cooperative_sticky_members_consume_everything(target: Target, tmp_path: Path) -> None:
    _run_group(target, tmp_path, "coop", {"partition.assignment.strategy": COOPERATIVE_STICKY, **FAST_CLASSIC})


@against_kafka_and_lakelog()
def test_static_members_keep_their_partitions_across_a_restart(target: Target, tmp_path: Path) -> None:
    """A static member (group.instance.id) that restarts within its session timeout comes back
    to the partitions it had, and the other member keeps its own (KIP-345)."""
    topic = "static-topic"
    _produce(target, topic)
    settings = {"partition.assignment.strategy": RANGE, "heartbeat.interval.ms": "500", "session.timeout.ms": "30000"}

    def static(name: str) -> JavaProgram:
        return _member(target, tmp_path, name, "static-group", topic, {**settings, "group.instance.id": name[:8]})

    with stopped_after([]) as members:
        members += [static("static-0"), static("static-1")]
        _wait_until_settled(members, topic)
        before = [owned_partitions(m) for m in members]
        assert members[1].stop() == 0, members[1].fail("did not stop cleanly")
        again = static("static-1-again")  # the same group.instance.id, static-1
        members.append(again)
        again.wait_for(lambda m: bool(owned_partitions(m)), 60, "its partitions back")
        assert owned_partitions(again) == before[1]
        assert owned_partitions(members[0]) == before[0]


@against_kafka_and_lakelog()
def test_kip848_members_consume_everything(target: Target, tmp_path: Path) -> None:
    _run_group(target, tmp_path, "kip848", {"group.protocol": "consumer"})


@against_kafka_and_lakelog()
def test_kip848_members_with_the_range_assignor_consume_everything(target: Target, tmp_path: Path) -> None:
    """group.remote.assignor=range: the server-side range assignor gives each member a range."""
    _run_group(target, tmp_path, "kip848range", {"group.protocol": "consumer", "group.remote.assignor": "range"})


def test_a_member_that_dies_fails_its_wait_at_once(tmp_path: Path) -> None:
    """The harness itself: a member that cannot start reports FATAL/exits, and wait_for raises
    at once with its log rather than waiting for the timeout."""
    import time

    bad = JavaProgram(GROUP_CONSUMER, tmp_path, "bad", {"topics": "x", "group.id": "g"})  # no bootstrap.servers
    started = time.monotonic()
    with pytest.raises(HarnessError, match="bad: "):
        bad.wait_for(lambda _: False, 60, "anything")
    assert time.monotonic() - started < 30
    bad.stop()


@against_kafka_and_lakelog()
def test_kip848_a_leaving_member_hands_its_partitions_over(target: Target, tmp_path: Path) -> None:
    """Two KIP-848 members share a topic's partitions; one leaves (member epoch -1) and its
    partitions move to the other, which reads on from the offsets committed on revocation:
    every record -- those produced before and after the leave -- is read exactly once (a
    partition handed over only after its previous owner revoked it), no partition is owned by
    both members, and the remaining member ends up owning every partition."""
    topic = "kip848-leave-topic"
    _produce(target, topic)
    settings = {"group.protocol": "consumer"}
    everything = {f"{topic}-{p}" for p in range(PARTITIONS)}
    with stopped_after([]) as members:
        members += [
            _member(target, tmp_path, f"kip848-leave-{i}", "kip848-leave-group", topic, settings) for i in range(2)
        ]
        _wait_until_settled(members, topic)
        assert owned_partitions(members[0]).isdisjoint(owned_partitions(members[1]))
        assert members[1].stop() == 0, members[1].fail("did not stop cleanly")
        later = range(RECORDS, 2 * RECORDS)
        target.produce(topic, [f"record-{i}".encode() for i in later], [f"k{i}".encode() for i in later])

        def moved(member: JavaProgram) -> bool:
            return owned_partitions(member) == everything and len(_consumed(members[0]) | _consumed(members[1])) == (
                2 * RECORDS
            )

        members[0].wait_for(moved, 90, "every partition after the other member left, every record consumed")
    reads = [(int(p), int(o)) for m in members for _, p, o in m.events("R")]
    assert len(reads) == len(set(reads)) == 2 * RECORDS, "a record was read twice: a partition had two owners"


@against_kafka_and_lakelog()
def test_kip848_a_killed_members_partitions_move_after_its_session_timeout(target: Target, tmp_path: Path) -> None:
    """A KIP-848 member SIGKILLed sends no leave: once its session times out (the broker's
    group.consumer.session.timeout.ms, 10 s in these tests on both) the other member gets its
    partitions and reads on from its committed offsets; records produced after the kill are
    all read, and a record is read twice only from the killed member's uncommitted range."""
    topic = "kip848-kill-topic"
    _produce(target, topic)
    settings = {"group.protocol": "consumer"}
    everything = {f"{topic}-{p}" for p in range(PARTITIONS)}
    with stopped_after([]) as members:
        members += [
            _member(target, tmp_path, f"kip848-kill-{i}", "kip848-kill-group", topic, settings) for i in range(2)
        ]
        _wait_until_settled(members, topic)
        lost = owned_partitions(members[1])
        members[1].kill()
        later = range(RECORDS, 2 * RECORDS)
        target.produce(topic, [f"record-{i}".encode() for i in later], [f"k{i}".encode() for i in later])

        def moved(member: JavaProgram) -> bool:
            return owned_partitions(member) == everything and len(_consumed(members[0]) | _consumed(members[1])) == (
                2 * RECORDS
            )

        members[0].wait_for(moved, 90, "the killed member's partitions after its session timeout")
    reads = [(int(p), int(o)) for m in members for _, p, o in m.events("R")]
    twice = {r for r in reads if reads.count(r) > 1}
    assert all(f"{topic}-{p}" in lost for p, _ in twice), f"read twice outside the killed member's partitions: {twice}"
