"""``lakelog perf serve --security``: what TLS and SASL cost ``lakelog serve``, beside what they
cost a real Kafka broker.

Both sides are configured the same way: a PLAINTEXT listener and a SASL_SSL listener (a PEM
keystore with a certificate for 127.0.0.1 made here, SCRAM-SHA-512 with one user of 4096
iterations, Kafka's StandardAuthorizer with that user and ``User:ANONYMOUS`` as super users).
The agent gets a fresh store for each run (a run's thousands of commits would slow the next
run's appends to the same Delta log); the broker keeps one, a new topic per run.
The same client (confluent-kafka, :mod:`benchmarks.serve`'s produce throughput and fixed-rate
latency runs) measures produce throughput and produce p99 over each listener, each on a topic of
its own. Rounds interleave the sides and the listeners (each round swaps who goes first); the
figures are medians over rounds, and the result is the SASL_SSL/PLAINTEXT ratio of each side
and lakelog's ratio over Kafka's (the target: within ±20 %, TLS costs lakelog no more than it
costs Kafka). The issue is #29's benchmark.
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from benchmarks.serve import ServeWorkload

PROTOCOLS = ("PLAINTEXT", "SASL_SSL")
SIDES = ("lakelog", "kafka")
MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096  # Kafka's default for kafka-configs and kafka-storage --add-scram
USER = "perf"
TOPIC = "perf-security"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USERS = f"User:{USER};User:ANONYMOUS"
TOLERANCE = 0.20  # the issue's ±20 %

Figures = dict[str, float]


def security_ratios(medians: Mapping[str, Mapping[str, Figures]]) -> dict[str, float]:
    """From the median figures by side and protocol (``medians["lakelog"]["SASL_SSL"]
    ["produce_rps"]``): each side's SASL_SSL/PLAINTEXT ratio of produce throughput and of produce
    p99 (``lakelog_rps``, ``lakelog_p99``, ``kafka_rps``, ``kafka_p99``), and when both sides
    were measured lakelog's ratio over Kafka's (``relative_rps``, ``relative_p99``). A throughput
    ratio below 1 and a p99 ratio above 1 mean TLS costs; a relative figure of 1 means it costs
    both sides alike. Raises KeyError if a side lacks a protocol's figures."""
    ratios: dict[str, float] = {}
    for side, by_protocol in medians.items():
        plain, secure = by_protocol["PLAINTEXT"], by_protocol["SASL_SSL"]
        ratios[f"{side}_rps"] = secure["produce_rps"] / plain["produce_rps"]
        ratios[f"{side}_p99"] = secure["produce_p99"] / plain["produce_p99"]
    if "lakelog" in medians and "kafka" in medians:
        ratios["relative_rps"] = ratios["lakelog_rps"] / ratios["kafka_rps"]
        ratios["relative_p99"] = ratios["lakelog_p99"] / ratios["kafka_p99"]
    return ratios


def within_target(relative: float) -> bool:
    """Whether lakelog's ratio over Kafka's is within the issue's ±20 %."""
    return 1 - TOLERANCE <= relative <= 1 + TOLERANCE


def verdict(relative: float, *, higher_is_cheaper: bool) -> str:
    """``relative`` (lakelog's ratio over Kafka's) in words: within the ±20 % target, or which side
    TLS costs more. For throughput a higher ratio means TLS costs lakelog less; for p99, a lower one."""
    if within_target(relative):
        return "within ±20 %"
    cheaper = (relative > 1) == higher_is_cheaper
    return "outside ±20 %: TLS costs lakelog less than kafka" if cheaper else "outside ±20 %: TLS costs lakelog MORE"


def _medians(runs: Mapping[str, Mapping[str, list[Figures]]]) -> dict[str, dict[str, Figures]]:
    return {
        side: {
            protocol: {key: statistics.median(r[key] for r in figures) for key in figures[0]}
            for protocol, figures in by_protocol.items()
        }
        for side, by_protocol in runs.items()
        if all(by_protocol.values())
    }


def _write_keystores(work: Path) -> tuple[Path, Path]:
    """The CA's certificate and one server's key and certificate chain (PEM), for both sides."""
    from benchmarks.certificates import Authority

    authority = Authority()
    _, _, keystore = authority.issue("127.0.0.1", server=True).write_pem(work, "server")
    ca = work / "ca.pem"
    ca.write_bytes(authority.ca.pem_cert())
    return ca, keystore


def _agent_conf(work: Path, keystore: Path) -> Path:
    conf = work / "agent.conf"
    conf.write_text(
        f"ssl.keystore.type PEM\nssl.keystore.location {keystore}\nsasl.enabled.mechanisms {MECHANISM}\n"
        f"authorizer.class.name {AUTHORIZER}\nsuper.users {SUPER_USERS}\n"
    )
    return conf


def _measure(
    bootstrap: str, topic: str, security: Mapping[str, str], records: int, size: int, rate: int, seconds: float
) -> Figures:
    from benchmarks.serve import fixed_rate_latency, produce_throughput

    produced = produce_throughput(bootstrap, topic, records, size, security)
    latency = fixed_rate_latency(bootstrap, topic, rate, seconds, size, security)
    return {"produce_rps": produced, "produce_p50": latency["produce_p50"], "produce_p99": latency["produce_p99"]}


def perf_serve_security(workload: ServeWorkload, out: Callable[[str], None]) -> dict[str, float]:
    """Run the comparison (``workload.repeat`` rounds) and print each measurement, the medians
    and the ratios; returns :func:`security_ratios` of the medians. Everything it makes (stores,
    certificates, the broker's directory) is removed before it returns."""
    from benchmarks.scratch import scratch_dir
    from benchmarks.secure_clients import sasl_ssl_config
    from benchmarks.serve import start_agent, stop_agent
    from lakelog.engine.security.scram import CredentialStore, make_credential
    from lakelog.store import Store

    records, record_size, rate, seconds = workload.records, workload.record_size, workload.rate, workload.seconds
    repeat, kafka = workload.repeat, workload.kafka
    password = f"{USER}-{uuid.uuid4().hex}"
    runs: dict[str, dict[str, list[Figures]]] = {side: {p: [] for p in PROTOCOLS} for side in SIDES}
    broker = None
    with scratch_dir("serve-security", workload.work_dir) as scratch:
        ca, keystore = _write_keystores(Path(scratch))
        conf = _agent_conf(Path(scratch), keystore)

        def security(protocol: str, bootstrap: str) -> dict[str, str]:
            if protocol == "PLAINTEXT":
                return {}
            return sasl_ssl_config(bootstrap, USER, password, ca, MECHANISM)

        def lakelog_round(run: int, protocols: tuple[str, ...]) -> None:
            # A fresh store and agent for each listener's run: the commits of one run lengthen the
            # Delta log the next would append to, which is no cost of its listener.
            for protocol in protocols:
                store = f"{scratch}/store-{run}-{protocol.lower()}"
                topic = f"{TOPIC}-{protocol.lower()}"
                opened = Store.open(store, create=True)
                opened.create_topic(topic, partitions=1)
                CredentialStore(opened.uri).upsert(USER, make_credential(MECHANISM, password, ITERATIONS))
                agent, bound = start_agent(store, [f"{p}://127.0.0.1:0" for p in PROTOCOLS], conf)
                try:
                    bootstrap = bound[protocol]
                    figures = _measure(
                        bootstrap, topic, security(protocol, bootstrap), records, record_size, rate, seconds
                    )
                finally:
                    stop_agent(agent)
                runs["lakelog"][protocol].append(figures)
                out(f"round {run + 1}: lakelog {protocol:<10} {_line(figures)}")

        def kafka_round(run: int, protocols: tuple[str, ...]) -> None:
            from benchmarks.kafka_reference import create_topic

            assert broker is not None
            for protocol in protocols:
                topic = f"{TOPIC}-{run}-{protocol.lower()}"
                create_topic(broker.bootstrap, topic)
                bootstrap = broker.bootstrap if protocol == "PLAINTEXT" else broker.sasl_ssl_bootstrap
                figures = _measure(bootstrap, topic, security(protocol, bootstrap), records, record_size, rate, seconds)
                runs["kafka"][protocol].append(figures)
                out(f"round {run + 1}: kafka   {protocol:<10} {_line(figures)}")

        try:
            if kafka:
                from benchmarks.kafka_reference import KafkaBroker, SaslSslListener

                listener = SaslSslListener(keystore, {USER: password}, MECHANISM)
                config = {"authorizer.class.name": AUTHORIZER, "super.users": SUPER_USERS}
                broker = KafkaBroker(config, sasl_ssl=listener).start()
            for run in range(repeat):
                # Each round swaps which side and which listener go first, so neither gains from going second.
                protocols = PROTOCOLS if run % 2 == 0 else PROTOCOLS[::-1]
                rounds = [lakelog_round, kafka_round] if broker is not None else [lakelog_round]
                for measure in rounds if run % 2 == 0 else rounds[::-1]:
                    measure(run, protocols)
        finally:
            if broker is not None:
                broker.stop()
    medians = _medians(runs)
    ratios = security_ratios(medians)
    out(
        f"perf serve --security: {records:,} x {record_size} B per produce run, produce p99 at {rate:,} rec/s "
        f"for {seconds:g} s, one partition, {MECHANISM}, {repeat} interleaved round(s), medians"
    )
    names = {"lakelog": "lakelog serve", "kafka": "kafka 4.x"}
    for side, by_protocol in medians.items():
        for protocol, figures in by_protocol.items():
            out(f"  {names[side]:<13} {protocol:<10} {_line(figures)}")
    for side in medians:
        out(
            f"  {names[side]:<13} SASL_SSL/PLAINTEXT: throughput {ratios[f'{side}_rps']:.2f}, "
            f"p99 {ratios[f'{side}_p99']:.2f}"
        )
    if "relative_rps" in ratios:
        out(
            f"  lakelog's ratio / kafka's: throughput {ratios['relative_rps']:.2f} "
            f"({verdict(ratios['relative_rps'], higher_is_cheaper=True)}), "
            f"p99 {ratios['relative_p99']:.2f} ({verdict(ratios['relative_p99'], higher_is_cheaper=False)})"
        )
    return ratios


def _line(r: Figures) -> str:
    return (
        f"produce {r['produce_rps']:>9,.0f} rec/s, at fixed rate produce p50/p99 "
        f"{r['produce_p50']:.1f}/{r['produce_p99']:.1f} ms"
    )
