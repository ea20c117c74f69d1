"""``lakelog perf``: throughput tests like kafka-*-perf-test, each beside its baseline (plain Delta,
pyarrow, delta-rs, a real Apache Kafka broker).

The verbs' arguments are here; their drivers are the repository's ``benchmarks/`` folder, which is
not part of the wheel (it needs confluent-kafka, Spark and a Kafka broker's jars, which a user's
install lacks). So ``lakelog perf`` runs from a checkout: the one lakelog is installed from
(``pip install -e .``), or the one the working directory is in; elsewhere it exits with 2 saying so.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from lakelog.cli.arguments import COUNT, NON_NEGATIVE, WORK_DIR_HELP, Out, float_at_least, int_at_least
from lakelog.engine.errors import InvalidConfigError


def checkout_root(start: Path | None = None) -> Path | None:
    """The lakelog checkout holding ``benchmarks/perf.py``: the one this lakelog package sits in,
    else ``start`` (default: the working directory) or a directory above it; None if neither."""
    here = Path(__file__).resolve().parents[2]
    start = Path.cwd() if start is None else start
    for root in (here, start, *start.parents):
        if (root / "benchmarks" / "perf.py").is_file() and (root / "pyproject.toml").is_file():
            return root
    return None


def benchmark_drivers(start: Path | None = None) -> ModuleType:
    """``benchmarks.perf`` of the checkout :func:`checkout_root` finds, importable from then on.
    Raises InvalidConfigError (exit code 2) when there is no checkout."""
    root = checkout_root(start)
    if root is None:
        raise InvalidConfigError(
            "lakelog perf runs from a lakelog checkout: its benchmarks/ folder is not installed with the "
            "package. Run it inside a clone of the repository (or from an editable install: pip install -e .)"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    drivers = importlib.import_module("benchmarks.perf")
    if Path(drivers.__file__ or "").resolve().parent != root / "benchmarks":
        raise InvalidConfigError(f"lakelog perf: another package named benchmarks ({drivers.__file__}) hides {root}")
    return drivers


def _driver(verb: str) -> Callable[[argparse.Namespace, Out], None]:
    def run(args: argparse.Namespace, out: Out) -> None:
        getattr(benchmark_drivers(), f"cmd_perf_{verb}")(args, out)

    return run


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
    p.set_defaults(func=_driver("produce"))
    p = psub.add_parser("consume", parents=parents)
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--partition", type=NON_NEGATIVE, help="read one partition (default: all)")
    p.add_argument("--repeats", type=COUNT, default=3)
    p.add_argument("--compare-plain", action="store_true", help="also read with plain Delta and the same filter")
    p.add_argument("--group", help="consume through a member of this group (to the client, as Arrow)")
    p.set_defaults(func=_driver("consume"))
    p = psub.add_parser("transactions", parents=parents, help="latency of small transactions")
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--partitions", type=COUNT, default=8, help="partitions of the topic if it is created")
    p.add_argument("--num-transactions", type=COUNT, default=50)
    p.add_argument("--records", type=COUNT, default=10, help="records per transaction")
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--compare-plain", action="store_true", help="also append as many rows with plain Delta")
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=_driver("transactions"))
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
    p.add_argument(
        "--kafka",
        action="store_true",
        help="also run confluent-kafka against a Kafka broker: throughput's per-record produce()/poll() loops "
        "and contention's processes, interleaved with lakelog's",
    )
    p.add_argument(
        "--no-kafka-flush",
        action="store_true",
        help="with --kafka, skip contention's durable baseline (a topic with flush.messages=1: fsync after "
        "every append)",
    )
    p.add_argument("--work-dir", help="where the temporary stores go (default: the system's temp directory)")
    p.set_defaults(func=_driver("commit"))
    p = psub.add_parser(
        "startup",
        parents=parents,
        help="fresh processes: import lakelog, python -c to the first acknowledged record, the topics/produce/"
        "consume commands, beside confluent-kafka's import and first produce (no Spark, no --store)",
    )
    p.add_argument("--rounds", type=COUNT, default=3, help="interleaved rounds (medians reported)")
    p.add_argument("--lines", type=COUNT, default=10_000, help="lines the produce command reads from stdin")
    p.add_argument(
        "--kafka", action="store_true", help="also time confluent-kafka's first acknowledged record from a broker"
    )
    p.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="run the processes in this environment as it is (default: compiled modules cached in the run's "
        "own directory, filled by an untimed round, as an installed lakelog runs)",
    )
    p.add_argument("--work-dir", help="where the temporary store goes (default: the system's temp directory)")
    p.set_defaults(func=_driver("startup"))
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
    p.set_defaults(func=_driver("groups"))
    p = psub.add_parser(
        "serve",
        parents=parents,
        help="one Kafka client against lakelog serve and a Kafka broker: produce, latency, fetch",
    )
    p.add_argument("--num-records", type=COUNT, default=1_000_000)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--rate", type=COUNT, default=1000, help="records/s of the fixed-rate latency run")
    p.add_argument("--seconds", type=float_at_least(1), default=20, help="length of the fixed-rate run")
    p.add_argument(
        "--warmup-seconds",
        type=float_at_least(0),
        default=2,
        help="seconds at the fixed rate before records are counted, on every side (default 2)",
    )
    p.add_argument("--repeat", type=COUNT, default=3, help="interleaved rounds, each side once per round (medians)")
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="also measure the agent of the lakelog source tree PATH (another checkout: main beside a branch) "
        "as the side LABEL, in the same rounds",
    )
    p.add_argument("--latency-only", action="store_true", help="only the fixed-rate latency run (no throughput runs)")
    p.add_argument(
        "--no-kafka-flush",
        action="store_true",
        help="skip the broker's durable baseline (a topic with flush.messages=1: fsync after every append)",
    )
    p.add_argument(
        "--security",
        action="store_true",
        help="instead: produce throughput and p99 over SASL_SSL (SCRAM-SHA-512) vs PLAINTEXT on both sides, "
        "and lakelog's SASL_SSL/PLAINTEXT ratio over the broker's",
    )
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker side")
    p.add_argument("--work-dir", help="where the temporary store goes (default: the system's temp directory)")
    p.set_defaults(func=_driver("serve"))
    p = psub.add_parser(
        "producer-perf",
        parents=parents,
        help="Kafka's ProducerPerformance (Java producer defaults: idempotent, acks=all) against lakelog serve "
        "and a Kafka broker (its defaults, and a flush.messages=1 topic as the durable baseline)",
    )
    p.add_argument("--num-records", type=COUNT, default=1_000_000)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--repeat", type=COUNT, default=1, help="interleaved runs per side (median reported)")
    p.add_argument(
        "--warmup-records",
        type=NON_NEGATIVE,
        default=0,
        help="records at the start of each run left out of its figures, on every side (the tool's own option)",
    )
    p.add_argument(
        "--producer-props",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="producer config on every side, e.g. enable.idempotence=false (default: the Java producer's own)",
    )
    p.add_argument(
        "--no-kafka-flush",
        action="store_true",
        help="skip the broker's durable baseline (a topic with flush.messages=1: fsync after every append)",
    )
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker sides")
    p.add_argument("--work-dir", help="where the temporary stores go (default: the system's temp directory)")
    p.set_defaults(func=_driver("producer_perf"))
    p = psub.add_parser(
        "rebalance",
        parents=parents,
        help="Java consumers (classic protocol, default assignor): time until the group settles after its last "
        "member starts, against lakelog serve and a Kafka broker",
    )
    p.add_argument("--members", type=COUNT, default=8, help="the group's size, the last one timed")
    p.add_argument("--partitions", type=COUNT, default=16)
    p.add_argument("--repeat", type=COUNT, default=3, help="interleaved rounds per side (median reported)")
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker side")
    p.add_argument("--work-dir", help="where the temporary stores go (default: the system's temp directory)")
    p.set_defaults(func=_driver("rebalance"))
    p = psub.add_parser(
        "streams",
        parents=parents,
        help="Kafka Streams' word count under exactly_once_v2, end to end, against lakelog serve and a Kafka broker",
        description="Produces --lines lines into an input topic of --partitions partitions, then times a Kafka "
        "Streams 4.4 word count (exactly_once_v2, Streams' defaults otherwise: commit.interval.ms 100) from its "
        "launch until a read_committed reader of the output topic has every word's final count; lines/s per "
        "side, --rounds interleaved rounds after a warm-up round, medians, and the ratio lakelog/Kafka.",
    )
    p.add_argument("--lines", type=COUNT, default=1_000_000)
    p.add_argument("--words-per-line", type=COUNT, default=5)
    p.add_argument("--vocabulary", type=COUNT, default=1000, help="distinct words")
    p.add_argument("--partitions", type=COUNT, default=4, help="input (and output) partitions")
    p.add_argument("--rounds", type=COUNT, default=3, help="interleaved rounds per side (median reported)")
    p.add_argument(
        "--warmup-lines", type=NON_NEGATIVE, default=100_000, help="lines of the uncounted first round (0: none)"
    )
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker side")
    p.add_argument("--work-dir", help="where the temporary store goes (default: the system's temp directory)")
    p.set_defaults(func=_driver("streams"))
    p = psub.add_parser(
        "schemas",
        parents=parents,
        help="the Schema Registry: register, lookups by id and by subject (p50/p99) from a warm client",
        description="Registers --num-schemas Avro schemas under --subjects subjects in a registry served over a "
        "fresh temporary store, then makes --lookups lookups of each kind by id and by subject through one kept-"
        "open HTTP connection, printing p50, p99 and requests/s per kind. With --materialize, measures typed "
        "tables instead: --num-records Avro records materialized by lakelog tables run against the same Spark job "
        "decoding the raw topic with from_avro by hand, --rounds interleaved rounds, medians.",
    )
    p.add_argument("--num-schemas", type=COUNT, default=200)
    p.add_argument("--subjects", type=COUNT, default=20)
    p.add_argument("--lookups", type=COUNT, default=2000)
    p.add_argument(
        "--materialize",
        action="store_true",
        help="instead: typed materialization (lakelog tables run) of --num-records Avro records, records/s as a "
        "ratio to the same Spark job decoding the raw topic with from_avro by hand",
    )
    p.add_argument("--num-records", type=COUNT, default=1_000_000, help="with --materialize")
    p.add_argument("--partitions", type=COUNT, default=2, help="with --materialize: the topic's partitions")
    p.add_argument("--rounds", type=COUNT, default=3, help="with --materialize: interleaved rounds (median)")
    p.add_argument("--work-dir", help="where the temporary store goes (default: the system's temp directory)")
    p.set_defaults(func=_driver("schemas"))
    p = psub.add_parser("stream", parents=parents, help="streaming copy topic -> topic vs a plain Delta stream copy")
    p.add_argument("--num-records", type=COUNT, default=200_000)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--partitions", type=COUNT, default=8)
    p.add_argument("--latency-samples", type=COUNT, default=30)
    p.add_argument("--rounds", type=COUNT, default=3, help="interleaved timed copies per side (median reported)")
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=_driver("stream"))
    p = psub.add_parser(
        "maintain", parents=parents, help="reads before/after OPTIMIZE, tail reads as a topic grows, compaction"
    )
    p.add_argument("--commits", type=COUNT, default=2000, help="small commits of 50 records")
    p.add_argument("--small", type=COUNT, default=1_000_000, help="records of the smaller growth topic")
    p.add_argument("--large", type=COUNT, default=10_000_000, help="records of the larger growth topic")
    p.add_argument("--compaction-records", type=COUNT, default=1_000_000)
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=_driver("maintain"))
