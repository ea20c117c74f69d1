"""The store setting ``auto.create.topics.enable`` for lakelog's own clients (no Spark): a producer,
a consumer (with its ``allow.auto.create.topics``) and the console producer create a missing topic
with ``num.partitions`` and the ``topic.*`` settings when it is true, and nothing when it is false;
clients creating one topic at once end with one topic."""

from __future__ import annotations

import logging
import re
import threading

import pytest

from lakelog.engine.context import auto_create_topics
from lakelog.engine.errors import InvalidTopicError, UnknownTopicOrPartitionError
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from tests.engine.test_cli import run

CREATED = "created topic"


@pytest.fixture
def path(tmp_path):
    return tmp_path / "store"


def auto_store(path, **settings) -> Store:
    return Store.open(path, auto_create_topics_enable=True, num_partitions=3, **settings)


def created_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(CREATED)]


def test_a_send_creates_the_topic_with_the_store_defaults_and_lands_at_offset_0(path, caplog):
    store = auto_store(path, **{"topic.retention.ms": 60_000})
    with caplog.at_level(logging.INFO, logger="lakelog.engine.context"), store.producer(linger_ms=0) as producer:
        first = producer.send("fresh", "v", key="k").get(timeout=30)
        assert producer.send("fresh", "w", key="k").get(timeout=30).offset == 1
    assert (first.topic, first.offset) == ("fresh", 0)
    meta = store.describe_topic("fresh")
    assert meta.partitions == 3 and meta.overrides["retention.ms"] == 60_000
    assert created_lines(caplog) == ["created topic 'fresh' (auto.create.topics.enable) with 3 partition(s)"]
    ops = [e.operation for e in store.history_entries("fresh")]
    assert ops == ["create_topic", "produce", "produce"]


def test_send_batch_and_partitions_for_create_too(path):
    store = auto_store(path)
    with store.producer(linger_ms=0) as producer:
        assert producer.partitions_for("asked") == [0, 1, 2]
        future = producer.send_batch("batched", [b"a", b"b"], partition=2)
        assert list(future.get(timeout=30).offsets) == [0, 1]
    assert store.list_topics() == ["asked", "batched"]


def test_with_the_setting_off_a_send_fails_as_before_and_creates_nothing(path):
    store = Store.open(path, num_partitions=3)  # auto.create.topics.enable defaults to false
    version = store.log.latest_version()
    with store.producer(linger_ms=0) as producer:
        unknown = producer.send("nope", "v")
        batch = producer.send_batch("nope", [b"v"])
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope' does not exist"):
            producer.partitions_for("nope")
        producer.flush()
    assert isinstance(unknown.exception(), UnknownTopicOrPartitionError)
    assert isinstance(batch.exception(), UnknownTopicOrPartitionError)
    assert store.list_topics() == [] and store.log.latest_version() == version


def test_a_name_that_cannot_be_a_topic_fails_its_future(path):
    store = auto_store(path)
    with store.producer(linger_ms=0) as producer:
        bad = producer.send("bad name!", "v")
        reserved = producer.send("__consumer_offsets", "v")
        ok = producer.send("good", "v")
        producer.flush()
    assert isinstance(bad.exception(), InvalidTopicError)
    assert isinstance(reserved.exception(), InvalidTopicError)
    assert ok.get().offset == 0 and store.list_topics() == ["good"]


def test_a_consumer_creates_what_it_subscribes_to_or_assigns(path):
    store = auto_store(path)
    with store.producer(linger_ms=0) as producer:
        producer.send("other", "x").get(timeout=30)
    consumer = store.consumer("g", auto_offset_reset="earliest")
    consumer.subscribe(["subscribed"])
    assert store.describe_topic("subscribed").partitions == 3
    consumer.unsubscribe()
    consumer.subscribe(re.compile("pattern-.*"))  # Kafka never creates for a pattern
    consumer.close()
    assigning = store.consumer(None)
    assigning.assign([TopicPartition("assigned", 2)])
    assert assigning.assignment() == {TopicPartition("assigned", 2)}
    with pytest.raises(UnknownTopicOrPartitionError):
        assigning.assign([TopicPartition("grown", 3)])  # created with 3 partitions: 3 is not one
    assigning.close()
    assert store.list_topics() == ["assigned", "grown", "other", "subscribed"]


def test_a_consumer_with_allow_auto_create_topics_false_creates_nothing(path):
    store = auto_store(path)
    consumer = store.consumer("g", allow_auto_create_topics=False)
    consumer.subscribe(["missing"])
    consumer.poll(timeout_ms=50)  # it joins its group: commits, but no topic
    consumer.close()
    plain = store.consumer(None, **{"allow.auto.create.topics": False})
    with pytest.raises(UnknownTopicOrPartitionError):
        plain.assign([TopicPartition("missing", 0)])
    plain.close()
    assert store.list_topics() == [] and "missing" not in store.log.latest().topics
    assert store.history_entries("missing") == []  # the group's offsets topic is all it created


def test_a_consumer_of_a_store_with_the_setting_off_creates_nothing(path):
    store = Store.open(path)
    consumer = store.consumer(None)
    with pytest.raises(UnknownTopicOrPartitionError):
        consumer.assign([TopicPartition("missing", 0)])
    consumer.close()
    assert store.list_topics() == []


def test_the_consumer_setting_comes_from_the_store_settings_too(path):
    store = auto_store(path, **{"consumer.allow.auto.create.topics": False})
    consumer = store.consumer(None)
    with pytest.raises(UnknownTopicOrPartitionError):
        consumer.assign([TopicPartition("missing", 0)])
    consumer.close()
    assert store.list_topics() == []


def test_clients_creating_one_topic_at_once_end_with_one_topic(path, caplog):
    auto_store(path)  # the store exists before the racers open it
    racers = 6
    stores = [auto_store(path) for _ in range(racers)]
    start = threading.Barrier(racers)
    acks: list = [None] * racers

    def race(i: int) -> None:
        with stores[i].producer(linger_ms=0) as producer:
            start.wait()
            acks[i] = producer.send("raced", f"v{i}", partition=0).get(timeout=60)

    with caplog.at_level(logging.INFO, logger="lakelog.engine.context"):
        threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert sorted(a.offset for a in acks) == list(range(racers))
    state = Store.open(path).log.latest()
    assert list(state.topics) == ["raced"]
    creations = [e for e in stores[0].history_entries() if e.operation == "create_topic"]
    assert len(creations) == 1
    assert len(created_lines(caplog)) == 1


def test_the_engine_function_creates_only_when_enabled_and_tolerates_existing_topics(path):
    store = auto_store(path)
    store.create_topic("there", partitions=1)
    settings = store.settings
    assert auto_create_topics(store.context.admin, ["there", "new", "new"], settings, _policy()) == ["new"]
    off = Store.open(path).settings
    assert auto_create_topics(store.context.admin, ["other"], off, _policy()) == []
    assert store.list_topics() == ["new", "there"]
    assert store.describe_topic("there").partitions == 1


def _policy():
    from lakelog.engine.commit import RetryPolicy

    return RetryPolicy()


def test_the_console_producer_creates_the_topic_when_the_store_allows(tmp_path, capsys, monkeypatch):
    store = str(tmp_path / "s")
    Store.open(store)
    code, _, err = run(capsys, "--store", store, "produce", "cli", stdin="a\n", monkeypatch=monkeypatch)
    assert code == 6 and err == "error: topic 'cli' does not exist\n"
    assert Store.open(store).list_topics() == []
    monkeypatch.setenv("LAKELOG_AUTO_CREATE_TOPICS_ENABLE", "true")
    monkeypatch.setenv("LAKELOG_NUM_PARTITIONS", "2")
    code, _, err = run(capsys, "--store", store, "produce", "cli", stdin="a\nb\n", monkeypatch=monkeypatch)
    assert code == 0, err
    opened = Store.open(store)
    assert opened.describe_topic("cli").partitions == 2
    assert sum(opened.end_offsets("cli").values()) == 2


def test_the_console_consumer_creates_the_topic_when_the_store_and_the_consumer_allow(tmp_path, capsys, monkeypatch):
    store = str(tmp_path / "s")
    Store.open(store)
    argv = ["--store", store, "consume", "cli", "--from-beginning", "--timeout-ms", "100"]
    code, _, err = run(capsys, *argv, monkeypatch=monkeypatch)
    assert code == 6 and err == "error: topic 'cli' does not exist\n"
    monkeypatch.setenv("LAKELOG_AUTO_CREATE_TOPICS_ENABLE", "true")
    monkeypatch.setenv("LAKELOG_CONSUMER_ALLOW_AUTO_CREATE_TOPICS", "false")
    assert run(capsys, *argv, monkeypatch=monkeypatch)[0] == 6
    assert Store.open(store).list_topics() == []
    monkeypatch.delenv("LAKELOG_CONSUMER_ALLOW_AUTO_CREATE_TOPICS")
    code, out, err = run(capsys, *argv, monkeypatch=monkeypatch)
    assert code == 0 and out == "", err
    assert Store.open(store).list_topics() == ["cli"]
    assert Store.open(store).consumer(None).partitions_for_topic("cli") == [0]


def test_a_transactional_producer_creates_the_topic_its_transaction_writes(path):
    store = auto_store(path)
    producer = store.transactional_producer("tx")
    producer.init_transactions()
    producer.begin_transaction()
    future = producer.send("in-txn", "v", partition=2)
    producer.commit_transaction()
    assert future.get(10).offset == 0
    assert store.describe_topic("in-txn").partitions == 3
    off = Store.open(path)
    refused = off.transactional_producer("tx2")
    refused.init_transactions()
    refused.begin_transaction()
    failed = refused.send("elsewhere", "v")
    with pytest.raises(UnknownTopicOrPartitionError):
        failed.get(10)
    refused.abort_transaction()
    assert sorted(off.list_topics()) == ["in-txn"]
