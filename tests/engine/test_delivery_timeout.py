"""``delivery.timeout.ms`` bounds a record from send() to its acknowledgement or failure, time queued
behind a blocked commit included (Kafka's KIP-91); an expired record is never committed later (no Spark)."""

from __future__ import annotations

import threading
import time

import pytest

from lakelog.engine.errors import DeliveryTimeoutError, InvalidConfigError
from lakelog.engine.topics import TopicPartition

TP = TopicPartition("t", 0)


def _settled(future, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not future.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert future.done()


def test_records_queued_behind_a_blocked_commit_expire_and_are_never_committed(plain_store):
    store = plain_store
    store.create_topic("t", partitions=1)
    producer = store.producer(linger_ms=0, delivery_timeout_ms=1000)
    gate, entered = threading.Event(), threading.Event()
    real = producer._writer.append

    def blocked_once(batch, policy):
        if not entered.is_set():
            entered.set()
            assert gate.wait(60)
        return real(batch, policy)

    producer._writer.append = blocked_once
    first = producer.send("t", "in-flight", partition=0)
    assert entered.wait(30)
    queued = [producer.send("t", f"queued-{i}", partition=0) for i in range(3)]
    many = producer.send_batch("t", ["batch-0", "batch-1"], partition=0)
    for future in [*queued, many]:
        _settled(future)
        assert isinstance(future.exception(), DeliveryTimeoutError)
        assert "delivery.timeout.ms" in str(future.exception())
    assert not first.done()  # its commit is under way: it learns that commit's outcome
    gate.set()
    assert first.get(timeout=30).offset == 0
    after = producer.send("t", "after", partition=0).get(timeout=30)
    assert after.offset == 1
    producer.close()
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TP])
    values = []
    for _ in range(5):
        values += [bytes(r.value) for r in consumer.poll(timeout_ms=200)]
    assert values == [b"in-flight", b"after"]  # nothing expired was committed later
    consumer.close()


def test_a_batch_taken_after_its_deadline_is_not_sent(plain_store):
    store = plain_store
    store.create_topic("t", partitions=1)
    producer = store.producer(linger_ms=0, delivery_timeout_ms=1)
    futures = [producer.send("t", f"v{i}", partition=0) for i in range(50)]
    producer.flush()
    outcomes = {type(f.exception()).__name__ if f.exception() else "ok" for f in futures}
    assert outcomes <= {"ok", "DeliveryTimeoutError"}
    committed = sum(1 for f in futures if f.exception() is None)
    producer.close()
    assert store.log.latest().end_offset(TP) == committed  # only acknowledged records landed


def test_delivery_timeout_below_linger_is_refused(plain_store):
    with pytest.raises(InvalidConfigError, match=r"delivery.timeout.ms \(100\) must be at least linger.ms \(500\)"):
        plain_store.producer(linger_ms=500, delivery_timeout_ms=100)
