"""Two agents on one store, an idempotent producer on each, one agent SIGKILLed mid-run and
restarted on its port: the project's history checker (tests/history_checker.py) finds no lost
acknowledged write, no duplicate, no record away from the offset it was acknowledged at and no
producer's records out of order."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from tests.history_checker import check
from tests.kafka_endpoint.conftest import Agent

pytestmark = pytest.mark.slow

RECORDS = 20_000


def _produce(bootstrap: str, name: str, acked: list, events: list, stop: threading.Event) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            "reconnect.backoff.max.ms": 200,
        }
    )

    def report(error, message):
        value = message.value().decode()
        event = {"type": "send", "process": name, "time": time.time(), "value": value, "topic": "t", "txn": None}
        if error is None:
            acked.append((value, message.partition(), message.offset()))
            event.update(partition=message.partition(), offset=message.offset(), outcome="ok")
        else:  # gave up: it may still have been committed
            event.update(partition=message.partition(), offset=None, outcome="unknown")
        events.append(event)

    for i in range(RECORDS):
        while True:
            try:
                producer.produce("t", f"{name}-{i}".encode(), key=f"{name}-{i % 5}".encode(), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100 == 0:
            producer.poll(0)
            time.sleep(0.01)
    producer.flush(180)
    stop.set()


def test_a_killed_agent_loses_and_doubles_nothing(plain_store):
    plain_store.create_topic("t", partitions=2)
    root = plain_store.uri
    a, b = Agent(root), Agent(root)
    acked: dict[str, list] = {"a": [], "b": []}
    events: list[dict] = []
    done = {name: threading.Event() for name in acked}
    threads = [
        threading.Thread(target=_produce, args=(agent.bootstrap, name, acked[name], events, done[name]))
        for name, agent in (("a", a), ("b", b))
    ]
    for t in threads:
        t.start()
    try:
        while len(acked["a"]) < RECORDS // 4:
            time.sleep(0.05)
        a.kill()  # mid-run: requests and commits in flight
        acked_at_kill = len(acked["a"])
        assert acked_at_kill < RECORDS
        time.sleep(1.0)
        a = Agent(root, a.port)  # back on its address; the producer reconnects and retries
        for t in threads:
            t.join(240)
        assert all(e.is_set() for e in done.values())
    finally:
        a.stop()
        b.stop()
    store = Store.open(root, create=False)
    rows = []
    for p in (0, 1):
        tp = TopicPartition("t", p)
        end = store.log.latest().end_offset(tp)
        consumer = store.consumer(None, auto_offset_reset="earliest", max_poll_records=10_000)
        consumer.assign([tp])
        while consumer.position(tp) < end:
            rows += [(bytes(r.value).decode(), p, r.offset) for r in consumer.poll(timeout_ms=1000)]
        consumer.close()
    final = [{"topic": "t", "partition": p, "offset": o, "value": v} for v, p, o in rows]
    report = check(events, final)
    assert report.ok, report.summary()
    assert report.stats["sends"]["committed"] == 2 * RECORDS  # every record acknowledged
    assert len(rows) == 2 * RECORDS and len(Counter(v for v, _, _ in rows)) == 2 * RECORDS
