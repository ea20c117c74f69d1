"""``lakelog perf serve``: one Kafka client against ``lakelog serve`` and against a real Kafka broker.

The same client (confluent-kafka, librdkafka), the same records and the same
topic (one partition) on both sides, interleaved per repetition:

* produce throughput: ``records`` records of ``record_size`` bytes from one
  producer (``acks=all``, ``linger.ms=5``), from the first ``produce()`` to the
  end of ``flush()``;
* produce and end-to-end latency at a fixed rate (``rate`` records/s for
  ``seconds``, the client's default ``linger.ms``): produce = ``produce()`` to
  its delivery report; end to end = ``produce()`` to a consumer
  (``fetch.wait.max.ms=10``) polling the record; p50 and p99;
* fetch throughput: one consumer reading the partition from offset 0 to its
  end.

The agent is ``lakelog serve`` in a process of its own over a fresh local
store, the broker :class:`benchmarks.kafka_reference.KafkaBroker` (it
acknowledges from the page cache; lakelog's commit is durable when it lands).
Everything lives in a temporary directory this tool removes.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "perf-serve"


def start_agent(
    store: str, listen: Sequence[str] = ("127.0.0.1:0",), conf: Path | None = None
) -> tuple[subprocess.Popen, dict[str, str]]:
    """``lakelog serve`` over ``store`` in a process of its own, with ``listen`` (Kafka's
    listener syntax) and the settings file ``conf``. Returns the process and each listener's
    bound ``host:port`` by protocol. Raises RuntimeError (the agent killed) if it does not
    print its listeners."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lakelog.cli",
            "--store",
            store,
            *(["--conf", str(conf)] if conf is not None else []),
            "serve",
            *(arg for spec in listen for arg in ("--listen", spec)),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    bound: dict[str, str] = {}
    for _ in listen:
        line = proc.stdout.readline() if proc.stdout else ""
        found = re.search(r"on (\S+:\d+)(?: \((\w+)\))? ", line)
        if found is None:
            proc.kill()
            raise RuntimeError(f"lakelog serve did not start: {line!r}")
        bound[found.group(2) or "PLAINTEXT"] = found.group(1)
    return proc, bound


def stop_agent(proc: subprocess.Popen) -> None:
    """SIGTERM the agent; SIGKILL it if it has not exited within a minute."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def produce_throughput(
    bootstrap: str, topic: str, records: int, size: int, security: Mapping[str, str] | None = None
) -> float:
    """Records/s of one producer sending ``records`` records; ``security``: more client settings
    (a SASL_SSL listener's, say)."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000, **(security or {})}
    )
    value = b"x" * size
    failed = []

    def report(error, message):
        if error is not None:
            failed.append(error)

    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(600)
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} records failed, e.g. {failed[0]}")
    return records / elapsed


def fixed_rate_latency(
    bootstrap: str, topic: str, rate: int, seconds: float, size: int, security: Mapping[str, str] | None = None
) -> dict[str, float]:
    """Produce and end-to-end latency (ms) at ``rate`` records/s: p50 and p99 of each."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    security = dict(security or {})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "perf",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            **security,
        }
    )
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, high)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **security})  # librdkafka's linger.ms (5)
    sent: dict[bytes, float] = {}
    produce_ms: list[float] = []
    e2e_ms: list[float] = []
    total = int(rate * seconds)
    done = threading.Event()

    def consume() -> None:
        seen = 0
        while seen < total and not done.is_set():
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            started = sent.get(message.key())
            if started is not None:
                e2e_ms.append((time.perf_counter() - started) * 1000)
                seen += 1

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    padding = b"x" * max(0, size - 12)
    begin = time.perf_counter()
    for i in range(total):
        due = begin + i / rate
        while (wait := due - time.perf_counter()) > 0:
            time.sleep(min(wait, 0.001))  # not poll(): a busy client would starve the agent of CPU
        producer.poll(0)
        key = str(i).encode()
        now = time.perf_counter()
        sent[key] = now
        producer.produce(
            topic,
            padding,
            key=key,
            partition=0,
            on_delivery=lambda error, message, started=now: produce_ms.append((time.perf_counter() - started) * 1000),
        )
        producer.poll(0)
    producer.flush(120)
    reader.join(60)
    done.set()
    consumer.close()

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else float("nan")

    return {
        "produce_p50": pct(produce_ms, 50),
        "produce_p99": pct(produce_ms, 99),
        "e2e_p50": pct(e2e_ms, 50),
        "e2e_p99": pct(e2e_ms, 99),
    }


def fetch_throughput(bootstrap: str, topic: str) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "perf-fetch", "enable.auto.commit": False, "fetch.wait.max.ms": 50}
    )
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, low)])
    count = 0
    started = time.perf_counter()
    while count < high - low:
        count += sum(1 for m in consumer.consume(10_000, timeout=1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


@dataclass(frozen=True)
class ServeWorkload:
    """What ``lakelog perf serve`` runs on each side: ``records`` records of ``record_size`` bytes
    for throughput, ``rate`` records/s for ``seconds`` for latency, ``repeat`` interleaved runs,
    against a Kafka broker too unless not ``kafka``, temporary files under ``work_dir``."""

    records: int
    record_size: int
    rate: int
    seconds: float
    repeat: int
    kafka: bool
    work_dir: str | None


def perf_serve(workload: ServeWorkload, out: Callable[[str], None]) -> None:
    from benchmarks.scratch import scratch_dir
    from lakelog.store import Store

    records, record_size, rate, seconds = workload.records, workload.record_size, workload.rate, workload.seconds
    repeat, kafka, work_dir = workload.repeat, workload.kafka, workload.work_dir

    results: dict[str, list[dict[str, float]]] = {"lakelog": [], "kafka": []}
    broker = None
    with scratch_dir("serve", work_dir) as scratch:
        try:
            if kafka:
                from confluent_kafka.admin import AdminClient, NewTopic

                from benchmarks.kafka_reference import KafkaBroker

                broker = KafkaBroker().start()
            for run in range(repeat):
                store = f"{scratch}/store-{run}"
                Store.open(store).create_topic(TOPIC, partitions=1)
                agent, bound = start_agent(store)
                bootstrap = bound["PLAINTEXT"]
                try:
                    results["lakelog"].append(_measure(bootstrap, records, record_size, rate, seconds))
                finally:
                    stop_agent(agent)
                out(f"run {run + 1}: lakelog {_line(results['lakelog'][-1])}")
                if broker is not None:
                    topic = f"{TOPIC}-{run}"
                    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result()
                    results["kafka"].append(_measure(broker.bootstrap, records, record_size, rate, seconds, topic))
                    out(f"run {run + 1}: kafka   {_line(results['kafka'][-1])}")
        finally:
            if broker is not None:
                broker.stop()
    out(f"perf serve: {records:,} x {record_size} B, one partition, {repeat} interleaved run(s), medians")
    lake = _median(results["lakelog"])
    out(f"  lakelog serve: {_line(lake)}")
    if results["kafka"]:
        ref = _median(results["kafka"])
        out(f"  kafka 4.x:     {_line(ref)}")
        out(
            f"  ratios lakelog/kafka: produce {lake['produce_rps'] / ref['produce_rps']:.2f}, "
            f"fetch {lake['fetch_rps'] / ref['fetch_rps']:.2f}; "
            f"p99 produce {lake['produce_p99']:.1f} vs {ref['produce_p99']:.1f} ms"
        )


def _measure(
    bootstrap: str, records: int, size: int, rate: int, seconds: float, topic: str = TOPIC
) -> dict[str, float]:
    produced = produce_throughput(bootstrap, topic, records, size)
    latency = fixed_rate_latency(bootstrap, topic, rate, seconds, size)
    fetched = fetch_throughput(bootstrap, topic)
    return {"produce_rps": produced, "fetch_rps": fetched, **latency}


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def _line(r: dict[str, float]) -> str:
    return (
        f"produce {r['produce_rps']:,.0f} rec/s, fetch {r['fetch_rps']:,.0f} rec/s, "
        f"at fixed rate: produce p50/p99 {r['produce_p50']:.1f}/{r['produce_p99']:.1f} ms, "
        f"end-to-end p50/p99 {r['e2e_p50']:.1f}/{r['e2e_p99']:.1f} ms"
    )
