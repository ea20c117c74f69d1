"""``lakelog perf``: throughput tests. ``perf produce`` is kafka-producer-perf-test (``--num-records``,
``--record-size``, ``--throughput``, ``--producer-props``, ``--producer.config``) through a producer,
without Spark; ``--api dataframe`` / ``--compare-plain`` measure Spark writes beside plain Delta."""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from lakelog.cli.arguments import (
    COUNT,
    NON_NEGATIVE,
    WORK_DIR_HELP,
    Out,
    client_config,
    float_at_least,
    int_at_least,
    note,
    open_store,
)
from lakelog.cli.tables import progress_bar
from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.topics import validate_topic_name

REPORT_INTERVAL_S = 5.0  # kafka-producer-perf-test's reporting interval


class ProducerStats:
    """kafka-producer-perf-test's Stats: a line per reporting window, then the totals with percentiles."""

    def __init__(self, report: Out) -> None:
        self._report = report
        self._lock = threading.Lock()
        self.start = time.perf_counter()
        self.latencies_ms: list[float] = []
        self.bytes = 0
        self._window: list[float] = []
        self._window_bytes = 0
        self._window_start = self.start

    def record(self, latency_ms: float, size: int) -> None:
        with self._lock:
            self.latencies_ms.append(latency_ms)
            self.bytes += size
            self._window.append(latency_ms)
            self._window_bytes += size
            now = time.perf_counter()
            if now - self._window_start >= REPORT_INTERVAL_S:
                self._report(self._line(len(self._window), self._window_bytes, now - self._window_start, self._window))
                self._window, self._window_bytes, self._window_start = [], 0, now

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.latencies_ms)

    @staticmethod
    def _line(count: int, nbytes: int, seconds: float, latencies: list[float]) -> str:
        rate = count / seconds if seconds > 0 else 0.0
        mb = nbytes / (1024 * 1024) / seconds if seconds > 0 else 0.0
        avg = statistics.fmean(latencies) if latencies else 0.0
        top = max(latencies, default=0.0)
        return (
            f"{count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
            f"{avg:.1f} ms avg latency, {top:.1f} ms max latency."
        )

    def summary(self, seconds: float) -> str:
        with self._lock:
            ordered = sorted(self.latencies_ms)
            count, nbytes = len(ordered), self.bytes

        def pct(q: float) -> int:
            return int(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) if ordered else 0

        rate = count / seconds if seconds > 0 else 0.0
        mb = nbytes / (1024 * 1024) / seconds if seconds > 0 else 0.0
        avg = statistics.fmean(ordered) if ordered else 0.0
        return (
            f"{count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{max(ordered, default=0.0):.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
            f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th."
        )


class Throttler:
    """Kafka's ThroughputThrottler: at most ``per_second`` sends a second on average (-1: no cap)."""

    def __init__(self, per_second: float, start: float) -> None:
        self._rate = per_second
        self._start = start

    def wait(self, sent: int) -> None:
        if self._rate <= 0:
            return
        due = self._start + sent / self._rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def _payloads(args: argparse.Namespace) -> list[bytes]:
    """--payload-file's payloads, or one --record-size payload of random upper-case letters (as Kafka's)."""
    if args.payload_file is None:
        rng = random.Random(0)
        return [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]
    try:
        with open(args.payload_file, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise InvalidConfigError(f"--payload-file: cannot read {args.payload_file}: {exc.strerror or exc}") from exc
    payloads = [p.encode() for p in text.split(args.payload_delimiter.encode().decode("unicode_escape")) if p]
    if not payloads:
        raise InvalidConfigError(f"--payload-file {args.payload_file} holds no payloads")
    return payloads


def _check_perf_args(args: argparse.Namespace) -> None:
    from benchmarks.scratch import check_work_dir

    check_work_dir(args.work_dir)
    if hasattr(args, "topic"):
        validate_topic_name(args.topic)


def _baseline_dir(args: argparse.Namespace, kind: str, needed: bool = True) -> contextlib.AbstractContextManager:
    """The run's own scratch directory for baselines (None when not ``needed``); removed afterwards."""
    from benchmarks.scratch import scratch_dir

    return scratch_dir(kind, args.work_dir) if needed else contextlib.nullcontext(None)


def _topic_for_perf(store: Any, topic: str, partitions: int) -> int:
    if topic not in store.list_topics():
        store.create_topic(topic, partitions=partitions)
    return store.describe_topic(topic).partitions


def cmd_perf_produce(args: argparse.Namespace, out: Out) -> None:
    _check_perf_args(args)
    config = client_config(args.producer_config, "--producer.config", args.producer_props, "--producer-props")
    if args.throughput is not None and args.throughput == 0:
        raise InvalidConfigError("--throughput must be positive, or -1 for no limit")
    spark_side = args.api == "dataframe" or args.compare_plain
    if (args.beside_producer_rate or args.source != "generated") and args.api != "dataframe":
        raise InvalidConfigError("--beside-producer-rate and --source apply to --api dataframe")
    if spark_side and (config or (args.throughput or -1) > 0 or args.payload_file):
        raise InvalidConfigError(
            "--producer-props, --producer.config, --throughput and --payload-file apply to --api producer "
            "without --compare-plain"
        )
    if not spark_side:
        from lakelog.engine.client_config import PRODUCER_CONFIG_KEYS
        from lakelog.engine.config import resolve_config

        resolve_config(PRODUCER_CONFIG_KEYS, config, what="producer config")
        payloads = _payloads(args)
    store = open_store(args, create=True)
    partitions = _topic_for_perf(store, args.topic, args.partitions)
    before = sum(store.end_offsets(args.topic).values())
    if spark_side:
        _perf_produce_spark(store, args, partitions, out)
    else:
        _perf_produce(store, args, config, payloads, out)
    landed = sum(store.end_offsets(args.topic).values()) - before
    # The warm-up batches of the Spark side are written too, and not counted in its figures.
    warmup = args.warmup_batches * min(args.batch_size, args.num_records) if spark_side else 0
    if args.beside_producer_rate:
        pass  # every batch was written twice and the neighbour's records landed too
    elif landed != args.num_records + warmup:
        note(f"note: {landed} records landed in {args.topic} during the run (other writers?)")
    elif warmup:
        note(f"note: {warmup} warm-up records also landed in {args.topic} (not counted above)")


def _perf_produce(
    store: Any, args: argparse.Namespace, config: dict[str, Any], payloads: list[bytes], out: Out
) -> None:
    keys = args.keys
    bar = progress_bar("producing", args.num_records)
    report: Out = bar.console.print if bar is not None else out
    stats = ProducerStats(report)
    failures: list[BaseException] = []
    single = payloads[0] if len(payloads) == 1 else None
    rng = random.Random(1)
    with contextlib.ExitStack() as stack:
        if bar is not None:
            stack.enter_context(bar)
        with store.producer(**config) as producer:
            started = time.perf_counter()
            throttle = Throttler(args.throughput or -1, started)
            for i in range(args.num_records):
                value = single if single is not None else rng.choice(payloads)
                key = str(i % keys).encode() if keys else None
                size = len(value) + (len(key) if key else 0)
                sent = time.perf_counter()
                future = producer.send(args.topic, value, key=key)
                future.add_callback(
                    lambda _md, sent=sent, size=size: stats.record((time.perf_counter() - sent) * 1000, size)
                )
                future.add_errback(failures.append)
                if bar is not None and i % 1000 == 999:
                    bar.update(bar.task_ids[0], completed=stats.count)
                throttle.wait(i + 1)
            producer.flush()
            seconds = time.perf_counter() - started
            if bar is not None:
                bar.update(bar.task_ids[0], completed=stats.count)
    if failures:
        note(f"error: {len(failures)} record(s) failed; first: {failures[0]}")
    out(stats.summary(seconds))
    if failures:
        raise failures[0]


def _perf_produce_spark(store: Any, args: argparse.Namespace, partitions: int, out: Out) -> None:
    from benchmarks.produce_consume import PerfResult, perf_produce_dataframe, perf_produce_producer, ratio

    progress = (lambda msg: print(msg, file=sys.stderr)) if args.progress else (lambda _msg: None)
    beside = PerfResult("beside a producer", 0, 0) if args.beside_producer_rate else None
    needs_work_dir = args.compare_plain or bool(args.beside_producer_rate) or args.source == "parquet"
    with _baseline_dir(args, "produce", needs_work_dir) as work:
        workload = {
            "num_records": args.num_records,
            "record_size": args.record_size,
            "batch_size": args.batch_size,
            "keys": args.keys,
            "compare_plain": args.compare_plain,
            "plain_path": f"{work}/plain-delta" if work else "",
            "warmup_batches": args.warmup_batches,
            "progress": progress,
        }
        if args.api == "producer":
            ours, plain = perf_produce_producer(store, args.topic, **workload)
        else:
            ours, plain = perf_produce_dataframe(
                store,
                args.topic,
                partitions=partitions,
                beside_rate=args.beside_producer_rate,
                beside=beside,
                work_dir=str(work or ""),
                source=args.source,
                **workload,
            )
    out(f"lakelog:     {ours.producer_summary()}")
    if plain is not None:
        out(f"plain delta: {plain.producer_summary()}")
        out(f"throughput ratio lakelog/plain delta: {ratio(ours, plain):.2f}")
    if beside is not None:
        out(f"beside a producer at {args.beside_producer_rate:g} commits/s: {beside.producer_summary()}")
        out(f"time ratio beside/alone: {ratio(ours, beside):.2f}")


def cmd_perf_consume(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.produce_consume import perf_consume, perf_consume_group, ratio

    if args.group and args.partition is not None:
        raise InvalidConfigError("--group reads the whole topic; drop --partition")
    store = open_store(args)
    if args.group:
        ours, plain = perf_consume_group(
            store, args.topic, group_id=args.group, compare_plain=args.compare_plain, repeats=args.repeats
        )
    else:
        ours, plain = perf_consume(
            store, args.topic, partition=args.partition, compare_plain=args.compare_plain, repeats=args.repeats
        )
    started = datetime.now(tz=UTC).timestamp() - ours.seconds
    out("lakelog:\n" + ours.consumer_summary(started))
    if plain is not None:
        out("plain delta:\n" + plain.consumer_summary(started))
        out(f"throughput ratio lakelog/plain delta: {ratio(ours, plain):.2f}")


def cmd_perf_transactions(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.produce_consume import perf_transactions

    _check_perf_args(args)
    store = open_store(args, create=True)
    if args.topic not in store.list_topics():
        store.create_topic(args.topic, partitions=args.partitions)
    with _baseline_dir(args, "transactions", args.compare_plain) as work:
        ours, plain = perf_transactions(
            store,
            args.topic,
            transactions=args.num_transactions,
            records=args.records,
            record_size=args.record_size,
            compare_plain=args.compare_plain,
            plain_path=f"{work}/plain-delta" if work else "",
        )
    for result in (ours, plain):
        if result is not None:
            out(
                f"{result.label}: {len(result.latencies_ms)} commits of {args.records} records, "
                f"p50 {result.percentile(0.5):.1f} ms, p99 {result.percentile(0.99):.1f} ms"
            )


def cmd_perf_commit(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.commit import SECTIONS, perf_commit
    from benchmarks.scratch import check_work_dir

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown or not sections:
        raise InvalidConfigError(f"--sections takes {', '.join(SECTIONS)}; got {args.sections!r}")
    check_work_dir(args.work_dir, s3=False)
    perf_commit(
        sections,
        commits=args.commits,
        records=args.num_records,
        record_size=args.record_size,
        processes=args.processes,
        batches=args.batches,
        small_versions=args.small_versions,
        large_versions=args.large_versions,
        work_dir=args.work_dir,
        out=out,
    )


def cmd_perf_groups(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.groups import perf_groups
    from benchmarks.scratch import check_work_dir

    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise InvalidConfigError(f"--sizes takes group sizes like 1,4,8,16; got {args.sizes!r}") from exc
    if not sizes or min(sizes) < 1:
        raise InvalidConfigError(f"--sizes takes group sizes like 1,4,8,16; got {args.sizes!r}")
    check_work_dir(args.work_dir, s3=False)
    perf_groups(
        sizes,
        records=args.num_records,
        repeat=args.repeat,
        idle_seconds=args.idle_seconds,
        kafka=not args.no_kafka,
        work_dir=args.work_dir,
        out=out,
        commit_interval_ms=args.commit_interval_ms,
        warmup=not args.no_warmup,
    )


def cmd_perf_serve(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.scratch import check_work_dir
    from benchmarks.serve import perf_serve

    check_work_dir(args.work_dir, s3=False)
    perf_serve(
        records=args.num_records,
        record_size=args.record_size,
        rate=args.rate,
        seconds=args.seconds,
        repeat=args.repeat,
        kafka=not args.no_kafka,
        work_dir=args.work_dir,
        out=out,
    )


def cmd_perf_stream(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.stream import perf_stream

    _check_perf_args(args)
    store = open_store(args, create=True)
    with _baseline_dir(args, "stream") as work:
        figures = perf_stream(
            store,
            records=args.num_records,
            record_size=args.record_size,
            partitions=args.partitions,
            samples=args.latency_samples,
            work_dir=work,
        )
    for line in figures.lines():
        out(line)


def cmd_perf_maintain(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.maintain import perf_maintain

    _check_perf_args(args)
    store = open_store(args, create=True)
    with _baseline_dir(args, "maintain") as work:
        perf_maintain(
            store,
            commits=args.commits,
            small=args.small,
            large=args.large,
            compaction_records=args.compaction_records,
            work_dir=work,
            out=lambda line: out(line) or sys.stdout.flush(),
        )


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    perf = commands.add_parser("perf", parents=parents, help="throughput tests like kafka-*-perf-test")
    psub = perf.add_subparsers(dest="action", required=True)
    p = psub.add_parser(
        "produce",
        parents=parents,
        help="kafka-producer-perf-test: send records through a producer, report throughput and latency",
        description="Sends --num-records records of --record-size bytes through a producer (no Spark), at most "
        "--throughput records/s, printing a line every 5 s and the totals with latency percentiles (send to "
        "commit). The count printed is what was acknowledged, and what landed in the topic. --api dataframe "
        "or --compare-plain measure Spark writes instead, beside plain Delta appends.",
    )
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--num-records", type=COUNT, required=True)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--throughput", type=int_at_least(-1), default=-1, help="records/s at most (-1: no limit)")
    p.add_argument(
        "--producer-props", nargs="+", action="extend", metavar="KEY=VALUE", help="producer config, e.g. linger.ms=5"
    )
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="producer config properties file")
    p.add_argument(
        "--payload-file", metavar="FILE", help="payloads to choose from at random (instead of --record-size)"
    )
    p.add_argument("--payload-delimiter", default="\\n", help="separates payloads in --payload-file (default \\n)")
    p.add_argument("--partitions", type=COUNT, default=8, help="partitions of the topic if it is created")
    p.add_argument("--keys", type=NON_NEGATIVE, default=0, help="distinct keys (0: keyless records)")
    p.add_argument("--api", choices=["producer", "dataframe"], default="producer", help="dataframe: Store.write")
    p.add_argument("--batch-size", type=COUNT, default=100_000, help="Spark side: records per commit")
    p.add_argument("--compare-plain", action="store_true", help="Spark side: also append the rows with plain Delta")
    p.add_argument(
        "--warmup-batches", type=NON_NEGATIVE, default=0, help="Spark side: batches written first and not counted"
    )
    p.add_argument(
        "--beside-producer-rate",
        type=float,
        default=0.0,
        metavar="COMMITS_PER_S",
        help="dataframe: also write each batch while another process commits this many one-record commits per "
        "second to the topic, and report the time ratio",
    )
    p.add_argument(
        "--source",
        choices=["generated", "parquet"],
        default="generated",
        help="dataframe: each batch computed by Spark expressions at every read, or read from a Parquet file "
        "written beforehand (as a table's rows would be)",
    )
    p.add_argument("--progress", action="store_true", help="Spark side: a line per batch on stderr")
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_produce)
    p = psub.add_parser("consume", parents=parents)
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--partition", type=NON_NEGATIVE, help="read one partition (default: all)")
    p.add_argument("--repeats", type=COUNT, default=3)
    p.add_argument("--compare-plain", action="store_true", help="also read with plain Delta and the same filter")
    p.add_argument("--group", help="consume through a member of this group (to the client, as Arrow)")
    p.set_defaults(func=cmd_perf_consume)
    p = psub.add_parser("transactions", parents=parents, help="latency of small transactions")
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--partitions", type=COUNT, default=8, help="partitions of the topic if it is created")
    p.add_argument("--num-transactions", type=COUNT, default=50)
    p.add_argument("--records", type=COUNT, default=10, help="records per transaction")
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--compare-plain", action="store_true", help="also append as many rows with plain Delta")
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_transactions)
    p = psub.add_parser(
        "commit",
        parents=parents,
        help="commit latency, the cost of directory syncs, throughput, contention, time to first ack, growth "
        "(no Spark, no --store)",
    )
    p.add_argument("--sections", default="latency,dir-sync,throughput,contention,first-ack,growth")
    p.add_argument("--commits", type=COUNT, default=300, help="one-record commits for latency and dir-sync")
    p.add_argument("--num-records", type=COUNT, default=1_000_000, help="records for throughput")
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--processes", type=COUNT, default=4, help="contending processes")
    p.add_argument("--batches", type=COUNT, default=100, help="100-record batches per contending process")
    p.add_argument("--small-versions", type=COUNT, default=100)
    p.add_argument("--large-versions", type=COUNT, default=20_000)
    p.add_argument("--work-dir", help="where the temporary stores go (default: the system's temp directory)")
    p.set_defaults(func=cmd_perf_commit)
    p = psub.add_parser(
        "groups",
        parents=parents,
        help="consumer groups of N processes: throughput, rebalances, duplicates, next to a Kafka broker",
    )
    p.add_argument("--sizes", default="1,4,8,16", help="group sizes (members)")
    p.add_argument(
        "--num-records",
        type=COUNT,
        default=8_000_000,
        help="records in the topic every run reads (enough for one lakelog member to take ~2 s; "
        "with fewer, runs measure process start-up more than throughput)",
    )
    p.add_argument("--repeat", type=COUNT, default=3, help="throughput runs per size and side (median reported)")
    p.add_argument(
        "--no-warmup", action="store_true", help="count the first run too (by default a warm-up lap is discarded)"
    )
    p.add_argument(
        "--idle-seconds", type=float_at_least(0), default=60, help="how long to count an idle group's commits"
    )
    p.add_argument(
        "--commit-interval-ms",
        type=COUNT,
        default=200,
        help="members (both sides) commit at most this often while reading, and when partitions are revoked "
        "(Kafka's auto.commit.interval.ms defaults to 5000)",
    )
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker side")
    p.add_argument("--work-dir", help="where the temporary stores go (default: the system's temp directory)")
    p.set_defaults(func=cmd_perf_groups)
    p = psub.add_parser(
        "serve",
        parents=parents,
        help="one Kafka client against lakelog serve and a Kafka broker: produce, latency, fetch",
    )
    p.add_argument("--num-records", type=COUNT, default=1_000_000)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--rate", type=COUNT, default=1000, help="records/s of the fixed-rate latency run")
    p.add_argument("--seconds", type=float_at_least(1), default=20, help="length of the fixed-rate run")
    p.add_argument("--repeat", type=COUNT, default=1, help="interleaved runs per side (median reported)")
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker side")
    p.add_argument("--work-dir", help="where the temporary store goes (default: the system's temp directory)")
    p.set_defaults(func=cmd_perf_serve)
    p = psub.add_parser("stream", parents=parents, help="streaming copy topic -> topic vs a plain Delta stream copy")
    p.add_argument("--num-records", type=COUNT, default=200_000)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--partitions", type=COUNT, default=8)
    p.add_argument("--latency-samples", type=COUNT, default=30)
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_stream)
    p = psub.add_parser(
        "maintain", parents=parents, help="reads before/after OPTIMIZE, tail reads as a topic grows, compaction"
    )
    p.add_argument("--commits", type=COUNT, default=2000, help="small commits of 50 records")
    p.add_argument("--small", type=COUNT, default=1_000_000, help="records of the smaller growth topic")
    p.add_argument("--large", type=COUNT, default=10_000_000, help="records of the larger growth topic")
    p.add_argument("--compaction-records", type=COUNT, default=1_000_000)
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_maintain)
