"""``lakelog perf rebalance``: how long a group of Java consumers takes to settle when its last
member joins, against ``lakelog serve`` and against a real Kafka broker, rounds interleaved.

Each round, on each side: a new topic of ``partitions`` partitions with no records, a new
group; ``members - 1`` Java consumers (kafka-clients 4.4, the classic protocol, the consumer's
default assignors: RangeAssignor first) join and settle; then the last one starts. The figure
is the time from that start (its JVM's launch) until the group is settled again: every member
owns partitions and their union covers the topic, each partition once. The eager protocol
makes that a full rebalance: every member learns of it from its next heartbeat (3 s by
default), gives its partitions up and joins again. The members are
benchmarks.java_programs' ``GroupConsumer`` (benchmarks/java), which prints a line on each
rebalance callback; the group's state is read from those lines as they arrive.

The broker is benchmarks.kafka_reference's (``group.initial.rebalance.delay.ms=0``); the
group is not new when the last member joins, so neither side's initial delay is in the figure.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.serve import start_agent, stop_agent

TOPIC = "perf-rebalance"
POLL_S = 0.01
SETTLE_TIMEOUT_S = 180.0
TARGET_RATIO = 1.5  # lakelog's settle time at most 1.5x the broker's


def settled(owned: Sequence[set[str]], partitions: set[str]) -> bool:
    """Whether every member owns something and the members own ``partitions`` between them,
    each partition once."""
    union: set[str] = set().union(*owned) if owned else set()
    return all(owned) and sum(len(o) for o in owned) == len(union) and union == partitions


def perf_rebalance(
    *,
    members: int,
    partitions: int,
    repeat: int,
    kafka: bool,
    work_dir: str | None,
    out: Callable[[str], None],
) -> dict[str, float]:
    """Run the rounds and print each figure, the medians and the ratio; returns the medians in
    seconds by side (and ``ratio`` when both ran). Raises RuntimeError naming a member whose
    group did not settle within SETTLE_TIMEOUT_S (its log's tail in the message)."""
    from benchmarks.kafka_reference import KafkaBroker
    from benchmarks.scratch import scratch_dir
    from lakelog.store import Store

    if members < 2 or partitions < members:
        raise ValueError(f"--members must be at least 2 and at most --partitions ({members}, {partitions})")
    times: dict[str, list[float]] = {"lakelog": [], "kafka": []}
    broker = KafkaBroker().start() if kafka else None
    try:
        with scratch_dir("rebalance", work_dir) as scratch:
            for attempt in range(repeat):
                store = f"{scratch}/store-{attempt}"
                Store.open(store).create_topic(TOPIC, partitions=partitions)
                agent, bound = start_agent(store)
                try:
                    took = _round(bound["PLAINTEXT"], TOPIC, f"lakelog-{attempt}", members, partitions, scratch)
                finally:
                    stop_agent(agent)
                times["lakelog"].append(took)
                out(f"round {attempt + 1}: lakelog settled {took:.2f} s after member {members} started")
                if broker is not None:
                    topic = f"{TOPIC}-{attempt}"
                    broker.run_tool(
                        "org.apache.kafka.tools.TopicCommand",
                        *("--bootstrap-server", broker.bootstrap, "--create", "--topic", topic),
                        *("--partitions", str(partitions)),
                    )
                    took = _round(broker.bootstrap, topic, f"kafka-{attempt}", members, partitions, scratch)
                    times["kafka"].append(took)
                    out(f"round {attempt + 1}: kafka   settled {took:.2f} s after member {members} started")
    finally:
        if broker is not None:
            broker.stop()
    medians = {side: statistics.median(t) for side, t in times.items() if t}
    out(
        f"perf rebalance: {members} Java consumers (kafka-clients 4.4, classic protocol, default assignor), "
        f"{partitions} partitions; time from member {members}'s start until the group settled; "
        f"{repeat} interleaved round(s), medians"
    )
    out(f"  lakelog serve: {medians['lakelog']:.2f} s")
    if "kafka" in medians:
        ratio = medians["lakelog"] / medians["kafka"]
        medians["ratio"] = ratio
        out(f"  kafka 4.x:     {medians['kafka']:.2f} s")
        verdict = "within" if ratio <= TARGET_RATIO else "OVER"
        out(f"  ratio lakelog/kafka: {ratio:.2f} ({verdict} the {TARGET_RATIO}x target)")
    return medians


def _round(bootstrap: str, topic: str, group: str, members: int, partitions: int, scratch: str) -> float:
    """One side's round: seconds from the last member's launch until the group settled."""
    from benchmarks.java_programs import GROUP_CONSUMER, JavaProgram, owned_partitions

    everything = {f"{topic}-{p}" for p in range(partitions)}
    workdir = Path(tempfile.mkdtemp(prefix=f"{group}-", dir=scratch))
    running: list[JavaProgram] = []

    def start(i: int) -> None:
        name = f"{group}-member-{i}"
        settings = {"bootstrap.servers": bootstrap, "group.id": group, "topics": topic, "client.id": name}
        running.append(JavaProgram(GROUP_CONSUMER, workdir, name, settings))

    def wait_settled(what: str) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not settled([owned_partitions(m) for m in running], everything):
            for member in running:
                if member.proc.poll() is not None or member.events("FATAL"):
                    raise RuntimeError(str(member.fail(f"stopped while waiting for {what}")))
            if time.monotonic() > deadline:
                raise RuntimeError(str(running[-1].fail(f"no {what} within {SETTLE_TIMEOUT_S:.0f}s")))
            time.sleep(POLL_S)

    try:
        for i in range(members - 1):
            start(i)
        wait_settled(f"a settled group of {members - 1}")
        began = time.monotonic()
        start(members - 1)
        wait_settled(f"a settled group of {members}")
        return time.monotonic() - began
    finally:
        for member in running:  # closing stdin stops each cleanly: all at once, then each reaped
            if member.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    member.proc.stdin.close()
        for member in running:
            member.stop()
