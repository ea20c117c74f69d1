"""``lakelog perf producer-perf``: Kafka's own ProducerPerformance (``kafka-producer-perf-test``)
against ``lakelog serve`` and against a real Kafka broker, interleaved.

The Java producer runs with its defaults (Kafka 4: ``enable.idempotence=true``, ``acks=all``,
``linger.ms=5``, ``batch.size=16384``) unless ``--producer-props`` says otherwise, one
partition, the same records on every side: so the figure is what a Java application with
default settings gets. The tool's own summary line is parsed (records/s, average and
percentile latencies, send to acknowledgement). Everything lives in a scratch directory this
tool removes; the broker is stopped by its PID. On lakelog's side only the agent and the tool
run (no broker idles beside them: the tool needs none to start, :func:`run_kafka_tool`).

Beside the broker's defaults (it acknowledges from the page cache) a second, durable baseline
runs unless ``--no-kafka-flush``: a topic with ``flush.messages=1`` (the topic-level
``log.flush.interval.messages``), an fsync of the log after every append, as lakelog's commit is
durable when acknowledged (:data:`benchmarks.kafka_reference.FLUSH_EVERY_MESSAGE`).

Every side gets the same warm-up: each run starts on a new agent over a new store or on a new
broker, and ``--warmup-records`` (the tool's own option, KIP-1052) leaves the first records of
each run out of the figures on all. One broker kept for every run would warm its JIT in the
runs before (measured, three 1M-record runs on one broker: 145k, 186k, 252k records/s; on a new
agent each: 86k, 81k, 84k) and be compared, warm, with an agent that just started. The sides'
order rotates from round to round (:func:`benchmarks.serve.side_order`).

On lakelog's side each run also says how much CPU the agent used while the tool ran, and how
much of it went to checkpoints -- its background threads (:mod:`benchmarks.agent_cpu`): a
tenth or more of a warm run's agent CPU while delta-rs wrote every checkpoint (reading every
commit's JSON again), a few hundredths since they are made from the one before.

Files created right after many were deleted cost more on ext4 without a journal (this
machine's root file system): when it allocates an inode the kernel skips those freed in the last
minute, six while their inode table block is not yet written back (``recently_deleted()`` in
fs/ext4/ialloc.c, RECENTCY_MIN and RECENTCY_DIRTY), one buffer lookup per inode skipped. The
agent creates three files per commit, the broker a few per run: measured after deleting a store
of ~12,000 files, creating a file took 780 us of CPU at first against 45 us once those were
reused, and a warm run's agent spent up to a third of its CPU in that search. Each run's store
is kept until the benchmark ends; start one a few minutes after deleting many files (a test
suite's, a previous run's).

The tool's steady-state figure counts from the moment the warm-up's last record was handed to
``send()``, so a side whose records wait longer for their acknowledgement (the 32 MB buffer is
full on every side) loses that wait from it. With a warm-up the tool also reports every second
(``--reporting-interval 1000``), and the median of the seconds that began once the warm-up's
records were acknowledged is reported beside it (:func:`rates_after`): acknowledgements a
second, whatever the latency.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence

from benchmarks.agent_cpu import AgentCpuSampler
from benchmarks.kafka_reference import KAFKA, KAFKA_FLUSH, RUN_CLASS_JVM_OPTIONS, broker_side, run_kafka_tool
from benchmarks.serve import side_order, start_agent, stop_agent

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
# The JVM kafka-producer-perf-test.sh starts the tool in: its own heap (KAFKA_HEAP_OPTS="-Xmx512M",
# not the 256M kafka-run-class.sh gives other tools) and kafka-run-class.sh's G1 options. With
# 256M the records waiting in the 32 MB buffer (each with its future and callback) kept the heap
# 60-75% full and the tool paused 20-45 ms three times a second (-Xlog:gc), on every side.
JVM_OPTIONS: tuple[str, ...] = ("-Xmx512m", *RUN_CLASS_JVM_OPTIONS)
TOPIC = "perf-producer"
LAKELOG = "lakelog serve"

# "1000000 records sent, 5421.08 records/sec (0.52 MB/sec), 19036.06 ms avg latency, 31671.00 ms max
# latency, 20948 ms 50th, 30691 ms 95th, 31401 ms 99th, 31645 ms 99.9th."; with --warmup-records a
# second line follows: "200000 steady state records sent, ..." (the records after the warm-up).
_SUMMARY = re.compile(
    r"(?P<sent>\d+) (?:steady state )?records sent, (?P<rps>[\d.]+) records/sec .*?, (?P<avg>[\d.]+) ms avg latency, "
    r"(?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th"
)


# A reporting window's line: "421057 records sent, 84211.4 records/sec (8.03 MB/sec), 1903.1 ms avg
# latency, 2954.0 ms max latency." (the records acknowledged in that window; no percentiles).
_WINDOW = re.compile(
    r"^(?P<sent>\d+) records sent, (?P<rps>[\d.]+) records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency\.$",
    re.MULTILINE,
)
WINDOW_MS = 1000


def rates_after(output: str, warmup_records: int) -> list[float]:
    """The records/s of ProducerPerformance's reporting windows that began after ``warmup_records``
    records were acknowledged (a window counts the acknowledgements within it), in order."""
    acknowledged, rates = 0, []
    for window in _WINDOW.finditer(output):
        if acknowledged >= warmup_records:
            rates.append(float(window["rps"]))
        acknowledged += int(window["sent"])
    return rates


def parse_summary(output: str) -> dict[str, float]:
    """The figures of ProducerPerformance's last summary line: the steady state's when the run
    had a warm-up. Raises ValueError if there is none (the tool failed: its output is in the
    message)."""
    summaries = list(_SUMMARY.finditer(output))
    if not summaries:
        raise ValueError(f"ProducerPerformance printed no summary:\n{output[-2000:]}")
    return {key: float(value) for key, value in summaries[-1].groupdict().items()}


def perf_producer_performance(
    *,
    records: int,
    record_size: int,
    repeat: int,
    warmup_records: int = 0,
    producer_props: Sequence[str],
    kafka: bool,
    work_dir: str | None,
    out: Callable[[str], None],
    kafka_flush: bool = True,
) -> dict[str, dict[str, float]]:
    """Run ProducerPerformance ``repeat`` times on each side (see the module docstring), print
    each run and the medians with the ratios to each broker side; returns the medians by side."""
    from benchmarks.scratch import scratch_dir
    from lakelog.store import Store

    sides = [LAKELOG, *(([KAFKA, KAFKA_FLUSH] if kafka_flush else [KAFKA]) if kafka else [])]
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    warmup = ("--warmup-records", str(warmup_records), "--reporting-interval", str(WINDOW_MS)) if warmup_records else ()

    def run(bootstrap: str, topic: str) -> dict[str, float]:
        done = run_kafka_tool(
            PRODUCER_PERFORMANCE,
            *("--topic", topic, "--num-records", str(records), "--record-size", str(record_size), *warmup),
            *("--throughput", "-1", "--command-property", f"bootstrap.servers={bootstrap}", *producer_props),
            timeout_s=3600,
            jvm_options=JVM_OPTIONS,
        )
        figures = parse_summary(done.stdout)
        if warmup_records:
            after = rates_after(done.stdout, warmup_records)
            figures["window_rps"] = statistics.median(after) if after else 0.0
        return figures

    with scratch_dir("producer-perf", work_dir) as scratch:
        for attempt in range(repeat):
            for side in side_order(sides, attempt):
                # A new agent or a new broker for every run; nothing else runs beside either (no
                # idle broker beside the agent: the tool needs none to start).
                if side == LAKELOG:
                    store = f"{scratch}/store-{attempt}"
                    Store.open(store).create_topic(TOPIC, partitions=1)
                    agent, bound = start_agent(store)
                    try:
                        sampler = AgentCpuSampler(agent.pid).start()
                        try:
                            figures = run(bound["PLAINTEXT"], TOPIC)
                        finally:
                            cpu = sampler.stop()
                        if cpu is not None:
                            figures |= {"agent_cpu_s": cpu.total_s, "background_cpu_s": cpu.background_s}
                        results[side].append(figures)
                    finally:
                        stop_agent(agent)
                else:
                    with broker_side(side, TOPIC) as broker:
                        results[side].append(run(broker.bootstrap, TOPIC))
                out(f"run {attempt + 1}: {side:<13} {_line(results[side][-1])}")
    props = " ".join(producer_props) or "the Java producer's defaults (idempotent, acks=all)"
    out(
        f"perf producer-perf: Kafka's ProducerPerformance, {records:,} x {record_size} B, one partition, "
        f"{props}; {repeat} interleaved run(s) per side, each on a new agent or a new broker, medians"
        + (f"; the first {warmup_records:,} records of each run are its warm-up, not counted" if warmup_records else "")
    )
    medians = {side: _median(runs) for side, runs in results.items()}
    for side, figures in medians.items():
        out(f"  {side + ':':<14} {_line(figures)}")
    lake = medians[LAKELOG]
    for ref_side in sides[1:]:
        ref = medians[ref_side]
        ratio, p99 = lake["rps"] / ref["rps"], lake["p99"] / ref["p99"]
        windows = ""
        if lake.get("window_rps") and ref.get("window_rps"):
            windows = f"; seconds after the warm-up {lake['window_rps'] / ref['window_rps']:.2f}"
        out(f"  ratio lakelog/{ref_side}: throughput {ratio:.2f}, p99 latency {p99:.1f}x{windows}")
    return medians


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def _line(r: dict[str, float]) -> str:
    latency = f"latency avg {r['avg']:.0f} ms, p50/p99 {r['p50']:.0f}/{r['p99']:.0f} ms"
    line = f"{r['sent']:,.0f} records, {r['rps']:,.0f} rec/s, {latency}"
    if "window_rps" in r:
        seconds = f"{r['window_rps']:,.0f} rec/s" if r["window_rps"] else "none (no whole second after it)"
        line += f"; seconds after the warm-up: median {seconds}"
    if "agent_cpu_s" in r:
        share = r["background_cpu_s"] / r["agent_cpu_s"] if r["agent_cpu_s"] > 0 else 0.0
        line += f"; agent CPU {r['agent_cpu_s']:.1f} s, of it checkpoints {r['background_cpu_s']:.1f} s ({share:.0%})"
    return line
