"""``lakelog perf stream``: a streaming copy topic -> topic against a plain Delta stream copy.

Throughput: the same records copied by ``format("lakelog")`` (source and
sink) and by ``format("delta")`` reading the log table's rows of the topic
into a plain Delta table, both keeping the same columns (key and value) and
both with ``Trigger.AvailableNow``, timed in interleaved rounds (the order
alternating, medians) after both copied a small topic once (so neither pays
for warm-up alone).
Latency: a query with a processing-time trigger of 0 runs; one record is
sent at a time and the time until the sink's output shows it is measured,
next to the same with a Delta table -> Delta table stream.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.produce_consume import batch_frame
from lakelog.engine.commit import TableLog
from lakelog.engine.storage.object_store import delta_storage_options, python_uri
from lakelog.store import Store

# Records each copy moves once before the timed runs.
WARM_UP_RECORDS = 2_000


@dataclass
class StreamFigures:
    records: int
    lakelog_s: float
    delta_s: float
    lakelog_latency_ms: list[float]
    delta_latency_ms: list[float]
    rounds: int = 1

    def lines(self) -> list[str]:
        out = [
            f"copy {self.records} records, median of {self.rounds} interleaved round(s): "
            f"lakelog {self.records / self.lakelog_s:,.0f} rec/s ({self.lakelog_s:.1f} s), "
            f"plain delta {self.records / self.delta_s:,.0f} rec/s ({self.delta_s:.1f} s), "
            f"throughput ratio {self.delta_s / self.lakelog_s:.2f}",
        ]
        for label, values in (("lakelog", self.lakelog_latency_ms), ("plain delta", self.delta_latency_ms)):
            if values:
                ordered = sorted(values)
                p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
                out.append(
                    f"latency send -> visible in sink, {label}: "
                    f"p50 {statistics.median(values):.0f} ms, p99 {p99:.0f} ms"
                )
        return out


def _timed(run: Callable[[], None]) -> float:
    started = time.monotonic()
    run()
    return time.monotonic() - started


def perf_stream(
    store: Store, *, records: int, record_size: int, partitions: int, samples: int, work_dir: str, rounds: int = 3
) -> StreamFigures:
    """Time both copies of ``records`` records ``rounds`` times, interleaved (which goes first
    alternates), after both ran once on a small topic; medians.

    The warm-up copies (own topics, checkpoints and Delta table) start the
    Python workers and warm the JVM's code paths for both timed runs; without
    them the first timed copy pays for that alone. Checkpoints and plain-Delta
    tables go under ``work_dir``, an empty directory of the run's own
    (:func:`benchmarks.scratch.scratch_dir`); the topics ``perf-stream-*`` are
    re-created in the store.
    """
    spark = store.spark
    src, dst = "perf-stream-src", "perf-stream-dst"
    warm_src, warm_dst = "perf-stream-warm-src", "perf-stream-warm-dst"
    copies = [f"perf-stream-copy-{r}" for r in range(rounds)]
    for name in (src, dst, warm_src, warm_dst, *copies):
        if name in store.list_topics():
            store.delete_topic(name)
        store.create_topic(name, partitions=partitions)
    store.write(batch_frame(spark, 0, WARM_UP_RECORDS, record_size, keys=1000), warm_src)
    store.write(batch_frame(spark, 0, records, record_size, keys=1000), src)

    _lakelog_copy(store, warm_src, warm_dst, f"{work_dir}/ck-lakelog-warm")
    _delta_copy(store, warm_src, f"{work_dir}/ck-delta-warm", f"{work_dir}/plain-copy-warm")
    times: dict[str, list[float]] = {"lakelog": [], "delta": []}
    for r, copy in enumerate(copies):
        runs = {
            "lakelog": lambda: _lakelog_copy(store, src, copy, f"{work_dir}/ck-lakelog-{r}"),  # noqa: B023
            "delta": lambda: _delta_copy(store, src, f"{work_dir}/ck-delta-{r}", f"{work_dir}/plain-copy-{r}"),  # noqa: B023
        }
        for side in ("lakelog", "delta") if r % 2 == 0 else ("delta", "lakelog"):
            times[side].append(_timed(runs[side]))
    return StreamFigures(
        records,
        statistics.median(times["lakelog"]),
        statistics.median(times["delta"]),
        _lakelog_latency(store, src, dst, samples, work_dir),
        _delta_latency(store, samples, work_dir),
        rounds,
    )


def _lakelog_copy(store: Store, src: str, dst: str, checkpoint: str) -> None:
    """Copy topic ``src`` to ``dst`` with format("lakelog") source and sink, until caught up."""
    (
        store.spark.readStream.format("lakelog")
        .option("path", store.uri)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", dst)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )


def _delta_copy(store: Store, src: str, checkpoint: str, target: str) -> None:
    """Copy the key and value of the log table's rows of topic ``src`` into the plain Delta table
    ``target`` (the columns the lakelog copy keeps), until caught up."""
    (
        store.spark.readStream.format("delta")
        .load(store.uri)
        .where(f"topic = '{src}'")
        .select("key", "value")
        .writeStream.format("delta")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(target)
        .awaitTermination()
    )


def _wait_until(check: Callable[[], bool], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the streaming query did not get there within {timeout_s:.0f} s")
        time.sleep(0.005)


def _records_in(reader: TableLog, topic: str) -> int:
    return sum(end for tp, end in reader.latest().ends.items() if tp.topic == topic)


def _lakelog_latency(store: Store, src: str, dst: str, samples: int, work_dir: str) -> list[float]:
    spark = store.spark
    query = (
        spark.readStream.format("lakelog")
        .option("path", store.uri)
        .option("subscribe", src)
        .load()
        .select("key", "value")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", dst)
        .option("checkpointLocation", f"{work_dir}/ck-lakelog-latency")
        .trigger(processingTime="0 seconds")
        .start()
    )
    reader = TableLog(store.uri)
    latencies = []
    try:
        # The query's source is planned (its Python worker up) once it waits for data; the first
        # two samples, not counted, pay for the rest of the start-up.
        _wait_until(lambda: query.status["message"] == "Waiting for data to arrive")
        with store.producer(linger_ms=0) as producer:
            copied = _records_in(reader, dst)
            for i in range(samples + 2):
                producer.send(src, f"latency-{i}").get()
                returned = time.monotonic()
                # Wait for this very record: the sink holds one more than before it was sent.
                copied += 1
                _wait_until(lambda: _records_in(reader, dst) >= copied)  # noqa: B023 (called at once)
                if i >= 2:  # the first records pay for worker start-up
                    latencies.append((time.monotonic() - returned) * 1000)
    finally:
        query.stop()
    return latencies


def _sink_rows(path: str) -> int:
    uri, options = python_uri(path), delta_storage_options(path)
    if not DeltaTable.is_deltatable(uri, storage_options=options):
        return 0
    table = DeltaTable(uri, storage_options=options)
    return int(pa.table(table.get_add_actions(flatten=True)).column("num_records").to_numpy().sum())


def _append_value(path: str, value: bytes) -> None:
    """A one-row commit to the plain Delta table at ``path`` (delta-rs, no Spark)."""
    write_deltalake(
        python_uri(path),
        pa.table({"value": pa.array([value])}),
        mode="append",
        storage_options=delta_storage_options(path),
    )


def _delta_latency(store: Store, samples: int, work_dir: str) -> list[float]:
    spark = store.spark
    source_path, sink_path = f"{work_dir}/latency-src", f"{work_dir}/latency-sink"
    _append_value(source_path, b"start")
    query = (
        spark.readStream.format("delta")
        .load(source_path)
        .writeStream.format("delta")
        .option("checkpointLocation", f"{work_dir}/ck-delta-latency")
        .trigger(processingTime="0 seconds")
        .start(sink_path)
    )
    latencies = []
    try:
        _wait_until(lambda: _sink_rows(sink_path) >= 1)  # the first batch ran: the query is up
        for i in range(samples + 2):
            _append_value(source_path, f"latency-{i}".encode())
            returned = time.monotonic()
            _wait_until(lambda: _sink_rows(sink_path) >= i + 2)  # noqa: B023 (called at once)
            if i >= 2:
                latencies.append((time.monotonic() - returned) * 1000)
    finally:
        query.stop()
    return latencies
