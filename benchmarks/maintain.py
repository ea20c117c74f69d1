"""``lakelog perf maintain``: what maintenance buys and costs, in figures.

1. Small commits: a partition built from many small commits; the time and
   the files scanned to read its newest 10k records (a consumer's path:
   snapshot, prune by offset statistics, read Parquet), before and after
   OPTIMIZE.
2. Tail reads as a topic grows: the newest 10k records of a partition when
   the topic holds ``small`` vs ``large`` records (each maintained): ratio.
3. Compaction throughput: records/s of log compaction over a keyed topic,
   next to a plain Spark job computing the same latest-value-per-key result.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from pyspark.sql import functions as F
from pyspark.sql.window import Window

from benchmarks.produce_consume import batch_frame
from lakelog.compaction.maintain import maintain
from lakelog.engine.commit import Committer, RetryPolicy, TableLog
from lakelog.engine.commit.partition_reader import PartitionReader, files_for_range
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

TAIL = 10_000


def tail_read(uri: str, tp: TopicPartition, runs: int = 5) -> tuple[float, int]:
    """Median seconds to read the newest ``TAIL`` records of ``tp`` from a fresh reader, and files scanned."""
    times, scanned = [], 0
    for _ in range(runs):
        started = time.monotonic()
        state = TableLog(uri).latest()
        files = state.files_of(tp).all()
        end = state.end_offset(tp)
        chosen = files_for_range(files, tp, max(0, end - TAIL), None)
        rows = PartitionReader(uri).read(chosen, tp, max(0, end - TAIL))
        times.append(time.monotonic() - started)
        scanned = len(chosen)
        assert rows.num_rows == min(TAIL, end)
    return statistics.median(times), scanned


def _fresh_topic(store: Store, name: str, partitions: int, config: dict | None = None) -> None:
    if name in store.list_topics():
        store.delete_topic(name)
    store.create_topic(name, partitions=partitions, config=config or {})


def small_commits(store: Store, commits: int, per_commit: int, out: Callable[[str], None]) -> None:
    topic = "perf-small-commits"
    _fresh_topic(store, topic, 1)
    writer = Committer(store.log, "perf-maintain")
    tp = TopicPartition(topic, 0)
    now = int(time.time() * 1000)
    for _ in range(commits):
        batch = RecordBatch()
        for i in range(per_commit):
            batch.add(tp, None, b"x" * 100, None, now, 100, i)
        writer.append(ProducerBatch(batch, 1), RetryPolicy(retries=10))
    before, files_before = tail_read(store.uri, tp)
    started = time.monotonic()
    maintain(store.uri, topics=[topic], vacuum=False)
    optimize_s = time.monotonic() - started
    after, files_after = tail_read(store.uri, tp)
    out(
        f"{commits} commits x {per_commit} records, newest {TAIL} records of one partition: "
        f"before OPTIMIZE {before * 1000:.0f} ms / {files_before} files scanned, "
        f"after {after * 1000:.0f} ms / {files_after} files scanned "
        f"(speed-up {before / after:.1f}x; OPTIMIZE took {optimize_s:.1f} s)"
    )


def growth(store: Store, small: int, large: int, out: Callable[[str], None]) -> None:
    figures = {}
    for label, total in (("small", small), ("large", large)):
        topic = f"perf-growth-{label}"
        _fresh_topic(store, topic, 8)
        chunk = 1_000_000
        for start in range(0, total, chunk):
            store.write(batch_frame(store.spark, start, min(chunk, total - start), 100, keys=0), topic)
        maintain(store.uri, topics=[topic], vacuum=False)
        figures[label] = tail_read(store.uri, TopicPartition(topic, 0))
        out(
            f"topic of {total:,} records (maintained): newest {TAIL} records of a partition in "
            f"{figures[label][0] * 1000:.0f} ms, {figures[label][1]} file(s) scanned"
        )
    out(f"tail-read time ratio {large:,} vs {small:,} records: {figures['large'][0] / figures['small'][0]:.2f}")


def compaction_throughput(store: Store, records: int, keys: int, work_dir: str, out: Callable[[str], None]) -> None:
    topic = "perf-compaction"
    _fresh_topic(store, topic, 8, {"cleanup.policy": "compact"})
    chunk = max(1, records // 10)
    for start in range(0, records, chunk):  # ten commits: ten files per partition, nine cleanable
        store.write(batch_frame(store.spark, start, min(chunk, records - start), 100, keys=keys), topic)
    started = time.monotonic()
    report = maintain(store.uri, topics=[topic], optimize=False, vacuum=False)
    ours = time.monotonic() - started
    removed = report.topics[0].records_removed_by_compaction

    started = time.monotonic()
    rows = store.spark.read.format("delta").load(store.uri).where(F.col("topic") == topic)
    latest = Window.partitionBy("partition", "key").orderBy(F.col("offset").desc())
    (
        rows.withColumn("rank", F.row_number().over(latest))
        .where("rank = 1")
        .drop("rank")
        .write.format("delta")
        .mode("overwrite")
        .save(f"{work_dir}/latest-per-key")
    )
    plain = time.monotonic() - started
    out(
        f"log compaction of {records:,} records ({keys:,} keys, 8 partitions): lakelog {records / ours:,.0f} rec/s "
        f"({ours:.1f} s, {removed:,} removed), plain Spark latest-per-key job {records / plain:,.0f} rec/s "
        f"({plain:.1f} s), ratio {plain / ours:.2f}"
    )


def perf_maintain(
    store: Store,
    *,
    commits: int,
    small: int,
    large: int,
    compaction_records: int,
    work_dir: str,
    out: Callable[[str], None],
) -> None:
    """Print the three figures of the module docstring. The topics ``perf-*`` are re-created
    in the store; the plain Spark job's output goes under ``work_dir``, an empty directory of
    the run's own (:func:`benchmarks.scratch.scratch_dir`)."""
    small_commits(store, commits, 50, out)
    compaction_throughput(store, compaction_records, 10_000, work_dir, out)
    growth(store, small, large, out)
