"""``lakelog perf streams``: Kafka Streams' word count under ``exactly_once_v2``, end to end,
against ``lakelog serve`` and against a real Kafka broker, rounds interleaved.

One agent over a fresh store and one broker (a fresh log directory) serve the whole run. Each
round, on each side: new topics (``partitions`` input partitions, as many output partitions),
the same ``lines`` produced into the input beforehand (confluent-kafka, not timed), then a new
application (a new ``application.id`` and state directory) of benchmarks/java's ``WordCount``:
lines split into words, re-keyed by word through a repartition topic, counted in a state
store with a changelog, each new count written to the output. Streams' settings are its
defaults on both sides apart from ``processing.guarantee=exactly_once_v2`` (so
``commit.interval.ms`` is EOS' 100 ms: every 100 ms a transaction per stream thread commits
the input offsets, the repartition and changelog records and the counts) and
``replication.factor=1``.

The figure: the time from the application's JVM launch until a read_committed consumer
tailing the output (started before the application) has seen the final count of every word,
i.e. until the last committed transaction holds the whole input's counts; throughput is the
lines over that time. Start-up (JVM, group join, InitProducerId, restoring nothing) is in it
on both sides; the time until the application reported RUNNING is printed beside it. A
warm-up round of ``warmup_lines`` on each side comes first and is not counted.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.serve import start_agent, stop_agent

TARGET_RATIO = 0.3  # lakelog's throughput at least 0.3x the broker's
# A JVM sized for throughput, the same on both sides (the tests' JVM_OPTIONS are for many small ones).
STREAMS_JVM_OPTIONS: tuple[str, ...] = ("-Xms512m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
POLL_S = 0.2


@dataclass(frozen=True)
class Workload:
    """The lines every round produces and the count of each word they hold when all are counted."""

    lines: list[bytes]
    counts: dict[str, int]


def workload(lines: int, words_per_line: int, vocabulary: int, seed: int = 31) -> Workload:
    """``lines`` lines of ``words_per_line`` words drawn (seeded) from ``vocabulary`` words, and
    the words' counts."""
    words = [f"w{i:05d}" for i in range(vocabulary)]
    drawn = random.Random(seed).choices(words, k=lines * words_per_line)
    text = [" ".join(drawn[i : i + words_per_line]) for i in range(0, len(drawn), words_per_line)]
    return Workload([line.encode() for line in text], dict(Counter(drawn)))


@dataclass(frozen=True)
class RoundResult:
    seconds: float  # launch to final counts
    running_s: float  # launch to the first RUNNING
    lines: int

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds


class CountsTail:
    """A read_committed consumer of every partition of the output topic from its start, keeping
    the latest count of each word; :meth:`done` once every word has its final count (counts
    only grow, so a word at its final count stays there)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, expected: dict[str, int]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.expected = expected
        self.latest: dict[str, int] = {}
        self._final = 0
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"perf-streams-tail-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "log_level": 0,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])

    def poll(self, timeout_s: float) -> None:
        for message in self.consumer.consume(10_000, timeout_s):
            if message.error() is not None:
                continue
            word, count = message.key().decode(), int.from_bytes(message.value(), "big", signed=True)
            before = self.latest.get(word)
            self.latest[word] = count
            final = self.expected.get(word)
            if count == final and before != final:
                self._final += 1

    def done(self) -> bool:
        return self._final == len(self.expected)

    def close(self) -> None:
        self.consumer.close()


def produce_lines(bootstrap: str, topic: str, lines: Sequence[bytes]) -> None:
    """Send every line (keyless, idempotent, acks=all) and wait until each is acknowledged.
    Raises RuntimeError naming the first delivery error."""
    from confluent_kafka import Producer

    failed: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 0,
        }
    )

    def delivered(err: object, _message: object) -> None:
        if err is not None:
            failed.append(err)

    for line in lines:
        while True:
            try:
                producer.produce(topic, value=line, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(600) != 0 or failed:
        raise RuntimeError(f"producing the lines into {topic}: {failed[:3] or 'not acknowledged within 600 s'}")


def run_round(
    bootstrap: str, name: str, load: Workload, partitions: int, workdir: Path, timeout_s: float
) -> RoundResult:
    """One side's round: topics ``<name>-lines``/``<name>-counts``, the lines produced, then the
    application timed from its launch until the output holds the final counts. Raises
    RuntimeError (the application's log tail in it) if it stopped or did not get there within
    ``timeout_s``."""
    from benchmarks.java_programs import WORD_COUNT, JavaProgram
    from benchmarks.kafka_reference import create_topic

    source, sink = f"{name}-lines", f"{name}-counts"
    for topic in (source, sink):
        create_topic(bootstrap, topic, partitions=partitions)
    produce_lines(bootstrap, source, load.lines)
    tail = CountsTail(bootstrap, sink, partitions, load.counts)
    settings = {
        "bootstrap.servers": bootstrap,
        "application.id": f"{name}-app",
        "input": source,
        "output": sink,
        "processing.guarantee": "exactly_once_v2",
        "replication.factor": "1",
        "state.dir": str(workdir / f"{name}-state"),
    }
    app = JavaProgram(WORD_COUNT, workdir, name, settings, jvm_options=STREAMS_JVM_OPTIONS)
    running_at: float | None = None
    try:
        while not tail.done():
            tail.poll(POLL_S)
            if running_at is None and any(e[:1] == ["RUNNING"] for e in app.events("STATE")):
                running_at = time.monotonic()
            if app.events("FATAL") or app.proc.poll() is not None:
                raise RuntimeError(str(app.fail("stopped before the final counts")))
            if time.monotonic() - app.started > timeout_s:
                missing = len(load.counts) - sum(tail.latest.get(w) == n for w, n in load.counts.items())
                raise RuntimeError(str(app.fail(f"{missing} words short of their final count after {timeout_s:.0f}s")))
        finished = time.monotonic()
    except BaseException:
        app.kill()
        raise
    finally:
        tail.close()
    code = app.stop()
    if code != 0:
        raise RuntimeError(str(app.fail("did not stop cleanly")))
    running_s = (running_at if running_at is not None else finished) - app.started
    return RoundResult(finished - app.started, running_s, len(load.lines))


def perf_streams(
    *,
    lines: int,
    words_per_line: int,
    vocabulary: int,
    partitions: int,
    rounds: int,
    warmup_lines: int,
    kafka: bool,
    work_dir: str | None,
    out: Callable[[str], None],
) -> dict[str, float]:
    """Run the warm-up and the rounds, print each figure, the medians and the ratio; returns the
    median lines/s by side (and ``ratio`` when both ran). Raises RuntimeError when a round's
    application failed or timed out."""
    from benchmarks.kafka_reference import KafkaBroker
    from benchmarks.scratch import scratch_dir
    from lakelog.store import Store

    load = workload(lines, words_per_line, vocabulary)
    warmup = workload(warmup_lines, words_per_line, vocabulary, seed=32) if warmup_lines else None
    timeout_s = 300 + lines / 500  # far beyond either side at 500 lines/s
    results: dict[str, list[RoundResult]] = {"lakelog": [], "kafka": []}
    with scratch_dir("streams", work_dir) as scratch:
        workdir = Path(scratch)
        store = f"{scratch}/store"
        Store.open(store).close()
        agent, bound = start_agent(store)
        broker = None
        try:
            broker = KafkaBroker().start() if kafka else None
            sides = {"lakelog": bound["PLAINTEXT"], **({"kafka": broker.bootstrap} if broker else {})}
            if warmup is not None:
                for side, bootstrap in sides.items():
                    took = run_round(bootstrap, f"{side}-warmup", warmup, partitions, workdir, timeout_s)
                    out(f"warm-up: {side:<7} {_line(took)} (not counted)")
            for attempt in range(rounds):
                for side, bootstrap in sides.items():
                    took = run_round(bootstrap, f"{side}-{attempt}", load, partitions, workdir, timeout_s)
                    results[side].append(took)
                    out(f"round {attempt + 1}: {side:<7} {_line(took)}")
        finally:
            if broker is not None:
                broker.stop()
            stop_agent(agent)
    load_average = "/".join(f"{x:.1f}" for x in os.getloadavg())
    out(
        f"perf streams: Kafka Streams 4.4 word count, exactly_once_v2 (commit.interval.ms 100), {lines:,} lines of "
        f"{words_per_line} words ({vocabulary:,} distinct), {partitions} input partitions; time from the "
        f"application's launch until a read_committed reader of the output has every word's final count; "
        f"{rounds} interleaved round(s), medians; load average {load_average}"
    )
    medians: dict[str, float] = {}
    for side, label in (("lakelog", "lakelog serve"), ("kafka", "kafka 4.x")):
        if results[side]:
            medians[side] = statistics.median(r.lines_per_s for r in results[side])
            seconds = statistics.median(r.seconds for r in results[side])
            running = statistics.median(r.running_s for r in results[side])
            out(f"  {label + ':':<14} {medians[side]:,.0f} lines/s ({seconds:.1f} s; RUNNING after {running:.1f} s)")
    if "kafka" in medians:
        medians["ratio"] = medians["lakelog"] / medians["kafka"]
        verdict = "meets" if medians["ratio"] >= TARGET_RATIO else "BELOW"
        out(f"  ratio lakelog/kafka: {medians['ratio']:.2f} ({verdict} the {TARGET_RATIO}x target)")
    return medians


def _line(r: RoundResult) -> str:
    return f"{r.lines_per_s:,.0f} lines/s ({r.seconds:.1f} s, RUNNING after {r.running_s:.1f} s)"
