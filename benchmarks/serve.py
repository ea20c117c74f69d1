"""``lakelog perf serve``: one Kafka client against ``lakelog serve`` and against a real Kafka broker.

The same client (confluent-kafka, librdkafka), the same records and the same
topic (one partition) on both sides, interleaved per repetition:

* produce throughput: ``records`` records of ``record_size`` bytes from one
  producer (``acks=all``, ``linger.ms=5``), from the first ``produce()`` to the
  end of ``flush()``;
* produce and end-to-end latency at a fixed rate (``rate`` records/s for
  ``seconds`` after ``warmup_seconds`` at that rate whose records are not counted,
  the client's default ``linger.ms``): produce = ``produce()`` to
  its delivery report; end to end = ``produce()`` to a consumer
  (``fetch.wait.max.ms=10``) polling the record; seen after ack = the delivery
  report to the consumer polling it (the fetch side's share); p50 and p99;
* fetch throughput: one consumer reading the partition from offset 0 to its
  end.

The agent is ``lakelog serve`` in a process of its own over a fresh local
store, the broker :class:`benchmarks.kafka_reference.KafkaBroker`, each new for every round
of its side (the same start and warm-up on every side, nothing idling beside another). The broker
acknowledges from the page cache by default; lakelog's commit is durable when
it lands, so the broker is measured twice: with its defaults, and on a topic
with ``flush.messages=1`` (the topic-level ``log.flush.interval.messages``:
an fsync of the log after every append, Kafka's topic configs), the durable
baseline. ``agents`` adds the agents of other lakelog checkouts (main beside a
branch, say) as sides of their own. Each round measures every side once, the
side that goes first rotating from round to round (interleaved: a shared
machine's load falls on every side alike); each side's figures carry the load
average when they were taken. Everything lives in a temporary directory this
tool removes.
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
from typing import Any

from benchmarks.kafka_reference import KAFKA, KAFKA_FLUSH, broker_side

ROOT = Path(__file__).resolve().parents[1]
# Seconds at the fixed rate before the latency run's records are counted (see fixed_rate_latency).
WARMUP_S = 2.0
TOPIC = "perf-serve"


def start_agent(
    store: str, listen: Sequence[str] = ("127.0.0.1:0",), conf: Path | None = None, checkout: Path = ROOT
) -> tuple[subprocess.Popen, dict[str, str]]:
    """``lakelog serve`` over ``store`` in a process of its own, with ``listen`` (Kafka's
    listener syntax) and the settings file ``conf``, run from the lakelog source tree
    ``checkout`` (default: this one). Returns the process and each listener's bound
    ``host:port`` by protocol. Raises RuntimeError (the agent killed) if it does not print its
    listeners."""
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
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
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
    bootstrap: str,
    topic: str,
    rate: int,
    seconds: float,
    size: int,
    security: Mapping[str, str] | None = None,
    warmup_s: float = WARMUP_S,
) -> dict[str, float]:
    """Produce and end-to-end latency (ms) at ``rate`` records/s: p50 and p99 of each, over the
    records sent in ``seconds`` after ``warmup_s`` seconds at the same rate (sent, acknowledged
    and consumed like the others, not counted): a steady state's figures, on every side alike.
    The first second of a fresh agent pays its first requests' imports and its first commit
    (measured: produce p99 413 ms in the first second, 40-52 ms in each later one), which would
    otherwise be the p99 of a 20-second run; a fresh client pays its first connection and
    metadata on either side."""
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
    high = _end_offset(consumer, TopicPartition(topic, 0))
    consumer.assign([TopicPartition(topic, 0, high)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **security})  # librdkafka's linger.ms (5)
    sent: dict[bytes, float] = {}
    produce_ms: list[float] = []
    e2e_ms: list[float] = []
    # Per record: when its delivery report came and when the consumer polled it (the fetch
    # side's share of end to end: seen - acknowledged).
    acked: dict[bytes, float] = {}
    seen_at: dict[bytes, float] = {}
    warm = int(rate * warmup_s)
    total = warm + int(rate * seconds)
    done = threading.Event()

    def consume() -> None:
        seen = 0
        while seen < total and not done.is_set():
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            started = sent.get(message.key())
            if started is not None:
                now = time.perf_counter()
                if int(message.key()) >= warm:
                    e2e_ms.append((now - started) * 1000)
                    seen_at[message.key()] = now
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
            on_delivery=lambda error, message, started=now, key=key, counted=i >= warm: (
                _acked(produce_ms, acked, key, started) if counted else None
            ),
        )
        producer.poll(0)
    producer.flush(120)
    reader.join(60)
    done.set()
    consumer.close()

    after_ack = [(seen_at[k] - acked[k]) * 1000 for k in seen_at.keys() & acked.keys()]

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else float("nan")

    return {
        "produce_p50": pct(produce_ms, 50),
        "produce_p99": pct(produce_ms, 99),
        "e2e_p50": pct(e2e_ms, 50),
        "e2e_p99": pct(e2e_ms, 99),
        "after_ack_p50": pct(after_ack, 50),
        "after_ack_p99": pct(after_ack, 99),
    }


def _end_offset(consumer: Any, tp: Any) -> int:
    """The partition's end offset, asked again while the answer is retriable (a new topic's
    leader still being elected) for up to 60 s."""
    from confluent_kafka import KafkaError, KafkaException

    electing = {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
    }
    deadline = time.monotonic() + 60
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=30)[1]
        except KafkaException as exc:
            error = exc.args[0]
            if time.monotonic() > deadline or not (error.retriable() or error.code() in electing):
                raise
            time.sleep(0.2)


def _acked(produce_ms: list[float], acked: dict[bytes, float], key: bytes, started: float) -> None:
    now = time.perf_counter()
    produce_ms.append((now - started) * 1000)
    acked[key] = now


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
    for throughput (skipped unless ``throughput``), ``rate`` records/s for ``seconds`` for
    latency, ``repeat`` interleaved rounds, against a Kafka broker too unless not ``kafka`` (and
    on a flush.messages=1 topic of it unless not ``kafka_flush``), the agents of the lakelog
    checkouts ``agents`` (label, path) beside this one's, temporary files under ``work_dir``."""

    records: int
    record_size: int
    rate: int
    seconds: float
    repeat: int
    kafka: bool
    work_dir: str | None
    kafka_flush: bool = True
    agents: tuple[tuple[str, str], ...] = ()
    throughput: bool = True
    warmup_seconds: float = WARMUP_S


def side_order(sides: Sequence[str], round_: int) -> list[str]:
    """The order ``sides`` are measured in round ``round_``: rotated by one each round, so that
    every side goes first (and follows each other) as often as the rounds allow."""
    shift = round_ % len(sides) if sides else 0
    return [*sides[shift:], *sides[:shift]]


def perf_serve(workload: ServeWorkload, out: Callable[[str], None]) -> dict[str, dict[str, float]]:
    """Run ``workload`` (see the module docstring); print each side's figures per round and
    their medians with the lakelog/Kafka ratios. Returns the medians by side."""
    from benchmarks.scratch import scratch_dir
    from lakelog.store import Store

    agents = {"lakelog": str(ROOT), **dict(workload.agents)}
    brokers = [KAFKA, KAFKA_FLUSH] if workload.kafka_flush else [KAFKA]
    sides = [*agents, *(brokers if workload.kafka else [])]
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    with scratch_dir("serve", workload.work_dir) as scratch:
        for run in range(workload.repeat):
            for side in side_order(sides, run):
                # A new agent or a new broker for every round of a side, so every side starts as
                # cold and warms up as long (one broker kept for every round would be warmed by the
                # rounds before), and nothing else runs beside either.
                if side in agents:
                    store = f"{scratch}/store-{run}-{sides.index(side)}"
                    Store.open(store).create_topic(TOPIC, partitions=1)
                    agent, bound = start_agent(store, checkout=Path(agents[side]))
                    try:
                        results[side].append(_measure(bound["PLAINTEXT"], workload))
                    finally:
                        stop_agent(agent)
                else:
                    with broker_side(side, TOPIC) as broker:
                        results[side].append(_measure(broker.bootstrap, workload, TOPIC))
                out(f"round {run + 1}: {side:<16} {_line(results[side][-1])}")
    what = f"{workload.records:,} x {workload.record_size} B, " if workload.throughput else ""
    out(
        f"perf serve: {what}{workload.rate:,} rec/s for {workload.seconds:g} s after "
        f"{workload.warmup_seconds:g} s of warm-up (not counted), one partition, "
        f"{workload.repeat} interleaved round(s), medians"
    )
    medians = {side: _median(runs) for side, runs in results.items()}
    for side, figures in medians.items():
        out(f"  {side:<16} {_line(figures)}")
    for side in agents:
        for ref in (KAFKA, KAFKA_FLUSH):
            if ref in medians:
                out(f"  ratios {side}/{ref}: {_ratios(medians[side], medians[ref])}")
    return medians


def _measure(bootstrap: str, workload: ServeWorkload, topic: str = TOPIC) -> dict[str, float]:
    size = workload.record_size
    load = os.getloadavg()[0]
    figures: dict[str, float] = {}
    if workload.throughput:
        figures["produce_rps"] = produce_throughput(bootstrap, topic, workload.records, size)
    figures.update(
        fixed_rate_latency(bootstrap, topic, workload.rate, workload.seconds, size, warmup_s=workload.warmup_seconds)
    )
    if workload.throughput:
        figures["fetch_rps"] = fetch_throughput(bootstrap, topic)
    figures["load"] = (load + os.getloadavg()[0]) / 2
    return figures


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]} if runs else {}


def _line(r: dict[str, float]) -> str:
    """One side's figures, the same columns for every side."""
    throughput = (
        f"produce {r['produce_rps']:,.0f} rec/s, fetch {r['fetch_rps']:,.0f} rec/s, " if "produce_rps" in r else ""
    )
    return (
        f"{throughput}at fixed rate: produce p50/p99 {r['produce_p50']:.1f}/{r['produce_p99']:.1f} ms, "
        f"end-to-end p50/p99 {r['e2e_p50']:.1f}/{r['e2e_p99']:.1f} ms, "
        f"seen after ack p50/p99 {r['after_ack_p50']:.1f}/{r['after_ack_p99']:.1f} ms, load {r['load']:.1f}"
    )


def _ratios(lake: dict[str, float], ref: dict[str, float]) -> str:
    keys = [k for k in ("produce_rps", "fetch_rps", "produce_p50", "produce_p99", "e2e_p50", "e2e_p99") if k in lake]
    # (seen after ack is left out: it is near zero, and negative when a consumer polls a record
    # before its producer's delivery report, so a ratio of it says nothing)
    return ", ".join(f"{k} {lake[k] / ref[k]:.2f}" if ref.get(k) else f"{k} -" for k in keys)
