"""``lakelog serve`` and the store setting ``auto.create.topics.enable``: a Metadata request naming a
missing topic creates it when the setting is true and the request allows it (v4+; always before
v4), and answers UNKNOWN_TOPIC_OR_PARTITION otherwise; Produce never creates (as Kafka's broker).
Handler cases in-process; a real librdkafka client against an agent process (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTP
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from lakelog.kafka_endpoint.admin import METADATA
from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.messages import Request, build
from lakelog.kafka_endpoint.produce import PRODUCE
from lakelog.store import Store
from tests.kafka_endpoint.conftest import Agent


@pytest.fixture
def path(tmp_path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def endpoint(path):
    store = Store.open(path, auto_create_topics_enable=True, num_partitions=3)
    served = Endpoint(store, "127.0.0.1", 9092)
    yield served
    served.close()


def _metadata(endpoint: Endpoint, version: int, names: list[str] | None, **allow) -> dict[str, tuple]:
    topics = None if names is None else [{"name": n} for n in names]
    body = build(load_request_schema(METADATA, version), topics=topics, **allow)
    response = endpoint.handle(Request(METADATA, version, 1, "test", body))
    return {t.name: (t.error_code, len(t.partitions)) for t in response.topics}


def test_a_metadata_request_creates_a_missing_topic_and_answers_it_ready(endpoint):
    endpoint.store.create_topic("old", partitions=1)
    answer = _metadata(endpoint, 12, ["old", "new"], allow_auto_topic_creation=True)
    assert answer == {"old": (ErrorCode.none, 1), "new": (ErrorCode.none, 3)}
    assert endpoint.store.describe_topic("new").partitions == 3
    # Before v4 a request cannot say no, and Kafka's broker creates.
    assert _metadata(endpoint, 1, ["v1"]) == {"v1": (ErrorCode.none, 3)}


def test_a_metadata_request_that_does_not_allow_creation_or_asks_for_all_topics_creates_nothing(endpoint):
    answer = _metadata(endpoint, 4, ["nope"], allow_auto_topic_creation=False)
    assert answer == {"nope": (ErrorCode.unknown_topic_or_partition, 0)}
    assert _metadata(endpoint, 12, None, allow_auto_topic_creation=True) == {}
    bad = _metadata(endpoint, 12, ["bad name!", "fine"], allow_auto_topic_creation=True)
    assert bad == {"bad name!": (ErrorCode.invalid_topic_exception, 0), "fine": (ErrorCode.none, 3)}
    assert endpoint.store.list_topics() == ["fine"]


def test_with_the_setting_off_a_missing_topic_stays_unknown(path):
    endpoint = Endpoint(Store.open(path), "127.0.0.1", 9092)
    try:
        answer = _metadata(endpoint, 12, ["nope"], allow_auto_topic_creation=True)
        assert answer == {"nope": (ErrorCode.unknown_topic_or_partition, 0)}
        assert _metadata(endpoint, 1, ["nope"]) == {"nope": (ErrorCode.unknown_topic_or_partition, 0)}
    finally:
        endpoint.close()
    assert Store.open(path).list_topics() == []


def _produce_unasked(endpoint: Endpoint, transactional_id: str | None = None, producer_id: int = -1, epoch: int = -1):
    """A Produce of one record to the missing topic ``unasked``: its partition's error code."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        2, 0, transactional_id is not None, producer_id, epoch, -1 if producer_id < 0 else 0, 2**20
    )
    builder.append(0, 1_700_000_000_000, None, b"v", [])
    body = build(
        load_request_schema(PRODUCE, 9),
        transactional_id=transactional_id,
        acks=-1,
        timeout=30_000,
        topic_data=[{"name": "unasked", "partition_data": [{"index": 0, "records": bytes(builder.build())}]}],
    )
    response = endpoint.handle(Request(PRODUCE, 9, 1, "test", body))
    (answer,) = response.responses[0].partition_responses
    return answer.error_code


def test_produce_to_a_missing_topic_is_refused_even_with_the_setting_on(endpoint):
    assert _produce_unasked(endpoint) == ErrorCode.unknown_topic_or_partition
    assert endpoint.store.list_topics() == []


def test_a_transactional_produce_to_a_missing_topic_is_refused_too(endpoint):
    """Inside a transaction the records go through lakelog's transactional producer, which
    auto-creates for its own users; Kafka's Produce still never creates."""
    from datetime import timedelta

    from lakelog.kafka_endpoint.transactions import INIT_PRODUCER_ID

    init = build(
        load_request_schema(INIT_PRODUCER_ID, 4), transactional_id="tx", transaction_timeout=timedelta(seconds=60)
    )
    ids = endpoint.handle(Request(INIT_PRODUCER_ID, 4, 1, "test", init))
    assert ids.error_code == ErrorCode.none
    code = _produce_unasked(endpoint, "tx", int(ids.producer_id), int(ids.producer_epoch))
    assert code == ErrorCode.unknown_topic_or_partition
    assert endpoint.store.list_topics() == []


def _agent(path: Path, monkeypatch, enabled: bool) -> Agent:
    Store.open(path)
    monkeypatch.setenv("LAKELOG_AUTO_CREATE_TOPICS_ENABLE", str(enabled).lower())
    monkeypatch.setenv("LAKELOG_NUM_PARTITIONS", "2")
    return Agent(path)


def test_a_kafka_producer_creates_a_topic_through_the_agent_and_a_consumer_reads_it_back(path, monkeypatch):
    agent = _agent(path, monkeypatch, enabled=True)
    try:
        producer = Producer({"bootstrap.servers": agent.bootstrap, "linger.ms": 5})
        acks = []
        for i in range(4):
            producer.produce(
                "fresh", f"v{i}".encode(), partition=i % 2, on_delivery=lambda e, m: acks.append((e, m.offset()))
            )
        assert producer.flush(30) == 0
        assert sorted(acks, key=lambda a: a[1]) == [(None, 0), (None, 0), (None, 1), (None, 1)]
        consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([KafkaTP("fresh", p, 0) for p in (0, 1)])
        got = []
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
            if len(got) == 4:
                break
        # librdkafka's consumers do not ask for creation (allow.auto.create.topics=false).
        asked = consumer.list_topics("consumer-asked", timeout=10).topics["consumer-asked"]
        consumer.close()
        assert sorted(got) == [b"v0", b"v1", b"v2", b"v3"]
        assert asked.error is not None and asked.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        # kafka-python copes with a topic answered ready in the response that created it too.
        from kafka import KafkaProducer

        other = KafkaProducer(bootstrap_servers=agent.bootstrap)
        placed = other.send("fresh-kp", b"x").get(timeout=10)
        other.close()
        assert placed.offset == 0
    finally:
        agent.stop()
    store = Store.open(path, create=False)
    assert store.list_topics() == ["fresh", "fresh-kp"] and store.describe_topic("fresh").partitions == 2


def test_with_the_setting_off_a_kafka_client_gets_unknown_topic_or_partition(path, monkeypatch):
    agent = _agent(path, monkeypatch, enabled=False)
    try:
        # librdkafka fails a record of a topic the broker does not know after this long (30 s default).
        producer = Producer({"bootstrap.servers": agent.bootstrap, "topic.metadata.propagation.max.ms": 300})
        topic = producer.list_topics("nope", timeout=10).topics["nope"]
        assert topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        errors = []
        try:
            producer.produce("nope", b"x", on_delivery=lambda e, m: errors.append(e))
        except KafkaException as refused:
            # librdkafka refuses at once when the first Metadata answer came later than
            # topic.metadata.propagation.max.ms after it first asked (a loaded machine): the same answer.
            errors.append(refused.args[0])
        producer.flush(10)
        assert errors and errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
    finally:
        agent.stop()
    assert Store.open(path, create=False).list_topics() == []
