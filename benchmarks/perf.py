"""The drivers of ``lakelog perf``'s verbs (its arguments are ``lakelog/cli/perf.py``'s, in the wheel;
these run from a checkout). ``perf produce`` is kafka-producer-perf-test (``--num-records``,
``--record-size``, ``--throughput``, ``--producer-props``, ``--producer.config``) through a producer,
without Spark; ``--api dataframe`` / ``--compare-plain`` measure Spark writes beside plain Delta.
Each ``cmd_perf_<verb>(args, out)`` runs one verb."""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakelog.cli.arguments import (
    Out,
    client_config,
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
    # Batch by batch beside a plain Delta append (a Spark job for write(df), delta-rs for the producer).
    batched = args.api == "dataframe" or args.compare_plain
    if (args.beside_producer_rate or args.source != "generated") and args.api != "dataframe":
        raise InvalidConfigError("--beside-producer-rate and --source apply to --api dataframe")
    if batched and (config or (args.throughput or -1) > 0 or args.payload_file):
        raise InvalidConfigError(
            "--producer-props, --producer.config, --throughput and --payload-file apply to --api producer "
            "without --compare-plain"
        )
    if not batched:
        from lakelog.engine.client_config import PRODUCER_CONFIG_KEYS
        from lakelog.engine.config import resolve_config

        resolve_config(PRODUCER_CONFIG_KEYS, config, what="producer config")
        payloads = _payloads(args)
    store = open_store(args, create=True)
    partitions = _topic_for_perf(store, args.topic, args.partitions)
    before = sum(store.end_offsets(args.topic).values())
    if batched:
        _perf_produce_batched(store, args, partitions, out)
    else:
        _perf_produce(store, args, config, payloads, out)
    landed = sum(store.end_offsets(args.topic).values()) - before
    # The warm-up batches of a batched run are written too, and not counted in its figures.
    warmup = args.warmup_batches * min(args.batch_size, args.num_records) if batched else 0
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


def _perf_produce_batched(store: Any, args: argparse.Namespace, partitions: int, out: Out) -> None:
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
        kafka=args.kafka,
        kafka_flush=not args.no_kafka_flush,
    )


def cmd_perf_startup(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.scratch import check_work_dir
    from benchmarks.startup import perf_startup

    check_work_dir(args.work_dir, s3=False)
    perf_startup(
        rounds=args.rounds,
        lines=args.lines,
        kafka=args.kafka,
        work_dir=args.work_dir,
        out=out,
        bytecode_cache=not args.no_bytecode_cache,
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


def _agent_checkout(spec: str) -> tuple[str, str]:
    """``LABEL=PATH`` of ``perf serve --agent``: a label and a lakelog source tree."""
    label, sep, path = spec.partition("=")
    if not sep or not label or not (Path(path) / "lakelog" / "kafka_endpoint").is_dir():
        raise InvalidConfigError(f"--agent takes LABEL=PATH, PATH a lakelog source tree; got {spec!r}")
    return label, str(Path(path).resolve())


def cmd_perf_serve(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.scratch import check_work_dir
    from benchmarks.serve import ServeWorkload, perf_serve
    from benchmarks.serve_security import perf_serve_security

    check_work_dir(args.work_dir, s3=False)
    workload = ServeWorkload(
        records=args.num_records,
        record_size=args.record_size,
        rate=args.rate,
        seconds=args.seconds,
        repeat=args.repeat,
        kafka=not args.no_kafka,
        work_dir=args.work_dir,
        kafka_flush=not args.no_kafka_flush,
        agents=tuple(_agent_checkout(spec) for spec in args.agent),
        throughput=not args.latency_only,
        warmup_seconds=args.warmup_seconds,
    )
    (perf_serve_security if args.security else perf_serve)(workload, out)


def cmd_perf_schemas(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.schemas import perf_schemas
    from benchmarks.scratch import check_work_dir

    check_work_dir(args.work_dir, s3=False)
    if args.materialize:
        from benchmarks.schemas import perf_materialize

        perf_materialize(
            records=args.num_records,
            partitions=args.partitions,
            rounds=args.rounds,
            work_dir=args.work_dir,
            out=out,
        )
        return
    perf_schemas(
        schemas=args.num_schemas, subjects=args.subjects, lookups=args.lookups, work_dir=args.work_dir, out=out
    )


def cmd_perf_producer_perf(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.producer_perf import perf_producer_performance
    from benchmarks.scratch import check_work_dir

    check_work_dir(args.work_dir, s3=False)
    if args.warmup_records >= args.num_records:
        raise InvalidConfigError(
            f"--warmup-records {args.warmup_records} leaves none of --num-records {args.num_records} to measure"
        )
    perf_producer_performance(
        records=args.num_records,
        record_size=args.record_size,
        repeat=args.repeat,
        warmup_records=args.warmup_records,
        producer_props=args.producer_props,
        kafka=not args.no_kafka,
        kafka_flush=not args.no_kafka_flush,
        work_dir=args.work_dir,
        out=out,
    )


def cmd_perf_rebalance(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.rebalance import perf_rebalance
    from benchmarks.scratch import check_work_dir

    check_work_dir(args.work_dir, s3=False)
    sizes = {"members": args.members, "partitions": args.partitions, "repeat": args.repeat}
    perf_rebalance(**sizes, kafka=not args.no_kafka, work_dir=args.work_dir, out=out)


def cmd_perf_streams(args: argparse.Namespace, out: Out) -> None:
    from benchmarks.scratch import check_work_dir
    from benchmarks.streams import perf_streams

    check_work_dir(args.work_dir, s3=False)
    perf_streams(
        lines=args.lines,
        words_per_line=args.words_per_line,
        vocabulary=args.vocabulary,
        partitions=args.partitions,
        rounds=args.rounds,
        warmup_lines=args.warmup_lines,
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
            rounds=args.rounds,
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
