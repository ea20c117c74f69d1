"""benchmarks.kafka_reference: a real Apache Kafka 4.4 broker, driven by real clients and Kafka's own tools.

One broker serves the module (it takes seconds to start); the last test stops
it and checks that nothing is left behind. The jars are fetched by the
fixture if ``~/.cache/lakelog/jars/kafka`` does not hold them yet, so these tests never skip.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.kafka_reference import (
    CONSUMER_GROUP_COMMAND,
    FLUSH_EVERY_MESSAGE,
    TOPIC_COMMAND,
    KafkaBroker,
    KafkaReferenceError,
    SaslSslListener,
    check_topic_config,
    create_topic,
    run_kafka_tool,
)
from lakelog.engine.errors import StoreError

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

TOPIC = "orders"
PARTITIONS = 3
GROUP = "billing"
RECORDS = [(f"customer-{i % 7}".encode(), f"order-{i}".encode()) for i in range(20)]


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaBroker]:
    kafka = KafkaBroker().start()
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture
def running(broker: KafkaBroker) -> KafkaBroker:
    # The stop test runs last; if an ordering plugin moves it, say so rather than fail obscurely.
    assert broker.running, "the module's broker was stopped before this test (test order changed?)"
    return broker


def _describe_rows(stdout: str) -> list[dict[str, str]]:
    """The offsets table of `kafka-consumer-groups --describe`, one dict per partition row."""
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    header_at = next(i for i, cells in enumerate(lines) if cells[:2] == ["GROUP", "TOPIC"])
    header = lines[header_at]
    return [dict(zip(header, cells, strict=False)) for cells in lines[header_at + 1 :] if cells[0] == GROUP]


def test_produce_consume_commit_as_kafka_sees_it(running: KafkaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
        future.result(timeout=60)

    delivered: list[tuple[bytes, bytes, int, int]] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.key(), msg.value(), msg.partition(), msg.offset()))

    # murmur2_random is the Java client's partitioner, so keys land where a Java producer puts them.
    producer = Producer({"bootstrap.servers": running.bootstrap, "acks": "all", "partitioner": "murmur2_random"})
    for key, value in RECORDS:
        producer.produce(TOPIC, value=value, key=key, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert errors == []
    assert sorted((k, v) for k, v, _, _ in delivered) == sorted(RECORDS)
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    offsets_of_partition: dict[int, list[int]] = defaultdict(list)
    for key, _, partition, offset in delivered:
        partitions_of_key[key].add(partition)
        offsets_of_partition[partition].append(offset)
    assert all(len(parts) == 1 for parts in partitions_of_key.values())
    assert all(sorted(offs) == list(range(len(offs))) for offs in offsets_of_partition.values())
    end_offsets = {p: len(offs) for p, offs in offsets_of_partition.items()}

    consumer = Consumer(
        {
            "bootstrap.servers": running.bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        consumed: list[tuple[bytes, bytes, int, int]] = []
        for _ in range(120):  # at most ~60 s: joining the group creates __consumer_offsets first
            msg = consumer.poll(0.5)
            if msg is None:
                if len(consumed) == len(RECORDS):
                    break
                continue
            assert msg.error() is None, msg.error()
            consumed.append((msg.key(), msg.value(), msg.partition(), msg.offset()))
        assert sorted(consumed) == sorted(delivered)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        assert {tp.partition: tp.offset for tp in committed if tp.partition in end_offsets} == end_offsets

        # Kafka's own view, while the consumer is still a member of the group.
        described = running.run_tool(
            CONSUMER_GROUP_COMMAND, "--bootstrap-server", running.bootstrap, "--describe", "--group", GROUP
        )
    finally:
        consumer.close()
    rows = _describe_rows(described.stdout)
    assert rows, described.stdout + described.stderr
    assert {row["TOPIC"] for row in rows} == {TOPIC}
    by_partition = {int(row["PARTITION"]): row for row in rows}
    assert set(by_partition) == set(range(PARTITIONS))
    for partition, row in by_partition.items():
        assert row["LAG"] == "0", described.stdout
        assert row["LOG-END-OFFSET"] == str(end_offsets.get(partition, 0)), described.stdout
        assert row["CONSUMER-ID"] != "-", described.stdout  # the live member owns every partition
    assert sum(int(row["LOG-END-OFFSET"]) for row in rows) == len(RECORDS)


def test_group_listed_by_kafka_tools(running: KafkaBroker) -> None:
    listed = running.run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", running.bootstrap, "--list")
    assert GROUP in listed.stdout.split()


def test_a_created_topic_holds_its_config_as_kafkas_own_tool_describes_it(running: KafkaBroker) -> None:
    # The benchmarks' durable baseline: flush.messages=1 must be the topic's, not only asked for.
    def described(topic: str) -> str:
        args = ("--bootstrap-server", running.bootstrap, "--describe", "--topic", topic)
        return running.run_tool(TOPIC_COMMAND, *args).stdout

    create_topic(running.bootstrap, "durable", FLUSH_EVERY_MESSAGE, partitions=2)
    durable = described("durable")
    assert "PartitionCount: 2" in durable and "flush.messages=1" in durable, durable
    assert durable.count("Leader: 1") == 2, durable  # create_topic returned once every partition had its leader
    create_topic(running.bootstrap, "plain")
    assert "flush.messages" not in described("plain")


def test_a_topic_config_the_broker_does_not_hold_is_refused_by_name() -> None:
    check_topic_config("t", {"flush.messages": "1"}, {"flush.messages": "1", "retention.ms": "604800000"})
    with pytest.raises(KafkaReferenceError, match=r"holds \{'flush.messages': '9223372036854775807'\} for topic t"):
        check_topic_config("t", {"flush.messages": "1"}, {"flush.messages": "9223372036854775807"})
    with pytest.raises(KafkaReferenceError, match=r"holds \{'flush.messages': None\}"):
        check_topic_config("t", {"flush.messages": "1"}, {})


def test_a_kafka_tool_runs_without_a_broker_and_leaves_nothing() -> None:
    """lakelog's side of a benchmark runs Kafka's tools with no broker beside the agent."""

    def temporaries() -> set[str]:
        return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("lakelog-kafka-tool-")}

    before = temporaries()
    done = run_kafka_tool(TOPIC_COMMAND, "--version")
    assert re.search(r"^4\.\d+\.\d+", done.stdout, re.MULTILINE), done.stdout
    with pytest.raises(KafkaReferenceError, match="exited with"):
        run_kafka_tool(TOPIC_COMMAND, "--no-such-option")
    assert temporaries() <= before


def test_refuses_managed_config_and_missing_java() -> None:
    with pytest.raises(ValueError, match="listeners"):
        KafkaBroker({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    with pytest.raises(KafkaReferenceError, match="java") as raised:
        KafkaBroker(java="/nonexistent/bin/java").start()
    assert isinstance(raised.value, StoreError)


def test_a_sasl_ssl_listener_takes_only_scram_users_kafka_storage_can_format(tmp_path) -> None:
    keystore = tmp_path / "server.pem"
    with pytest.raises(ValueError, match="SCRAM-SHA-256 or SCRAM-SHA-512"):
        SaslSslListener(keystore, mechanism="PLAIN")
    with pytest.raises(ValueError, match="cannot hold"):
        SaslSslListener(keystore, {"alice": "a,b"})
    listener = SaslSslListener(keystore, {"alice": "secret"})
    assert listener.format_arguments() == ["--add-scram", "SCRAM-SHA-512=[name=alice,password=secret]"]
    assert listener.properties(9093)["ssl.keystore.location"] == str(keystore)
    with pytest.raises(KafkaReferenceError, match="no SASL_SSL listener"):
        _ = KafkaBroker().sasl_ssl_bootstrap


def _our_temp_dirs() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("lakelog-kafka-")}


def test_broker_that_cannot_start_says_why_and_leaves_nothing() -> None:
    before = _our_temp_dirs()
    # A setting Kafka rejects: the error carries Kafka's own message.
    broken = KafkaBroker({"num.network.threads": "0"}, startup_timeout_s=60)
    with pytest.raises(KafkaReferenceError, match=re.escape("num.network.threads")):
        broken.start()
    assert not broken.running
    assert _our_temp_dirs() <= before


def test_broker_that_does_not_answer_in_time_is_killed_with_its_log() -> None:
    before = _our_temp_dirs()
    slow = KafkaBroker(startup_timeout_s=0.2)
    with pytest.raises(KafkaReferenceError, match="did not answer") as raised:
        slow.start()
    assert "its log" in str(raised.value)
    assert not slow.running
    assert _our_temp_dirs() <= before


def test_port_taken_between_probe_and_bind_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import kafka_reference

    real_free_ports = kafka_reference.free_ports
    calls: list[list[int]] = []
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]

        def first_one_taken(count: int) -> list[int]:
            ports = real_free_ports(count)
            if not calls:
                ports[0] = taken  # the PLAINTEXT port, as if another process grabbed it meanwhile
            calls.append(ports)
            return ports

        monkeypatch.setattr(kafka_reference, "free_ports", first_one_taken)
        with KafkaBroker() as retried:
            assert len(calls) == 2
            assert retried.port != taken
            admin = AdminClient({"bootstrap.servers": retried.bootstrap})
            assert 1 in admin.list_topics(timeout=30).brokers


def test_stop_ends_the_broker_and_removes_its_directory(running: KafkaBroker) -> None:
    pid, workdir = running.pid, running.workdir
    assert workdir.is_dir()
    running.stop()
    assert not running.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped by stop(), so not even a zombie is left
    assert not workdir.exists()
    running.stop()  # idempotent


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    """Ports handed to programs that listen on them later are never ones the kernel hands out
    for port 0 (an agent or a client binding meanwhile would take it: a Connect worker's REST
    server once failed to start so)."""
    from benchmarks import kafka_reference

    start = kafka_reference._ephemeral_start()
    for _ in range(20):
        ports = kafka_reference.free_ports(3)
        assert len(set(ports)) == 3 and all(kafka_reference._LOWEST_PORT <= p < start for p in ports)
        for port in ports:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))
