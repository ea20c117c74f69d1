"""Transactional producers against a real store: atomicity, abort, fencing, offsets."""

from __future__ import annotations

import time

import pytest

from lakelog.engine.commit.log_files import LogFiles
from lakelog.engine.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortedError,
)
from lakelog.engine.topics import TopicPartition

pytestmark = pytest.mark.spark


def values(store, topic):
    return sorted((r.partition, r.offset, bytes(r.value).decode()) for r in store.read(topic).collect())


def test_a_transaction_over_topics_and_offsets_is_one_commit(store):
    store.create_topic("a", partitions=3)
    store.create_topic("b", partitions=2)
    producer = store.transactional_producer("tx")
    producer.init_transactions()
    store.context.ensure_offsets_topic()  # created by the first offset commit otherwise: a commit of its own
    before = store.log.latest_version()
    producer.begin_transaction()
    futures = [producer.send("a", f"a{i}", key=f"k{i}") for i in range(10)]
    futures += [producer.send("b", f"b{i}", partition=i % 2) for i in range(4)]
    producer.send_offsets_to_transaction({("a", 0): 7}, "readers")
    assert store.log.latest_version() == before  # nothing is written before the commit
    producer.commit_transaction()
    assert store.log.latest_version() == before + 1
    acks = [f.get(timeout=0) for f in futures]
    assert sorted((m.topic, m.partition, m.offset) for m in acks) == sorted(
        (t, p, o) for t in ("a", "b") for (p, o, _) in values(store, t)
    )
    with store.consumer("readers") as consumer:
        assert consumer.committed([("a", 0)])[TopicPartition("a", 0)].offset == 7


def test_an_aborted_transaction_is_never_visible(store):
    store.create_topic("a")
    producer = store.transactional_producer("tx")
    producer.init_transactions()
    producer.begin_transaction()
    lost = producer.send("a", "aborted")
    producer.abort_transaction()
    assert isinstance(lost.exception(), TransactionAbortedError)
    producer.begin_transaction()
    producer.send("a", "kept")
    producer.commit_transaction()
    assert values(store, "a") == [(0, 0, "kept")]


def test_a_new_instance_fences_the_old_one(store):
    store.create_topic("a")
    old = store.transactional_producer("tx")
    old.init_transactions()
    old.begin_transaction()
    zombie = old.send("a", "zombie")
    new = store.transactional_producer("tx")
    new.init_transactions()
    assert new.epoch == old.epoch + 1
    with pytest.raises(ProducerFencedError, match="epoch"):
        old.commit_transaction()
    assert isinstance(zombie.exception(), ProducerFencedError)
    with pytest.raises(ProducerFencedError):
        old.begin_transaction()
    new.begin_transaction()
    new.send("a", "fresh")
    new.commit_transaction()
    assert values(store, "a") == [(0, 0, "fresh")]


def test_offsets_of_a_stale_group_generation_are_refused_with_the_records(store):
    store.create_topic("a", partitions=2)
    store.create_topic("out")
    consumer = store.consumer("g", heartbeat_interval_ms=300, session_timeout_ms=4000, auto_offset_reset="earliest")
    consumer.subscribe(["a"])
    consumer.poll(timeout_ms=100)
    stale = consumer.group_metadata()
    other = store.consumer("g", heartbeat_interval_ms=300, session_timeout_ms=4000)
    other.subscribe(["a"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not other.assignment():  # a new generation
        other.poll(timeout_ms=100)
        consumer.poll(timeout_ms=100)
    (moved,) = other.assignment()
    producer = store.transactional_producer("tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", "processed")
    producer.send_offsets_to_transaction({moved: 1}, stale)
    with pytest.raises(CommitFailedError, match="generation"):
        producer.commit_transaction()
    producer.abort_transaction()
    consumer.close()
    other.close()
    assert values(store, "out") == []


def test_a_retried_transaction_commit_after_an_unknown_outcome_lands_once(store, monkeypatch):
    store.create_topic("a")
    producer = store.transactional_producer("tx", retry_backoff_ms=1)
    producer.init_transactions()
    original = LogFiles.put_commit
    calls = []

    def land_then_fail(self, version, data, *rest):
        calls.append(version)
        landed = original(self, version, data, *rest)
        if len(calls) == 1:
            raise CommitStateUnknownError("the connection dropped before the answer arrived")
        return landed

    monkeypatch.setattr(LogFiles, "put_commit", land_then_fail)
    producer.begin_transaction()
    future = producer.send("a", "once")
    producer.commit_transaction()
    monkeypatch.undo()
    assert future.get(timeout=0).offset == 0 and len(calls) == 1
    assert values(store, "a") == [(0, 0, "once")]


def test_transactional_calls_in_the_wrong_state_are_refused(store):
    store.create_topic("a")
    producer = store.transactional_producer("tx")
    with pytest.raises(InvalidTxnStateError, match=r"begin_transaction.*uninitialized"):
        producer.begin_transaction()
    producer.init_transactions()
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        producer.init_transactions()
    with pytest.raises(InvalidTxnStateError, match="send"):
        producer.send("a", "outside")
    producer.begin_transaction()
    failed = producer.send("nope", "x")
    assert failed.failed()
    with pytest.raises(InvalidTxnStateError, match="abort"):
        producer.commit_transaction()
    producer.abort_transaction()
    assert values(store, "a") == []
