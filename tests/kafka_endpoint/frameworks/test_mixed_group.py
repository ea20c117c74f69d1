"""One consumer group of a Java consumer (kafka-clients 4.4, through agent A), a librdkafka
consumer (confluent-kafka, through agent B) and lakelog's own Python consumer (on the store), all
members of Kafka's classic protocol: with the range assignor, and with cooperative-sticky and
lakelog's consumer leading (its assignor assigns the Java and librdkafka members); agent A is
SIGKILLed mid-run and restarted on its port: every record is consumed, and a record is consumed
twice only if the Java member consumed it without a successful commit (its uncommitted range when
its agent died) (issue 31). lakelog only: two agents on one store."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.java_programs import (
    GROUP_CONSUMER,
    HarnessError,
    JavaProgram,
    owned_partitions,
    stopped_after,
)
from lakelog.engine.errors import RebalanceInProgressError
from lakelog.engine.groups.classic_coordinator import ClassicCoordinator
from lakelog.store import Store
from tests.kafka_endpoint.conftest import Agent
from tests.kafka_endpoint.frameworks.conftest import LAKELOG, Target

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

TOPIC, GROUP = "mixed", "mixed-group"
PARTITIONS = 6
RECORDS = 3000
SESSION = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}


class _Member(threading.Thread):
    """A Python member: ``consume(member)`` polls until ``member.stopping`` is set, appending each
    record's (partition, offset) to ``member.consumed`` (and to ``member.refused`` when the commit
    after its poll was refused) and keeping ``member.owned`` up to date; a failure is kept for the
    test to raise."""

    def __init__(self, name: str, consume: Callable[[_Member], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.consumed: list[tuple[int, int]] = []
        # Polled records whose offset commit the group refused (a generation that had moved on,
        # as Kafka's coordinator refuses it too): their next owner may read them again.
        self.refused: set[tuple[int, int]] = set()
        self.owned: set[int] = set()  # its assignment as of its last poll
        self.failure: BaseException | None = None
        self.member_id: str | None = None  # in the group, for members that tell
        self.stopping = threading.Event()
        self._consume = consume

    def run(self) -> None:
        try:
            self._consume(self)
        except BaseException as exc:
            self.failure = exc


def _librdkafka(bootstrap: str, strategy: str) -> _Member:
    def consume(member: _Member) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "client.id": "librdkafka",
                "partition.assignment.strategy": strategy,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "reconnect.backoff.max.ms": 200,
                **SESSION,
                "log_level": 3,
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not member.stopping.is_set():
                good = [m for m in consumer.consume(50, 0.2) if m.error() is None]
                member.owned = {tp.partition for tp in consumer.assignment()}
                if good:
                    polled = [(m.partition(), m.offset()) for m in good]
                    member.consumed += polled
                    try:
                        consumer.commit(asynchronous=False)
                    except KafkaException as exc:
                        if exc.args[0].code() not in (KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS):
                            raise
                        member.refused.update(polled)
        finally:
            consumer.close()

    return _Member("librdkafka", consume)


def _lakelog(store: Store, strategy: str) -> _Member:
    def consume(member: _Member) -> None:
        consumer = store.consumer(
            GROUP,
            client_id="lakelog",
            partition_assignment_strategy=strategy,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        consumer.subscribe([TOPIC])
        try:
            while not member.stopping.is_set():
                records = consumer.poll(200, max_records=50)
                member.owned = {tp.partition for tp in consumer.assignment()}
                member.member_id = consumer.group_client.member_id if consumer.group_client else None
                if records:
                    polled = [(r.partition, r.offset) for r in records]
                    member.consumed += polled
                    try:
                        consumer.commit()
                    except RebalanceInProgressError:
                        member.refused.update(polled)
        finally:
            consumer.close()

    return _Member("lakelog", consume)


def _java_uncommitted(java: JavaProgram) -> set[tuple[int, int]]:
    """The Java member's records not covered by a successful commit: those whose next commit
    event is COMMIT_FAILED or LOST (or none at all)."""
    uncommitted: set[tuple[int, int]] = set()
    pending: list[tuple[int, int]] = []
    for line in list(java.lines):
        kind = line.split(" ", 1)[0]
        if kind == "R":
            _, _, partition, offset = line.split()
            pending.append((int(partition), int(offset)))
        elif kind == "COMMITTED":
            pending = []
        elif kind in ("COMMIT_FAILED", "LOST"):
            uncommitted.update(pending)
            pending = []
    return uncommitted | set(pending)


def _java_consumed(java: JavaProgram) -> list[tuple[int, int]]:
    return [(int(p), int(o)) for _, p, o in java.events("R")]


def _owners(java: JavaProgram, members: list[_Member]) -> list[set[int]]:
    """Each member's partitions now: the Java member's from its callbacks, the others' as of
    their last poll."""
    return [{int(tp.rsplit("-", 1)[1]) for tp in owned_partitions(java)}] + [set(m.owned) for m in members]


def _settled(owners: list[set[int]]) -> bool:
    """Every member owns partitions and every partition has exactly one owner."""
    return all(owners) and sum(map(len, owners)) == PARTITIONS == len(set().union(*owners))


JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


@pytest.mark.parametrize(("strategy", "lakelog_leads"), [("range", False), ("cooperative-sticky", True)])
def test_java_librdkafka_and_lakelog_members_share_a_group_through_two_agents_one_sigkilled(
    tmp_path: Path, strategy: str, lakelog_leads: bool
) -> None:
    path = tmp_path / "store"
    store = Store.open(path)
    store.create_topic(TOPIC, partitions=PARTITIONS)
    agents = {"a": Agent(path, log=tmp_path / "agent-a.log"), "b": Agent(path, log=tmp_path / "agent-b.log")}
    producer = Target(LAKELOG, agents["b"].bootstrap, None)
    lakelog = _lakelog(store, strategy)
    members = [_librdkafka(agents["b"].bootstrap, strategy), lakelog]
    if lakelog_leads:  # the first member to join leads (and stays the leader while it rejoins)
        lakelog.start()
        deadline = time.monotonic() + 60
        while len(lakelog.owned) < PARTITIONS:
            assert lakelog.failure is None and time.monotonic() < deadline, lakelog.failure
            time.sleep(0.1)
    values = [f"r{i}".encode() for i in range(RECORDS)]
    keys = [f"k{i}".encode() for i in range(RECORDS)]
    try:
        with stopped_after([]) as programs:
            java = JavaProgram(
                GROUP_CONSUMER,
                tmp_path,
                "java",
                {
                    "bootstrap.servers": agents["a"].bootstrap,
                    "group.id": GROUP,
                    "topics": TOPIC,
                    "client.id": "java",
                    "partition.assignment.strategy": JAVA_ASSIGNORS[strategy],
                    "max.poll.records": "50",
                    "reconnect.backoff.max.ms": "200",
                    **SESSION,
                },
            )
            programs.append(java)
            for member in members:
                if not member.is_alive():
                    member.start()

            def consumed() -> Counter:
                return Counter(_java_consumed(java) + [r for m in members for r in m.consumed])

            def wait(condition: Callable[[], bool], what: str, timeout_s: float = 90.0) -> None:
                deadline = time.monotonic() + timeout_s
                while not condition():
                    for member in members:
                        if member.failure is not None:
                            raise HarnessError(f"{member.name} failed: {member.failure!r}")
                    if java.events("FATAL") or java.proc.poll() is not None:
                        raise java.fail(f"stopped while waiting for {what}")
                    if time.monotonic() > deadline:
                        raise java.fail(
                            f"no {what} within {timeout_s:.0f}s: {len(consumed())} records consumed; "
                            f"java, librdkafka, lakelog own {_owners(java, members)}"
                        )
                    time.sleep(0.2)

            def stably_settled() -> bool:
                first = _owners(java, members)
                if not _settled(first):
                    return False
                time.sleep(3)  # the same owners 3 s later: no rebalance under way
                return _owners(java, members) == first

            wait(stably_settled, "group of three, each owning partitions")
            half, three_quarters = RECORDS // 2, 3 * RECORDS // 4
            producer.produce(TOPIC, values[:half], keys[:half])
            wait(lambda: len(consumed()) >= half, "first half consumed")

            agents["a"].kill()  # the Java member's agent: its membership lived there
            producer.produce(TOPIC, values[half:three_quarters], keys[half:three_quarters])
            time.sleep(1.0)
            agents["a"] = Agent(path, agents["a"].port, log=tmp_path / "agent-a-again.log")
            producer.produce(TOPIC, values[three_quarters:], keys[three_quarters:])
            wait(lambda: len(consumed()) >= RECORDS, "every record consumed")

            # Settled again, each partition's new records go to its one owner, once.
            wait(stably_settled, "group settled again after the agent's restart", 120)
            owner_of = {p: i for i, owned in enumerate(_owners(java, members)) for p in owned}
            seen_before = [len(_java_consumed(java))] + [len(m.consumed) for m in members]
            last = [f"last-{i}".encode() for i in range(PARTITIONS * 20)]
            producer.produce(TOPIC, last, last)
            wait(lambda: len(consumed()) >= RECORDS + len(last), "the last records consumed")
            after = [_java_consumed(java)[seen_before[0] :]] + [
                m.consumed[n:] for m, n in zip(members, seen_before[1:], strict=True)
            ]
            for i, records in enumerate(after):
                strays = {p for p, _ in records if owner_of[p] != i}
                assert not strays, f"member {i} (java, librdkafka, lakelog) read partitions {strays} it does not own"

            if lakelog_leads:
                group = ClassicCoordinator(store.context, "test").read(GROUP)
                assert group.leader == lakelog.member_id and group.protocol == strategy
                assert {m.client_id for m in group.members.values()} == {"java", "librdkafka", "lakelog"}

            counts = consumed()
            ends = Store.open(path, create=False).end_offsets(TOPIC)
            assert set(counts) == {(p, o) for p, end in ends.items() for o in range(end)}
            twice = {record for record, n in counts.items() if n > 1}
            may_repeat = _java_uncommitted(java).union(*(m.refused for m in members))
            assert twice <= may_repeat, sorted(twice - may_repeat)[:20]
    finally:
        for member in members:
            member.stopping.set()
        for member in members:
            member.join(30)
        for agent in agents.values():
            agent.stop()
