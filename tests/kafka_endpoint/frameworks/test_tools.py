"""Kafka's admin tools that Streams and Connect users reach for (kafka-tools 4.3.1, the version
the mirror serves, over the wire to a 4.4 broker or to ``lakelog serve``): ``kafka-topics
--create``, ``kafka-transactions`` list / describe / describe-producers, and
``kafka-delete-records`` (Streams purges its repartition topics with DeleteRecords) (issue 31)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks.kafka_reference import ensure_kafka_jars
from tests.kafka_endpoint.frameworks.conftest import Target, against_kafka_and_lakelog

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
DELETE_RECORDS_COMMAND = "org.apache.kafka.tools.DeleteRecordsCommand"


def _tool(main: str, *args: str) -> subprocess.CompletedProcess:
    jars = ensure_kafka_jars()
    return subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{jars / 'tools'}/*:{jars}/*", main, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _said(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\nstdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-3000:]}"


@against_kafka_and_lakelog()
def test_kafka_topics_create_exits_0(target: Target) -> None:
    created = _tool(
        TOPIC_COMMAND,
        "--bootstrap-server",
        target.bootstrap,
        "--create",
        "--topic",
        "made-by-kafka-topics",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "cleanup.policy=compact",
    )
    assert created.returncode == 0, _said(created)
    assert "Created topic made-by-kafka-topics." in created.stdout
    described = _tool(
        TOPIC_COMMAND, "--bootstrap-server", target.bootstrap, "--describe", "--topic", "made-by-kafka-topics"
    )
    assert described.returncode == 0, _said(described)
    assert "PartitionCount: 3" in described.stdout
    assert "cleanup.policy=compact" in described.stdout


def _committed_transaction(target: Target, topic: str, transactional_id: str) -> None:
    from confluent_kafka import Producer

    target.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"in-a-transaction-{i}".encode())
    producer.commit_transaction(30)


@against_kafka_and_lakelog()
def test_kafka_transactions_lists_describes_and_describes_producers(target: Target) -> None:
    _committed_transaction(target, "txn-topic", "txn-tools")
    listed = _tool(TRANSACTIONS_COMMAND, "--bootstrap-server", target.bootstrap, "list")
    assert listed.returncode == 0, _said(listed)
    assert "txn-tools" in listed.stdout
    described = _tool(
        TRANSACTIONS_COMMAND, "--bootstrap-server", target.bootstrap, "describe", "--transactional-id", "txn-tools"
    )
    assert described.returncode == 0, _said(described)
    assert "CompleteCommit" in described.stdout
    producers = _tool(
        TRANSACTIONS_COMMAND,
        "--bootstrap-server",
        target.bootstrap,
        "describe-producers",
        "--topic",
        "txn-topic",
        "--partition",
        "0",
    )
    assert producers.returncode == 0, _said(producers)
    rows = [line.split() for line in producers.stdout.splitlines()[1:] if line.strip()]
    assert len(rows) == 1, producers.stdout  # the one producer, with its last sequence and epoch


@against_kafka_and_lakelog()
def test_kafka_delete_records_moves_the_log_start(target: Target, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    target.create_topic("purged", 1)
    target.produce("purged", [f"r{i}".encode() for i in range(10)])
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": "purged", "partition": 0, "offset": 4}]}))
    done = _tool(DELETE_RECORDS_COMMAND, "--bootstrap-server", target.bootstrap, "--offset-json-file", str(offsets))
    # The tool exits 0 whatever each partition answered: what it printed says.
    assert done.returncode == 0, _said(done)
    assert "partition: purged-0\tlow_watermark: 4" in done.stdout, _said(done)
    assert "error" not in done.stdout.lower(), _said(done)
    past = tmp_path / "past.json"
    past.write_text(json.dumps({"version": 1, "partitions": [{"topic": "purged", "partition": 0, "offset": 11}]}))
    refused = _tool(DELETE_RECORDS_COMMAND, "--bootstrap-server", target.bootstrap, "--offset-json-file", str(past))
    assert refused.returncode == 0, _said(refused)
    assert "OffsetOutOfRangeException" in refused.stdout + refused.stderr, _said(refused)
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "purged-reader", "log_level": 0})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("purged", 0), timeout=30) == (4, 10)
    finally:
        consumer.close()
