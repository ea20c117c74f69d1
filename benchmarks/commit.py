"""``lakelog perf commit``: what one commit costs, in figures, next to its baselines.

Every section runs in a temporary directory this tool creates and removes;
lakelog and its baseline run in the same process (or the same kind of
process), interleaved round by round, on the same disk, with the same
checkpoint interval and the same warm-up:

* ``dir-sync``: one-record commits acknowledged through the producer with
  the directory syncs that make them survive a power loss (``_delta_log/``
  after the commit file is linked, a data file's directory) against the same
  commits without them (:func:`engine.storage.object_store.unsynced_directories`, never a
  setting), alternating in rounds in one store: p50/p99 of each and the ratio;
* ``latency``: one-record commits acknowledged through the producer
  (``linger.ms=0``) against delta-rs appending one row (``write_deltalake``,
  a blind append) to a Delta table with the log table's schema,
  partitioning and ``delta.checkpointInterval``;
* ``throughput``: records x bytes into 8 partitions through ``send_batch``
  (and, for reference, ``send`` per record) against pyarrow's ``write_table``
  of the same rows, one file per partition, to the same disk;
* ``contention``: N processes appending 100-record batches to one
  partition: aggregate acknowledged records/s, batch latency p50/p99, and
  how many deliveries timed out at default settings; with ``--kafka`` beside
  as many confluent-kafka processes on a broker topic with Kafka's defaults and
  on one with ``flush.messages=1`` (the durable baseline);
* ``first-ack``: from starting ``python -c`` to the first acknowledged
  record in a process that never imports Spark;
* ``growth``: one-record commit latency and a consumer's poll at a small
  and a large number of versions in the log, in the process that followed
  the log and in a fresh one.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.kafka_reference import FLUSH_EVERY_MESSAGE, KAFKA, KAFKA_FLUSH, create_topic

SECTIONS = ("latency", "dir-sync", "throughput", "contention", "first-ack", "growth")
ROOT = Path(__file__).resolve().parents[1]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def random_values(count: int, size: int, seed: int = 7) -> pa.Array:
    """``count`` distinct ``size``-byte values (random bytes: nothing compresses away)."""
    raw = np.random.default_rng(seed).integers(0, 256, count * size, dtype=np.uint8)
    offsets = np.arange(0, count * size + 1, size, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(raw.tobytes())])


def _store(path: str, partitions: int = 1, topic: str = "t"):
    from lakelog.store import Store

    store = Store.open(path)
    store.create_topic(topic, partitions=partitions)
    return store


# -- latency ---------------------------------------------------------------------


def latency(work: str, commits: int, out: Callable[[str], None]) -> dict[str, float]:
    from deltalake import write_deltalake

    from lakelog.store import TABLE_PROPERTIES

    store = _store(f"{work}/latency-store")
    plain = f"{work}/latency-delta-rs"
    now = int(time.time() * 1000)

    def row(i: int) -> pa.Table:
        return pa.table(
            {
                "topic": ["t"],
                "partition": pa.array([0], pa.int32()),
                "offset": pa.array([i], pa.int64()),
                "timestamp": pa.array([now * 1000], pa.timestamp("us", tz="UTC")),
                "value": pa.array([b"x" * 100], pa.binary()),
            }
        )

    interval = {"delta.checkpointInterval": TABLE_PROPERTIES["delta.checkpointInterval"]}
    write_deltalake(plain, row(0), partition_by=["topic", "partition"], configuration=interval)
    ours: list[float] = []
    theirs: list[float] = []
    with store.producer(linger_ms=0, client_id="perf-latency") as producer:
        for i in range(10):  # warm-up, both sides
            producer.send("t", b"x" * 100, partition=0).get()
            write_deltalake(plain, row(i), mode="append")
        for i in range(commits):
            started = time.perf_counter()
            producer.send("t", b"x" * 100, partition=0).get()
            ours.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            write_deltalake(plain, row(i), mode="append")
            theirs.append((time.perf_counter() - started) * 1000)
    figures = {
        "p50_ms": percentile(ours, 0.5),
        "p99_ms": percentile(ours, 0.99),
        "delta_rs_p50_ms": percentile(theirs, 0.5),
        "delta_rs_p99_ms": percentile(theirs, 0.99),
    }
    out(
        f"latency: {commits} one-record commits, acknowledged: lakelog p50 {figures['p50_ms']:.1f} ms, "
        f"p99 {figures['p99_ms']:.1f} ms; delta-rs blind append p50 {figures['delta_rs_p50_ms']:.1f} ms, "
        f"p99 {figures['delta_rs_p99_ms']:.1f} ms; p50 ratio lakelog/delta-rs "
        f"{figures['p50_ms'] / figures['delta_rs_p50_ms']:.2f}"
    )
    return figures


# -- directory syncs ---------------------------------------------------------------

DIR_SYNC_ROUND = 20  # commits per side and round


def dir_sync(work: str, commits: int, out: Callable[[str], None]) -> dict[str, float]:
    from lakelog.engine.storage import object_store

    store = _store(f"{work}/dir-sync-store")
    synced: list[float] = []
    unsynced: list[float] = []
    with store.producer(linger_ms=0, client_id="perf-dir-sync") as producer:

        def one() -> float:
            started = time.perf_counter()
            producer.send("t", b"x" * 100, partition=0).get()
            return (time.perf_counter() - started) * 1000

        for _ in range(10):  # warm-up
            one()
        rounds = max(1, commits // DIR_SYNC_ROUND)
        for r in range(rounds):
            # Alternate which side goes first, so neither always follows the other's flush.
            for side in ("synced", "unsynced") if r % 2 == 0 else ("unsynced", "synced"):
                if side == "synced":
                    synced.extend(one() for _ in range(DIR_SYNC_ROUND))
                else:
                    with object_store.unsynced_directories():
                        unsynced.extend(one() for _ in range(DIR_SYNC_ROUND))
    figures = {
        "p50_ms": percentile(synced, 0.5),
        "p99_ms": percentile(synced, 0.99),
        "unsynced_p50_ms": percentile(unsynced, 0.5),
        "unsynced_p99_ms": percentile(unsynced, 0.99),
    }
    figures["p50_ratio"] = figures["p50_ms"] / figures["unsynced_p50_ms"]
    figures["p99_ratio"] = figures["p99_ms"] / figures["unsynced_p99_ms"]
    out(
        f"dir-sync: {len(synced)} one-record commits per side, acknowledged, interleaved in rounds of "
        f"{DIR_SYNC_ROUND}: with directory syncs p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms; "
        f"without p50 {figures['unsynced_p50_ms']:.2f} ms, p99 {figures['unsynced_p99_ms']:.2f} ms; ratio "
        f"p50 {figures['p50_ratio']:.2f}, p99 {figures['p99_ratio']:.2f} (target p50 <= 1.5)"
    )
    return figures


# -- throughput ----------------------------------------------------------------------


def _log_rows(values: pa.Array, partition: int, first: int, now_ms: int) -> pa.Table:
    """The rows a data file of one partition holds (the log table's file columns)."""
    from lakelog.engine.schema import HEADERS_ARROW

    n = len(values)
    return pa.table(
        {
            "offset": pa.array(np.arange(first, first + n), pa.int64()),
            "timestamp": pa.array(np.full(n, now_ms * 1000), pa.timestamp("us", tz="UTC")),
            "timestamp_type": pa.array(np.zeros(n, np.int32)),
            "key": pa.nulls(n, pa.binary()),
            "value": values,
            "headers": pa.nulls(n, HEADERS_ARROW),
            "producer_id": pa.array(np.full(n, 1, np.int64)),
            "producer_epoch": pa.array(np.zeros(n, np.int32)),
            "sequence": pa.array(np.arange(n, dtype=np.int32)),
        }
    )


def throughput(
    work: str, records: int, size: int, rounds: int, out: Callable[[str], None], bootstrap: str | None = None
) -> dict[str, float]:
    partitions = 8
    store = _store(f"{work}/throughput-store", partitions)
    values = random_values(records, size)
    per = records // partitions
    slices = [values.slice(p * per, per) for p in range(partitions)]
    now = int(time.time() * 1000)
    ours, theirs = [], []
    sample = min(records, 200_000)
    sample_values = values.slice(0, sample).to_pylist()
    sends, produces, polls, kafka_polls = [], [], [], []
    with store.producer(linger_ms=0, client_id="perf-throughput") as producer:
        producer.send_batch("t", values.slice(0, 1000), partition=0).get()  # warm-up
        pq.write_table(_log_rows(values.slice(0, 1000), 0, 0, now), f"{work}/warm.parquet")
        for r in range(rounds):
            started = time.perf_counter()
            futures = [producer.send_batch("t", slices[p], partition=p) for p in range(partitions)]
            for future in futures:
                future.get()
            ours.append(time.perf_counter() - started)
            directory = f"{work}/pyarrow-{r}"
            os.makedirs(directory)
            started = time.perf_counter()
            for p in range(partitions):
                pq.write_table(_log_rows(slices[p], p, r * per, now), f"{directory}/part-{p}.parquet")
            theirs.append(time.perf_counter() - started)
            shutil.rmtree(directory)
        # Per-record loops, Kafka's way (one call per record, acknowledged by a flush), round by
        # round beside confluent-kafka's own loops against the broker when there is one.
        kafka = _KafkaLoops(bootstrap, partitions) if bootstrap else None
        for _ in range(rounds if kafka else 1):
            sends.append(_per_record_send(producer, sample_values, partitions))
            polls.append(_per_record_poll(store, sample))
            if kafka:
                produces.append(kafka.produce(sample_values))
                kafka_polls.append(kafka.poll(sample))
    mb = records * size / 2**20
    ours_rate, theirs_rate = records / statistics.median(ours), records / statistics.median(theirs)
    per_record, polled = statistics.median(sends), statistics.median(polls)
    out(
        f"throughput: {records:,} x {size} B into {partitions} partitions, median of {rounds}: lakelog send_batch "
        f"{ours_rate:,.0f} rec/s ({mb / statistics.median(ours):.0f} MB/s); pyarrow write_table of the same rows "
        f"{theirs_rate:,.0f} rec/s; ratio {ours_rate / theirs_rate:.2f}. Per-record send(): {per_record:,.0f} rec/s "
        f"(ratio {per_record / theirs_rate:.2f}); per-record poll() of as many: {polled:,.0f} rec/s"
    )
    figures = {"send_batch_rps": ours_rate, "pyarrow_rps": theirs_rate, "send_rps": per_record, "poll_rps": polled}
    if kafka:
        figures["kafka_produce_rps"] = statistics.median(produces)
        figures["kafka_poll_rps"] = statistics.median(kafka_polls)
        out(
            f"throughput: per-record loops of {sample:,} records, {rounds} interleaved rounds, medians: lakelog send() "
            f"{per_record:,.0f} rec/s vs confluent-kafka produce() -> broker {figures['kafka_produce_rps']:,.0f} "
            f"(ratio {per_record / figures['kafka_produce_rps']:.2f}, target >= 1); lakelog poll() {polled:,.0f} "
            f"rec/s vs confluent-kafka poll() {figures['kafka_poll_rps']:,.0f} "
            f"(ratio {polled / figures['kafka_poll_rps']:.2f}, target >= 2)"
        )
    return figures


def _per_record_send(producer, values: list, partitions: int) -> float:
    """Records a second through ``Producer.send()`` one record at a time, all acknowledged."""
    started = time.perf_counter()
    for i, value in enumerate(values):
        producer.send("t", value, partition=i % partitions)
    producer.flush()
    return len(values) / (time.perf_counter() - started)


class _KafkaLoops:
    """confluent-kafka's per-record loops against a broker: ``produce()`` per record then a
    flush (acks=all, idempotent, as lakelog's producer), and ``poll()`` per message from the
    beginning of the records they produced -- what lakelog's send() and poll() are set beside."""

    def __init__(self, bootstrap: str, partitions: int) -> None:
        from confluent_kafka import Producer

        self._bootstrap, self._partitions = bootstrap, partitions
        self._topic = f"perf-commit-{os.getpid()}-{time.monotonic_ns()}"
        create_topic(bootstrap, self._topic, partitions=partitions)
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        )
        self._producer.produce(self._topic, b"warm-up", partition=0)
        self._producer.flush(60)

    def produce(self, values: list) -> float:
        producer, topic, partitions = self._producer, self._topic, self._partitions
        started = time.perf_counter()
        for i, value in enumerate(values):
            while True:
                try:
                    producer.produce(topic, value, partition=i % partitions)
                    break
                except BufferError:  # its queue is full: serve deliveries, as a produce loop must
                    producer.poll(0.01)
        if producer.flush(120) != 0:
            raise RuntimeError("confluent-kafka did not deliver every record within 120 s")
        return len(values) / (time.perf_counter() - started)

    def poll(self, records: int) -> float:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": self._bootstrap, "group.id": self._topic, "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in range(self._partitions)])
        seen = 0
        started = time.perf_counter()
        deadline = time.monotonic() + 120
        while seen < records and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += message.offset() >= 0
        elapsed = time.perf_counter() - started
        consumer.close()
        if seen < records:
            raise RuntimeError(f"confluent-kafka polled {seen} of {records} records within 120 s")
        return seen / elapsed


def _per_record_poll(store, records: int) -> float:
    """Records a second through ``Consumer.poll()`` (records as Python objects, Kafka's loop),
    reading the first ``records`` of topic t's partitions from their beginning."""
    consumer = store.consumer(enable_auto_commit=False)
    consumer.assign([("t", p) for p in range(len(store.end_offsets("t")))])
    consumer.seek_to_beginning()
    seen = 0
    started = time.perf_counter()
    while seen < records:
        for record in consumer.poll(timeout_ms=1000):
            seen += record.offset >= 0  # touch each record, as a loop over them would
    elapsed = time.perf_counter() - started
    consumer.close(autocommit=False)
    return seen / elapsed


# -- contention -------------------------------------------------------------------------


def contention_worker(path: str, name: str, batches: int, per_batch: int, start_file: str) -> None:
    """One contending process: ``batches`` flushed batches of ``per_batch`` records to partition 0
    of the store at ``path``, or of the broker's topic when ``path`` is ``kafka://bootstrap/topic``
    (confluent-kafka, acks=all and idempotent as lakelog's producer)."""
    if path.startswith("kafka://"):
        bootstrap, topic = path.removeprefix("kafka://").split("/", 1)
        send, flush, close = _kafka_sender(bootstrap, topic, name)
    else:
        from lakelog.store import Store

        producer = Store.open(path).producer(client_id=name, linger_ms=5)
        topic = "t"

        def send(value: str) -> object:
            return producer.send(topic, value, partition=0)

        def flush(futures: list) -> int:
            producer.flush()
            return sum(type(f.exception()).__name__ == "DeliveryTimeoutError" for f in futures)

        close = producer.close

    latencies, timeouts = [], 0
    while not os.path.exists(start_file):
        time.sleep(0.005)
    began = time.time()
    for b in range(batches):
        started = time.perf_counter()
        timeouts += flush([send(f"{name}-{b}-{i}") for i in range(per_batch)])
        latencies.append((time.perf_counter() - started) * 1000)
    ended = time.time()
    close()
    print(json.dumps({"began": began, "ended": ended, "latencies": latencies, "timeouts": timeouts}))


def _kafka_sender(bootstrap: str, topic: str, name: str) -> tuple[Callable, Callable, Callable]:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": name, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )
    failed: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failed.append(str(error))

    def send(value: str) -> None:
        producer.produce(topic, value.encode(), partition=0, on_delivery=delivered)

    def flush(_futures: list) -> int:
        if producer.flush(120) != 0 or failed:
            raise RuntimeError(f"{name}: confluent-kafka did not deliver a batch: {failed[:1]}")
        return 0

    return send, flush, lambda: None


def _contend(target: str, work: str, processes: int, batches: int, label: str) -> dict[str, float]:
    """``processes`` contention workers against ``target`` (a store path or kafka://...), started together."""
    go = f"{work}/go-{label}"
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.commit", "contention-worker", target, f"w{i}", str(batches), "100", go],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    time.sleep(3)  # let every process open its client before the start
    Path(go).touch()
    results = []
    for child in children:
        stdout, _ = child.communicate(timeout=1800)
        if child.returncode != 0:
            raise RuntimeError(f"a contention worker ({label}) exited {child.returncode}")
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    wall = max(r["ended"] for r in results) - min(r["began"] for r in results)
    latencies = [x for r in results for x in r["latencies"]]
    return {
        "records_per_s": processes * batches * 100 / wall,
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "timeouts": sum(r["timeouts"] for r in results),
    }


def contention(
    work: str,
    processes: int,
    batches: int,
    out: Callable[[str], None],
    bootstrap: str | None = None,
    kafka_flush: bool = True,
) -> dict[str, float]:
    """One round of N lakelog processes on one partition; with a broker, 3 rounds interleaved with
    as many confluent-kafka processes on one partition of a broker topic (and, unless not
    ``kafka_flush``, of a topic with flush.messages=1, the durable baseline), medians."""
    path = f"{work}/contention-store"
    store = _store(path)
    rounds = 3 if bootstrap else 1
    peers = ([KAFKA, KAFKA_FLUSH] if kafka_flush else [KAFKA]) if bootstrap else []
    ours: list[dict[str, float]] = []
    theirs: dict[str, list[dict[str, float]]] = {peer: [] for peer in peers}
    for r in range(rounds):
        ours.append(_contend(path, work, processes, batches, f"lakelog-{r}"))
        for peer in peers:
            assert bootstrap is not None
            topic = f"perf-contention-{os.getpid()}-{r}-{'flush' if peer == KAFKA_FLUSH else 'default'}"
            create_topic(bootstrap, topic, FLUSH_EVERY_MESSAGE if peer == KAFKA_FLUSH else {})
            theirs[peer].append(_contend(f"kafka://{bootstrap}/{topic}", work, processes, batches, topic))
    assert sum(store.end_offsets("t").values()) == rounds * processes * batches * 100

    def median(results: list[dict[str, float]]) -> dict[str, float]:
        return {key: statistics.median(r[key] for r in results) for key in results[0]}

    figures = median(ours)
    out(
        f"contention: {processes} processes x {batches} batches of 100 records on one partition"
        f"{f', median of {rounds} interleaved rounds' if bootstrap else ''}: "
        f"{figures['records_per_s']:,.0f} acknowledged rec/s, batch p50 {figures['p50_ms']:.0f} ms, "
        f"p99 {figures['p99_ms']:.0f} ms, {figures['timeouts']:.0f} DeliveryTimeoutError(s) at default settings"
    )
    for peer in peers:
        found = median(theirs[peer])
        prefix = "kafka_flush_" if peer == KAFKA_FLUSH else "kafka_"
        figures |= {f"{prefix}{key}": value for key, value in found.items() if key != "timeouts"}
        figures[f"{prefix}ratio"] = figures["records_per_s"] / found["records_per_s"]
        topic = "a topic with flush.messages=1" if peer == KAFKA_FLUSH else "its defaults"
        target = " (target >= 0.2, lakelog p99 <= 100 ms)" if peer == KAFKA else ""
        out(
            f"contention: confluent-kafka -> broker ({topic}), the same processes and batches: "
            f"{found['records_per_s']:,.0f} acknowledged rec/s, batch p50 {found['p50_ms']:.0f} ms, "
            f"p99 {found['p99_ms']:.0f} ms; ratio lakelog/{peer} {figures[f'{prefix}ratio']:.2f}{target}"
        )
    return figures


# -- first acknowledgement ----------------------------------------------------------------


def _run_python(code: str, *args: str) -> str:
    """The last line a fresh ``python -c code args`` printed; its stderr in the error if it failed."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"a measuring process exited with {done.returncode}: {done.stderr.strip()[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


_FIRST_ACK = """
import sys, time
from lakelog.store import Store
store = Store.open(sys.argv[1])
with store.producer(linger_ms=0) as producer:
    producer.send("t", b"first").get()
    print(time.time())
assert "pyspark" not in sys.modules
"""


def first_ack(work: str, runs: int, out: Callable[[str], None]) -> dict[str, float]:
    path = f"{work}/first-ack-store"
    _store(path)
    times = []
    for _ in range(runs):
        started = time.time()
        times.append(float(_run_python(_FIRST_ACK, path)) - started)
    figures = {"median_s": statistics.median(times), "max_s": max(times)}
    out(
        f"first-ack: python -c start to the first acknowledged record (no JVM), {runs} runs: median "
        f"{figures['median_s']:.2f} s, max {figures['max_s']:.2f} s"
    )
    return figures


# -- growth ------------------------------------------------------------------------------


def _measure(store, samples: int) -> tuple[float, float]:
    """p50 of a one-record commit and of the poll that returns it, in a store's own process."""
    commits, polls = [], []
    consumer = store.consumer(enable_auto_commit=False)
    consumer.assign([("t", 0)])
    consumer.seek_to_end()
    with store.producer(linger_ms=0) as producer:
        for _ in range(samples):
            started = time.perf_counter()
            producer.send("t", b"x" * 100, partition=0).get()
            commits.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            got = consumer.poll(timeout_ms=0)
            polls.append((time.perf_counter() - started) * 1000)
            assert len(got) == 1
    consumer.close(autocommit=False)
    return statistics.median(commits), statistics.median(polls)


_FRESH = """
import json, sys, time
started = time.perf_counter()
from lakelog.store import Store
from benchmarks.commit import _measure
imported = time.perf_counter()
store = Store.open(sys.argv[1])
consumer = store.consumer(enable_auto_commit=False)
consumer.assign([("t", 0)])
# The newest record, as a consumer resuming near the end reads: one data file at any length
# of the log (from offset 0 the poll would read max.poll.records one-record files).
consumer.seek(("t", 0), store.end_offsets("t")[0] - 1)
assert consumer.poll(timeout_ms=10_000), "the first poll found no record"
consumer.close(autocommit=False)
cold_ms = (time.perf_counter() - imported) * 1000
samples = int(sys.argv[2])
print(json.dumps([*(_measure(store, samples) if samples else (0.0, 0.0)), cold_ms]))
"""
# Fresh processes measuring the cold open (the last one also measures commits and polls).
_COLD_RUNS = 7


def _fresh_measure(paths: Sequence[str], samples: int) -> list[tuple[float, float, float, float]]:
    """For each store of ``paths``, in new processes: p50 of a one-record commit and of its
    poll (one process), the median of :data:`_COLD_RUNS` processes' cold ``Store.open`` + end
    offsets + first poll of the newest record, and the first process's (ms, imports not
    counted). The stores' processes take turns, so that each round sees one machine."""
    from lakelog.engine.commit import wait_for_checkpoints

    # The opens are measured on their own, not beside this process's checkpoint thread and the
    # kernel's writeback of the files growing the log created; and as medians: at 20,000
    # versions the first one or two opens right after growing read the checkpoint 5-10x slower
    # (60-130 ms) than the same open a few seconds later (~30 ms), a sync or not.
    wait_for_checkpoints()
    os.sync()
    colds: dict[str, list[float]] = {path: [] for path in paths}
    last: dict[str, tuple[float, float]] = {}
    for run in range(_COLD_RUNS):
        for path in paths:
            commit, poll, cold = json.loads(_run_python(_FRESH, path, str(samples if run == _COLD_RUNS - 1 else 0)))
            colds[path].append(cold)
            last[path] = (commit, poll)
    return [(*last[path], statistics.median(colds[path]), colds[path][0]) for path in paths]


def growth(work: str, small: int, large: int, samples: int, out: Callable[[str], None]) -> dict[str, float]:
    from lakelog.engine.commit import RetryPolicy, wait_for_checkpoints
    from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
    from lakelog.engine.topics import TopicPartition

    path = f"{work}/growth-store"
    store = _store(path)
    committer = store.context.committer("perf-growth")

    def grow_to(versions: int) -> None:
        # One-record commits straight through the committer: the same commits a producer
        # makes, without the acknowledgement round trip.
        now = int(time.time() * 1000)
        while store.log.latest_version() < versions:
            records = RecordBatch()
            records.add(TopicPartition("t", 0), None, b"g", None, now, 1, 0)
            committer.append(ProducerBatch(records, 1), RetryPolicy())

    grow_to(small - 2 * samples)
    wait_for_checkpoints()
    before = _measure(store, samples)
    # The store as it is now, kept to be measured beside the grown one: fresh processes open the
    # two in turns, like for like (same moment, same page cache, same writeback).
    wait_for_checkpoints()
    shutil.copytree(path, f"{path}-small")
    started = time.monotonic()
    grow_to(large - 2 * samples)
    grown_s = time.monotonic() - started
    wait_for_checkpoints()
    after = _measure(store, samples)
    fresh_before, fresh_after = _fresh_measure([f"{path}-small", path], samples)
    figures = {
        "commit_ratio": after[0] / before[0],
        "poll_ratio": after[1] / before[1],
        "fresh_commit_ratio": fresh_after[0] / fresh_before[0],
        "fresh_poll_ratio": fresh_after[1] / fresh_before[1],
        "cold_open_ratio": fresh_after[2] / fresh_before[2],
        "cold_open_first_ratio": fresh_after[3] / fresh_before[3],
    }
    out(
        f"growth: at ~{small:,} vs ~{large:,} versions (grown in {grown_s:.0f} s), p50 of {samples}: "
        f"commit {before[0]:.1f} -> {after[0]:.1f} ms (x{figures['commit_ratio']:.2f}), "
        f"poll {before[1]:.2f} -> {after[1]:.2f} ms (x{figures['poll_ratio']:.2f}) in the process that followed "
        f"the log; in a fresh process commit {fresh_before[0]:.1f} -> {fresh_after[0]:.1f} ms "
        f"(x{figures['fresh_commit_ratio']:.2f}), poll {fresh_before[1]:.2f} -> {fresh_after[1]:.2f} ms "
        f"(x{figures['fresh_poll_ratio']:.2f}); cold Store.open + first poll, median of {_COLD_RUNS} processes each, "
        f"{fresh_before[2]:.0f} -> {fresh_after[2]:.0f} ms (x{figures['cold_open_ratio']:.2f}; the first process "
        f"{fresh_before[3]:.0f} -> {fresh_after[3]:.0f} ms; the two stores' processes took turns)"
    )
    return figures


def perf_commit(
    sections: Sequence[str],
    *,
    commits: int,
    records: int,
    record_size: int,
    processes: int,
    batches: int,
    small_versions: int,
    large_versions: int,
    work_dir: str | None,
    out: Callable[[str], None],
    kafka: bool = False,
    kafka_flush: bool = True,
) -> dict[str, dict[str, float]]:
    """Run the chosen sections in a temporary directory (removed afterwards); their figures. With
    ``kafka``, throughput's per-record loops and contention also run against a Kafka broker
    (:class:`benchmarks.kafka_reference.KafkaBroker`, started once, stopped at the end), and
    contention, unless not ``kafka_flush``, against a flush.messages=1 topic of it too."""
    work = tempfile.mkdtemp(prefix="lakelog-perf-commit-", dir=work_dir)
    figures: dict[str, dict[str, float]] = {}
    broker = None
    bootstrap: str | None = None
    try:
        if kafka and {"throughput", "contention"} & set(sections):
            from benchmarks.kafka_reference import KafkaBroker

            broker = KafkaBroker().start()
            bootstrap = broker.bootstrap
        for section in sections:
            if section == "latency":
                figures[section] = latency(work, commits, out)
            elif section == "dir-sync":
                figures[section] = dir_sync(work, commits, out)
            elif section == "throughput":
                figures[section] = throughput(work, records, record_size, 3, out, bootstrap)
            elif section == "contention":
                figures[section] = contention(work, processes, batches, out, bootstrap, kafka_flush)
            elif section == "first-ack":
                figures[section] = first_ack(work, 5, out)
            elif section == "growth":
                figures[section] = growth(work, small_versions, large_versions, 50, out)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return figures


if __name__ == "__main__":
    if sys.argv[1] == "contention-worker":
        path, name, batches, per_batch, start = sys.argv[2:7]
        contention_worker(path, name, int(batches), int(per_batch), start)
