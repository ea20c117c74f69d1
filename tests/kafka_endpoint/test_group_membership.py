"""Kafka clients that subscribe(): members of lakelog's consumer group through the agent
(JoinGroup/SyncGroup/Heartbeat/LeaveGroup), sharing partitions one owner at a time, with a
lakelog consumer in the same group."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException

from lakelog.store import Store


def _member(agent, name: str, strategy: str = "range", **config: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": agent if isinstance(agent, str) else agent.bootstrap,
            "group.id": "kg",
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": strategy,
            **config,
        }
    )
    consumer.subscribe(["g"])
    return consumer


def _poll(consumer: Consumer, seen: dict, name: str) -> None:
    for message in consumer.consume(100, timeout=0.2):
        if message.error() is None:
            seen.setdefault((message.partition(), message.offset()), []).append(name)
    if seen:
        # Fails when nothing was consumed since the last commit, or in a rebalance: then later.
        with contextlib.suppress(KafkaException):
            consumer.commit(asynchronous=False)


def _owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_kafka_members_share_a_group_and_take_over_when_one_leaves(agent):
    store = Store.open(agent.store, create=False)
    store.create_topic("g", partitions=4)
    with store.producer(linger_ms=0) as producer:
        for i in range(400):
            producer.send("g", f"v{i}", partition=i % 4).get()
    a, b = _member(agent, "a"), _member(agent, "b")
    seen: dict = {}
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            _poll(a, seen, "a")
            _poll(b, seen, "b")
            owned_a, owned_b = _owned(a), _owned(b)
            assert not owned_a & owned_b  # never two owners of one partition
            if len(seen) == 400 and owned_a and owned_b:
                break
        assert len(seen) == 400, f"{len(seen)} of 400 delivered"
        assert _owned(a) and _owned(b) and _owned(a) | _owned(b) == {0, 1, 2, 3}
        b.close()
        deadline = time.monotonic() + 60
        while _owned(a) != {0, 1, 2, 3} and time.monotonic() < deadline:
            _poll(a, seen, "a")
        assert _owned(a) == {0, 1, 2, 3}  # the leaver's partitions moved to the one left
    finally:
        a.close()
    from lakelog.engine.admin.groups import describe_group

    group = describe_group(Store.open(agent.store, create=False).context, "kg")
    assert {p.partition: p.committed for p in group.partitions if p.topic == "g"} == {p: 100 for p in range(4)}


def test_a_kafka_member_and_a_lakelog_consumer_share_one_group(agent):
    store = Store.open(agent.store, create=False)
    store.create_topic("g", partitions=4)
    kafka = _member(agent, "kafka")
    mine = store.consumer("kg", enable_auto_commit=False, auto_offset_reset="earliest", client_id="lakelog")
    mine.subscribe(["g"])
    seen: dict = {}

    def poll_both() -> None:
        _poll(kafka, seen, "kafka")
        for r in mine.poll(timeout_ms=100):
            seen.setdefault((r.partition, r.offset), []).append("lakelog")
        ours = {tp.partition for tp in mine.assignment()}
        assert not ours & _owned(kafka)  # one owner per partition, across both kinds of client

    try:
        deadline = time.monotonic() + 90
        while not (mine.assignment() and _owned(kafka)) and time.monotonic() < deadline:
            poll_both()
        assert {tp.partition for tp in mine.assignment()} | _owned(kafka) == {0, 1, 2, 3}
        with store.producer(linger_ms=0) as producer:
            for i in range(200):
                producer.send("g", f"v{i}", partition=i % 4).get()
        while len(seen) < 200 and time.monotonic() < deadline:
            poll_both()
        assert len(seen) == 200 and all(len(names) == 1 for names in seen.values())
        by = {name: {p for (p, _), names in seen.items() for n in names if n == name} for name in ("kafka", "lakelog")}
        assert by["kafka"] == _owned(kafka) and by["lakelog"] == {tp.partition for tp in mine.assignment()}
    finally:
        kafka.close()
        mine.close(autocommit=False)


def _fill(agent) -> None:
    """Topic ``g``: 4 partitions of 100 records each."""
    store = Store.open(agent.store, create=False)
    store.create_topic("g", partitions=4)
    with store.producer(linger_ms=0) as producer:
        for i in range(400):
            producer.send("g", f"v{i}", partition=i % 4).get()


def _share_everything(a: Consumer, b: Consumer, seen: dict, store: Path) -> None:
    """Poll both until every record was read and both own partitions, never one partition twice.
    A failure names the group as the store holds it (a rare CI failure left a member's JoinGroup
    waiting minutes with nothing else to go by)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        _poll(a, seen, "a")
        _poll(b, seen, "b")
        assert not _owned(a) & _owned(b)
        if len(seen) == 400 and _owned(a) and _owned(b):
            break
    if not (len(seen) == 400 and _owned(a) | _owned(b) == {0, 1, 2, 3}):
        from lakelog.engine.admin.groups import describe_group

        try:
            group: object = describe_group(Store.open(store, create=False).context, "kg")
        except Exception as exc:  # the failure above is the one to report
            group = f"not described: {exc!r}"
        read = {name: sum(name in names for names in seen.values()) for name in ("a", "b")}
        raise AssertionError(
            f"{len(seen)} of 400 records read ({read}); a owns {_owned(a)}, b owns {_owned(b)}; "
            f"the group in the store: {group}"
        )


def test_members_connected_to_different_agents_of_one_store_share_the_group(agent):
    from tests.kafka_endpoint.conftest import Agent

    _fill(agent)
    other = Agent(agent.store)
    a, b = _member(agent.bootstrap, "a"), _member(other.bootstrap, "b")
    seen: dict = {}
    try:
        _share_everything(a, b, seen, agent.store)
    finally:
        a.close()
        b.close()
        other.stop()


def test_cooperative_sticky_members_through_two_agents_share_a_classic_group(agent):
    """librdkafka's cooperative-sticky: the leader client assigns (Kafka's classic protocol, the
    group in the store, no agent its coordinator); a static member that restarts takes its
    place back; DescribeGroups reports the group's own protocol."""
    from confluent_kafka.admin import AdminClient

    from tests.kafka_endpoint.conftest import Agent

    _fill(agent)
    other = Agent(agent.store)
    a = _member(agent.bootstrap, "a", "cooperative-sticky")
    b = _member(other.bootstrap, "b", "cooperative-sticky", **{"group.instance.id": "b-static"})
    seen: dict = {}
    try:
        _share_everything(a, b, seen, agent.store)
        admin = AdminClient({"bootstrap.servers": other.bootstrap})
        described = admin.describe_consumer_groups(["kg"])["kg"].result(timeout=30)
        assert described.partition_assignor == "cooperative-sticky"
        assert {m.client_id for m in described.members} == {"a", "b"}
        assert {tp.partition for m in described.members for tp in m.assignment.topic_partitions} == {0, 1, 2, 3}
        # The static member restarts within its session: it gets its partitions back, a keeps its own.
        kept_a, kept_b = _owned(a), _owned(b)
        b.close()
        b = _member(agent.bootstrap, "b", "cooperative-sticky", **{"group.instance.id": "b-static"})
        deadline = time.monotonic() + 60
        while _owned(b) != kept_b and time.monotonic() < deadline:
            _poll(a, seen, "a")
            _poll(b, seen, "b")
        assert _owned(b) == kept_b and _owned(a) == kept_a
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(100)]
    finally:
        a.close()
        b.close()
        other.stop()


def test_a_killed_members_partitions_go_to_the_others_after_its_session(agent, tmp_path):
    """Three members, one of them a process SIGKILLed mid-run: the survivors take its partitions
    once its session timed out and resume from its committed offsets; nothing is lost."""
    import json
    import os
    import signal
    import subprocess
    import sys

    store = Store.open(agent.store, create=False)
    store.create_topic("g", partitions=6)
    with store.producer(linger_ms=0) as producer:
        for i in range(600):
            producer.send("g", f"v{i}", partition=i % 6).get()
    log = tmp_path / "victim.jsonl"
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, agent.bootstrap, str(log)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    a, b = _member(agent, "a"), _member(agent, "b")
    seen: dict = {}
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and log.read_text().strip()) and time.monotonic() < deadline:
            _poll(a, seen, "a")
            _poll(b, seen, "b")
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            _poll(a, seen, "a")
            _poll(b, seen, "b")
            assert not _owned(a) & _owned(b)
            if _owned(a) | _owned(b) == set(range(6)) and len(seen) + _victims(log) >= 600:
                break
        assert _owned(a) | _owned(b) == set(range(6))
        for line in log.read_text().splitlines():  # what the victim consumed counts as delivered
            p, o = json.loads(line)
            seen.setdefault((p, o), []).append("victim")
        assert set(seen) == {(p, o) for p in range(6) for o in range(100)}  # nothing lost
    finally:
        a.close()
        b.close()


def _victims(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


VICTIM = """
import json, sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "kg", "client.id": "victim",
    "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range"})
consumer.subscribe(["g"])
with open(sys.argv[2], "a") as out:
    while True:
        for m in consumer.consume(5, timeout=0.2):
            if m.error() is None:
                out.write(json.dumps([m.partition(), m.offset()]) + "\\n")
                out.flush()
                consumer.commit(message=m, asynchronous=False)
"""
