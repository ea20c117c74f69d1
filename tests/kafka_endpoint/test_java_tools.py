"""Kafka's own Java tools (kafka-tools / kafka-clients 4.x from Maven Central) against
``lakelog serve``: the console producer (an idempotent Java producer, Kafka's default) and the
console consumer."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from benchmarks.kafka_reference import ensure_kafka_jars
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 17+"),
]

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def _tool(main: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    jars = ensure_kafka_jars()
    classpath = f"{jars / 'tools'}/*:{jars}/*"
    return subprocess.run(
        ["java", "-cp", classpath, main, *args], input=stdin, capture_output=True, text=True, timeout=180
    )


def test_kafkas_console_producer_and_consumer_work_against_the_agent(agent):
    produced = _tool(
        PRODUCER,
        "--bootstrap-server",
        agent.bootstrap,
        "--topic",
        "t",
        "--reader-property",
        "parse.key=true",
        stdin="k1\tone\nk2\ttwo\nk1\tthree\n",
    )
    assert produced.returncode == 0, produced.stderr
    store = Store.open(agent.store, create=False)
    ends = [store.log.latest().end_offset(TopicPartition("t", p)) for p in (0, 1)]
    assert sum(ends) == 3
    busy = 0 if ends[0] else 1
    consumed = _tool(
        CONSUMER,
        "--bootstrap-server",
        agent.bootstrap,
        "--topic",
        "t",
        "--partition",
        str(busy),
        "--offset",
        "earliest",
        "--max-messages",
        str(ends[busy]),
        "--formatter-property",
        "print.key=true",
    )
    assert consumed.returncode == 0, consumed.stderr
    lines = consumed.stdout.strip().splitlines()
    assert len(lines) == ends[busy] and all("\t" in line for line in lines)
    assert {line.split("\t")[0] for line in lines} <= {"k1", "k2"}


def test_kafkas_producer_perf_test_sends_what_it_reports(agent):
    done = _tool(
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        "t",
        "--num-records",
        "5000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--command-property",
        f"bootstrap.servers={agent.bootstrap}",
    )
    assert done.returncode == 0, done.stderr
    assert "5000 records sent" in done.stdout
    ends = Store.open(agent.store, create=False).log.latest()
    assert sum(ends.end_offset(TopicPartition("t", p)) for p in (0, 1)) == 5000


def test_kafka_consumer_groups_describes_lag(agent):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaTP

    producer = Producer({"bootstrap.servers": agent.bootstrap})
    for i in range(10):
        producer.produce("t", b"x", partition=i % 2)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": "cg", "enable.auto.commit": False})
    consumer.assign([KafkaTP("t", 0, 0)])
    consumer.commit(offsets=[KafkaTP("t", 0, 2), KafkaTP("t", 1, 5)], asynchronous=False)
    consumer.close()
    done = _tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        agent.bootstrap,
        "--describe",
        "--group",
        "cg",
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("cg ")]
    assert [r[1:6] for r in rows] == [["t", "0", "2", "5", "3"], ["t", "1", "5", "5", "0"]]
