"""Where the framework tests run: a real Apache Kafka 4.4 broker (the reference: every test must
pass there, which shows the harness is right) or a real ``lakelog serve`` over a fresh store.

A test names its targets with ``@against_kafka_and_lakelog(lakelog_xfail=...)``; one broker
and one agent serve each module (pytest runs a module's tests target by target), each started
when its first test needs it and stopped after its last.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

KAFKA = "kafka"
LAKELOG = "lakelog"


def on_lakelog(xfail: str | None = None) -> object:
    """The ``lakelog`` target, expected to fail (strictly) for the reason ``xfail`` when given:
    a fix that makes it pass fails the test until the mark is removed."""
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(LAKELOG, marks=marks, id=LAKELOG)


def against_kafka_and_lakelog(lakelog_xfail: str | None = None) -> pytest.MarkDecorator:
    """Run the test with ``target`` a Kafka broker, then a lakelog agent; on lakelog strictly
    expected to fail for the reason ``lakelog_xfail`` when given (see :func:`on_lakelog`)."""
    return pytest.mark.parametrize("target", [KAFKA, on_lakelog(lakelog_xfail)], indirect=True)


@dataclass
class Target:
    """A running Kafka broker or lakelog agent, with what the tests do through librdkafka."""

    name: str
    bootstrap: str
    log: Path | None  # the agent's log (lakelog) or the broker's (kafka)

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
        for future in admin.create_topics([topic], operation_timeout=30).values():
            future.result(timeout=60)

    def produce(self, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None] | None = None) -> None:
        """Send every record (acks=all, idempotent) and wait until each is acknowledged."""
        from confluent_kafka import Producer

        failed: list[object] = []
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for i, value in enumerate(values):
            key = None if keys is None else keys[i]
            producer.produce(topic, value=value, key=key, on_delivery=lambda err, _m: err and failed.append(err))
            producer.poll(0)
        assert producer.flush(60) == 0, "records not acknowledged within 60s"
        assert failed == [], failed

    def read_all(self, topic: str, read_committed: bool = False, timeout_s: float = 60.0) -> list[tuple]:
        """Every record of ``topic`` up to the ends its partitions have now, as
        (key, value, partition, offset); with ``read_committed`` only committed transactions."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"lakelog-tests-reader-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                "log_level": 0,
            }
        )
        try:
            metadata = consumer.list_topics(topic, timeout=30).topics[topic]
            partitions = sorted(metadata.partitions)
            marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions}
            ends = {p: high for p, (_, high) in marks.items()}
            # A partition with nothing to read is never fetched from, so librdkafka never gives it a
            # position: it counts as read (one left empty by the sticky partitioner hung here).
            partitions = [p for p, (low, high) in marks.items() if high > low]
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            out: list[tuple] = []
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
                if all(positions.get(p, -1) >= ends[p] for p in partitions):
                    return out
                message = consumer.poll(0.5)
                if message is None or message.error():
                    continue
                out.append((message.key(), message.value(), message.partition(), message.offset()))
            raise AssertionError(f"could not read {topic} to its ends {ends} within {timeout_s:.0f}s")
        finally:
            consumer.close()


# KIP-848 members' session timeout, 45 s by default on both sides, shortened alike so that a
# killed member's partitions move within a test's patience (the broker's minimum goes down too).
KIP848_TIMEOUTS = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
}


@pytest.fixture(scope="module")
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    workdir = tmp_path_factory.mktemp(f"frameworks-{request.param}")
    if request.param == KAFKA:
        from benchmarks.kafka_reference import KafkaBroker

        broker = KafkaBroker(KIP848_TIMEOUTS).start()
        try:
            yield Target(KAFKA, broker.bootstrap, broker.log_path)
        finally:
            broker.stop()
        return
    from lakelog.store import Store
    from tests.kafka_endpoint.conftest import Agent

    store = workdir / "store"
    Store.open(store).close()
    conf = workdir / "lakelog.conf"
    conf.write_text("".join(f"{k} {v}\n" for k, v in KIP848_TIMEOUTS.items() if not k.startswith("group.consumer.min")))
    agent = Agent(store, log=workdir / "agent.log", conf=conf)
    try:
        yield Target(LAKELOG, agent.bootstrap, agent.log)
    finally:
        with contextlib.suppress(Exception):
            agent.stop()
