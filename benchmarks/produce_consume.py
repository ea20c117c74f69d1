"""``lakelog perf produce`` / ``perf consume``: Kafka's perf-test tools for a store.

Each run can do the same work as plain Delta (``compare_plain``): appends
of the same rows to a Delta table with the log table's schema and
partitioning, or a plain Delta read of the same rows, by the same kind of
engine: a Spark job beside ``Store.write`` and Spark reads, delta-rs
(``write_deltalake``, ``DeltaTable`` to Arrow) beside the JVM-free producer,
transactional producer and group consumer. The two are interleaved batch by
batch so that warm-up and GC noise hit both sides alike, and the summary
gives lakelog's throughput as a ratio of plain Delta's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.offsets import EARLIEST, LATEST
from lakelog.engine.schema import LOG_ARROW_SCHEMA, LOG_TABLE_DDL, PARTITION_COLUMNS
from lakelog.engine.storage.object_store import delta_storage_options, python_uri
from lakelog.spark_connector.dataframe_write import KAFKA_PARTITION_FUNCTION, register_functions
from lakelog.spark_connector.frames import sql_string
from lakelog.store import Store


@dataclass
class PerfResult:
    """Timings of one side of a perf run."""

    label: str
    records: int
    bytes: int
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def records_per_sec(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def mb_per_sec(self) -> float:
        return self.bytes / (1024 * 1024) / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def producer_summary(self) -> str:
        """kafka-producer-perf-test's final line."""
        lat = self.latencies_ms or [0.0]
        return (
            f"{self.records} records sent, {self.records_per_sec:.1f} records/sec "
            f"({self.mb_per_sec:.2f} MB/sec), {statistics.fmean(lat):.1f} ms avg latency, "
            f"{max(lat):.1f} ms max latency, {self.percentile(0.5):.0f} ms 50th, {self.percentile(0.95):.0f} ms 95th, "
            f"{self.percentile(0.99):.0f} ms 99th, {self.percentile(0.999):.0f} ms 99.9th."
        )

    def consumer_summary(self, start: float) -> str:
        """kafka-consumer-perf-test's columns."""
        mb = self.bytes / (1024 * 1024)
        fmt = "%Y-%m-%d %H:%M:%S"
        return (
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
            "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
            f"{time.strftime(fmt, time.localtime(start))}, {time.strftime(fmt, time.localtime(start + self.seconds))}, "
            f"{mb:.4f}, {self.mb_per_sec:.4f}, {self.records}, {self.records_per_sec:.4f}, 0, "
            f"{self.seconds * 1000:.0f}, {self.mb_per_sec:.4f}, {self.records_per_sec:.4f}"
        )


def ratio(ours: PerfResult, plain: PerfResult) -> float:
    """lakelog throughput / plain Delta throughput (1.0 = no overhead)."""
    return ours.records_per_sec / plain.records_per_sec if plain.records_per_sec else 0.0


def plain_table(spark: SparkSession, path: str) -> str:
    """Create a Delta table shaped like the log table at ``path``, for the plain-Delta side.

    ``path`` is a fresh location of the run's own (:func:`benchmarks.scratch.scratch_dir`):
    nothing already there is deleted.
    """
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({LOG_TABLE_DDL}) USING delta "
        f"PARTITIONED BY ({', '.join(f'`{c}`' for c in PARTITION_COLUMNS)}) "
        "TBLPROPERTIES ('delta.dataSkippingStatsColumns' = 'offset,timestamp')"
    )
    return path


def plain_delta_rs_table(path: str) -> None:
    """Create a Delta table shaped like the log table at ``path`` with delta-rs (no Spark), with
    the log table's checkpoint interval: the plain side of the JVM-free clients' runs. ``path``
    is a fresh location of the run's own, as for :func:`plain_table`."""
    from deltalake import write_deltalake

    from lakelog.store import TABLE_PROPERTIES

    write_deltalake(
        python_uri(path),
        LOG_ARROW_SCHEMA.empty_table(),
        partition_by=list(PARTITION_COLUMNS),
        configuration={"delta.checkpointInterval": TABLE_PROPERTIES["delta.checkpointInterval"]},
        storage_options=delta_storage_options(path),
    )


def append_delta_rs(path: str, columns: dict[str, pa.Array | list]) -> None:
    """Append rows of the log table's columns (``columns``; the rest null) with delta-rs."""
    from deltalake import write_deltalake

    count = len(columns["value"])
    table = pa.table(
        {f.name: columns.get(f.name, pa.nulls(count, f.type)) for f in LOG_ARROW_SCHEMA}, schema=LOG_ARROW_SCHEMA
    )
    write_deltalake(python_uri(path), table, mode="append", storage_options=delta_storage_options(path))


def batch_frame(spark: SparkSession, start: int, count: int, record_size: int, keys: int) -> DataFrame:
    """``count`` records: deterministic ``record_size``-byte values, keys ``id % keys`` (no key column if 0)."""
    repeats = record_size // 64 + 1
    value = F.expr(f"substring(repeat(sha2(cast(id as string), 256), {repeats}), 1, {record_size})").cast("binary")
    columns = [value.alias("value")]
    if keys > 0:
        columns.insert(0, (F.col("id") % keys).cast("string").cast("binary").alias("key"))
    return spark.range(start, start + count).select(*columns)


def perf_produce_dataframe(
    store: Store,
    topic: str,
    *,
    num_records: int,
    record_size: int,
    batch_size: int,
    keys: int,
    partitions: int,
    compare_plain: bool,
    plain_path: str,
    warmup_batches: int = 1,
    progress: Callable[[str], None] = lambda _: None,
    beside_rate: float = 0.0,
    beside: PerfResult | None = None,
    work_dir: str = "",
    source: str = "generated",
) -> tuple[PerfResult, PerfResult | None]:
    """Append ``num_records`` with ``Store.write`` in batches, optionally interleaved with plain Delta.

    ``source`` is where each batch's DataFrame comes from: ``generated`` computes its rows
    (``spark.range`` and SHA-256 strings) every time a job reads it, ``parquet`` reads them
    from a Parquet file written beforehand in ``work_dir`` (outside the timings), as a data
    team's table would be read. Both sides write the same DataFrame either way.

    With ``beside_rate``, each batch is also written a second time while another process
    commits ``beside_rate`` one-record commits per second to the same topic's partitions
    (:class:`benchmarks.paced.PacedProducer`); those timings go to ``beside``. Those writes
    go through a second ``Store`` of the same table and session: a store that lost a race
    reserves its offsets first for a while (``Store.write``), which the writes alone must
    not inherit.
    """
    from pathlib import Path

    from benchmarks.paced import PacedProducer

    spark = store.spark
    busy_store = Store.open(store.uri, spark) if beside_rate > 0 else store
    register_functions(spark)
    ours = PerfResult("lakelog", 0, 0)
    plain = PerfResult("plain delta", 0, 0) if compare_plain else None
    if compare_plain:
        plain_table(spark, plain_path)
    batches = -(-num_records // batch_size)
    for i in range(-warmup_batches, batches):
        start = max(i, 0) * batch_size
        count = min(batch_size, num_records - start)
        df = batch_frame(spark, start, count, record_size, keys)
        if source == "parquet":
            materialized = f"{work_dir}/source-{i + warmup_batches}"
            df.write.parquet(materialized)
            df = spark.read.parquet(materialized)
        t0 = time.perf_counter()
        store.write(df, topic=topic)
        elapsed = time.perf_counter() - t0
        if i >= 0:
            _add(ours, count, count * record_size, elapsed)
        if beside_rate > 0 and beside is not None:
            neighbour = PacedProducer(store.uri, topic, list(range(partitions)), beside_rate, Path(work_dir))
            with neighbour:
                t0 = time.perf_counter()
                busy_store.write(df, topic=topic)
                elapsed_beside = time.perf_counter() - t0
            if i >= 0:
                _add(beside, count, count * record_size, elapsed_beside)
        if plain is not None:
            rows = _plain_rows(df, topic, partitions)
            t0 = time.perf_counter()
            rows.write.format("delta").mode("append").save(plain_path)
            elapsed_plain = time.perf_counter() - t0
            if i >= 0:
                _add(plain, count, count * record_size, elapsed_plain)
        progress(f"batch {i + 1}/{batches}" if i >= 0 else "warm-up batch")
    return ours, plain


def _plain_rows(df: DataFrame, topic: str, partitions: int) -> DataFrame:
    """The same rows as lakelog writes them, minus offsets and producer fields."""
    if "key" not in df.columns:
        df = df.withColumn("key", F.lit(None).cast("binary"))
    count = F.lit(partitions)
    partition = F.when(
        F.col("key").isNotNull(), F.call_function(KAFKA_PARTITION_FUNCTION, F.col("key"), count)
    ).otherwise(F.pmod(F.monotonically_increasing_id(), F.lit(partitions)).cast("int"))
    return df.select(
        F.lit(topic).alias("topic"),
        partition.alias("partition"),
        F.lit(None).cast("bigint").alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit(0).alias("timestamp_type"),
        "key",
        "value",
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
        F.lit(None).cast("bigint").alias("producer_id"),
        F.lit(None).cast("int").alias("producer_epoch"),
        F.lit(None).cast("int").alias("sequence"),
    )


def _add(result: PerfResult, records: int, nbytes: int, seconds: float) -> None:
    result.records += records
    result.bytes += nbytes
    result.seconds += seconds
    result.latencies_ms.append(seconds * 1000)


def perf_produce_producer(
    store: Store,
    topic: str,
    *,
    num_records: int,
    record_size: int,
    batch_size: int,
    keys: int,
    compare_plain: bool = False,
    plain_path: str = "",
    warmup_batches: int = 1,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[PerfResult, PerfResult | None]:
    """Send ``num_records`` through a Producer, ``batch_size`` records per commit.

    Alone, records stream in and latency is per record, send to
    acknowledgement (kafka-producer-perf-test's). With ``compare_plain``, each
    batch is sent and flushed, then the same rows (the offsets lakelog gave
    them) are appended with delta-rs (an Arrow table, ``write_deltalake``), no
    Spark on either side; latency is then per commit on both sides.
    """
    payload = bytes(range(256)) * (record_size // 256 + 1)

    def value(i: int) -> bytes:
        return payload[i % 256 : i % 256 + record_size]

    def key(i: int) -> bytes | None:
        return str(i % keys).encode() if keys > 0 else None

    ours = PerfResult("lakelog producer", 0, 0)
    config = {"batch.num.messages": batch_size, "linger.ms": 50, "batch.size": 2**31 - 1}
    if not compare_plain:
        latencies = ours.latencies_ms
        with store.producer(**config) as producer:
            started = time.perf_counter()
            futures = []
            for i in range(num_records):
                sent = time.perf_counter()
                future = producer.send(topic, value(i), key=key(i))
                future.add_callback(lambda _md, sent=sent: latencies.append((time.perf_counter() - sent) * 1000))
                futures.append(future)
                if (i + 1) % batch_size == 0:
                    progress(f"{i + 1} records sent")
            producer.flush()
            ours.seconds = time.perf_counter() - started
        _raise_failures(futures)
        ours.records, ours.bytes = num_records, num_records * record_size
        return ours, None

    plain = PerfResult("plain delta", 0, 0)
    plain_delta_rs_table(plain_path)
    batches = -(-num_records // batch_size)
    with store.producer(**config) as producer:
        for b in range(-warmup_batches, batches):
            first = max(b, 0) * batch_size
            count = min(batch_size, num_records - first)
            t0 = time.perf_counter()
            futures = [producer.send(topic, value(i), key=key(i)) for i in range(first, first + count)]
            producer.flush()
            elapsed = time.perf_counter() - t0
            _raise_failures(futures)
            placed = [f.get() for f in futures]
            t0 = time.perf_counter()
            append_delta_rs(
                plain_path,
                {
                    "topic": pa.array([topic] * count, pa.string()),
                    "partition": pa.array([md.partition for md in placed], pa.int32()),
                    "offset": pa.array([md.offset for md in placed], pa.int64()),
                    "timestamp": pa.array([md.timestamp * 1000 for md in placed], pa.timestamp("us", tz="UTC")),
                    "timestamp_type": pa.array([0] * count, pa.int32()),
                    "key": pa.array([key(i) for i in range(first, first + count)], pa.binary()),
                    "value": pa.array([value(i) for i in range(first, first + count)], pa.binary()),
                },
            )
            elapsed_plain = time.perf_counter() - t0
            if b >= 0:
                _add(ours, count, count * record_size, elapsed)
                _add(plain, count, count * record_size, elapsed_plain)
            progress(f"batch {b + 1}/{batches}" if b >= 0 else "warm-up batch")
    return ours, plain


def _raise_failures(futures) -> None:
    failed = [f for f in futures if f.failed()]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(futures)} records failed: {failed[0].exception()}")


def perf_consume(
    store: Store,
    topic: str,
    *,
    partition: int | None,
    compare_plain: bool,
    repeats: int,
    plain_path: str | None = None,
) -> tuple[PerfResult, PerfResult | None]:
    """Read a topic (or one partition) fully, ``repeats`` times, optionally against plain Delta."""
    spark = store.spark
    parts = store.describe_topic(topic).partitions
    if partition is not None and not 0 <= partition < parts:
        raise InvalidConfigError(f"--partition {partition} is outside topic {topic!r} (partitions 0..{parts - 1})")
    chosen = [partition] if partition is not None else list(range(parts))
    starts = {topic: {p: (EARLIEST if p in chosen else LATEST) for p in range(parts)}}
    ends = {topic: {p: LATEST for p in range(parts)}}
    ends_now = store.end_offsets(topic)
    begins = store.beginning_offsets(topic)
    records = sum(ends_now[p] - begins[p] for p in chosen)
    nbytes = store.read(topic, starts, ends).select(F.sum(F.coalesce(F.length("value"), F.lit(0)))).first()[0] or 0
    ours = PerfResult("lakelog", 0, 0)
    plain = PerfResult("plain delta", 0, 0) if compare_plain else None
    condition = f"`topic` = {sql_string(topic)} AND `partition` IN ({', '.join(map(str, chosen))})"
    for _ in range(repeats):
        t0 = time.perf_counter()
        store.read(topic, starts, ends).write.format("noop").mode("overwrite").save()
        _add(ours, records, nbytes, time.perf_counter() - t0)
        if plain is not None:
            t0 = time.perf_counter()
            (
                spark.read.format("delta")
                .load(plain_path or store.uri)
                .where(condition)
                .selectExpr("key", "value", "topic", "partition", "offset", "timestamp", "timestamp_type", "headers")
                .write.format("noop")
                .mode("overwrite")
                .save()
            )
            _add(plain, records, nbytes, time.perf_counter() - t0)
    return ours, plain


def perf_consume_group(
    store: Store,
    topic: str,
    *,
    group_id: str,
    compare_plain: bool,
    repeats: int,
    max_poll_records: int = 50_000,
) -> tuple[PerfResult, PerfResult | None]:
    """Consume a whole topic through a group member into the client (Arrow tables),
    ``repeats`` times (offsets reset between runs), against delta-rs reading the same
    rows of the same table into Arrow (no Spark on either side)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    ends = store.end_offsets(topic)
    begins = store.beginning_offsets(topic)
    records = sum(ends[p] - begins[p] for p in ends)
    ours = PerfResult("lakelog group consumer", 0, 0)
    plain = PerfResult("plain delta", 0, 0) if compare_plain else None
    for run in range(repeats):
        consumer = store.consumer(
            f"{group_id}-{run}-{time.time_ns()}", auto_offset_reset="earliest", max_poll_records=max_poll_records
        )
        t0 = time.perf_counter()
        consumer.subscribe([topic])
        got = nbytes = 0
        while got < records:
            table = consumer.poll_arrow(timeout_ms=1000)
            got += table.num_rows
            nbytes += table.column("value").nbytes
        consumer.commit()
        _add(ours, got, nbytes, time.perf_counter() - t0)
        consumer.close(autocommit=False)
        if plain is not None:
            t0 = time.perf_counter()
            table = DeltaTable(python_uri(store.uri), storage_options=delta_storage_options(store.uri))
            rows = table.to_pyarrow_dataset().to_table(
                columns=["key", "value", "topic", "partition", "offset", "timestamp", "timestamp_type", "headers"],
                filter=pc.field("topic") == topic,
            )
            _add(plain, rows.num_rows, rows.column("value").nbytes, time.perf_counter() - t0)
    return ours, plain


def perf_transactions(
    store: Store,
    topic: str,
    *,
    transactions: int,
    records: int,
    record_size: int,
    compare_plain: bool,
    plain_path: str,
) -> tuple[PerfResult, PerfResult | None]:
    """Latency of ``transactions`` transactions of ``records`` records each
    (begin -> commit returns), against delta-rs appends of as many rows (no Spark on
    either side)."""
    payload = b"x" * record_size
    ours = PerfResult("lakelog transaction", 0, 0)
    plain = PerfResult("plain delta", 0, 0) if compare_plain else None
    if plain is not None:
        plain_delta_rs_table(plain_path)
    producer = store.transactional_producer(f"perf-{time.time_ns()}")
    producer.init_transactions()
    for n in range(-1, transactions):  # one warm-up round
        t0 = time.perf_counter()
        producer.begin_transaction()
        for i in range(records):
            producer.send(topic, payload, key=str(i).encode())
        producer.commit_transaction()
        elapsed = time.perf_counter() - t0
        if n >= 0:
            _add(ours, records, records * record_size, elapsed)
        if plain is not None:
            t0 = time.perf_counter()
            first = (n + 1) * records
            append_delta_rs(
                plain_path,
                {
                    "topic": pa.array([topic] * records, pa.string()),
                    "partition": pa.array([0] * records, pa.int32()),
                    "offset": pa.array(range(first, first + records), pa.int64()),
                    "timestamp": pa.array([time.time_ns() // 1000] * records, pa.timestamp("us", tz="UTC")),
                    "timestamp_type": pa.array([0] * records, pa.int32()),
                    "key": pa.array([str(i).encode() for i in range(records)], pa.binary()),
                    "value": pa.array([payload] * records, pa.binary()),
                },
            )
            if n >= 0:
                _add(plain, records, records * record_size, time.perf_counter() - t0)
    producer.close()
    return ours, plain
