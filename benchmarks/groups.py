"""``lakelog perf groups``: consumer groups of N processes, lakelog next to a real Kafka broker.

The same workload on both sides: one topic of 8 partitions holding
``records`` records of 100 bytes serves every run; a run is N member
processes in a new group joining together, each polling up to 500 records,
until the group delivered the whole topic. Runs are interleaved: each
repetition runs every size, lakelog, bare, then Kafka, so all sides see the
machine in the same state; a warm-up lap (every side once at the first size)
is run first and discarded, as the first run after filling a side is slower
for every side. After the last repetition of a size, one more member joins
that group and, once the group settled, one leaves.

The topic must be large enough for the runs to measure throughput: one
lakelog member reads 1M records in ~0.35 s on 2 vCPUs, so with 1M records
an 8-member run is dominated by what every new process pays once (its first
decode in a fresh process, the group forming) -- 8 bare readers, with no
group at all, then reach only 0.55-0.75x of one. The default 8M records make
the 1-member run last ~2 s. Reported per size and side:

* group throughput: records delivered / time from the start signal to the
  last record delivered (the median over the repetitions, with their range),
  and its ratio to the smallest group's; split (in the median run) into the
  time until the group last changed hands (its last ``assigned`` callback
  before the end) and the throughput after that;
* records delivered twice (the run is clean: no kill; must be 0);
* rebalance settled after the join and after the leave: from the trigger
  (the new member subscribing; the leaving member closing) to the last
  ``assigned`` callback of the rebalance, in any member;
* lakelog only: Delta commits per minute of an idle group of the largest size;
* "bare": the same N lakelog processes reading the same partitions (as the
  range assignor splits them) outside any group -- manual assign, no
  membership, no commits -- and the group's throughput as a share of theirs.
  On a 2-vCPU machine N processes reading at once are much slower than one
  reading everything; this line tells that cost from the group protocol's.

lakelog members are JVM-free processes using lakelog's consumer; Kafka
members are confluent-kafka (librdkafka) consumers against
:class:`benchmarks.kafka_reference.KafkaBroker`, both with the range assignor
(Kafka's default), ``enable.auto.commit=false``, committing synchronously at
most every ``commit_interval_ms`` (200 ms unless told; Kafka's
``auto.commit.interval.ms`` defaults to 5000 ms) and in the revocation callback.
Every store and the broker live in a temporary directory this tool removes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 8
TOPIC = "perf-groups"
# Members commit as they go: at most this often (and when partitions are revoked), on both sides.
COMMIT_INTERVAL_MS = 200
# The group id of a bare reader: "assign:0,4" reads partitions 0 and 4 outside any group.
BARE = "assign:"


# -- members (each a process) --------------------------------------------------------


def _logger(path: str, name: str) -> Callable[..., None]:
    out = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the member process

    def record(event: str, **fields: object) -> None:
        out.write(json.dumps({"t": time.time(), "member": name, "event": event, **fields}) + "\n")
        out.flush()

    return record


def lakelog_member(
    store_path: str, group_id: str, name: str, log_path: str, go: str, stop: str, commit_interval_ms: str
) -> None:
    """A member of ``group_id``, committing at most every ``commit_interval_ms``; or, for
    ``group_id`` ``assign:<p>,<p>...``, a consumer of those partitions outside any group
    (manual assign, no commits): the bare reading the group's throughput is measured against."""
    from lakelog.engine.topics import TopicPartition
    from lakelog.store import Store

    record = _logger(log_path, name)
    store = Store.open(store_path)
    bare = group_id.startswith(BARE)
    consumer = store.consumer(
        None if bare else group_id,
        client_id=name,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=500,
        heartbeat_interval_ms=500,
        session_timeout_ms=10_000,
    )

    class Listener:
        def on_partitions_revoked(self, partitions: object) -> None:
            record("revoked", partitions=sorted(tp.partition for tp in partitions))  # type: ignore[attr-defined]
            consumer.commit()

        def on_partitions_assigned(self, partitions: object) -> None:
            record("assigned", partitions=sorted(tp.partition for tp in partitions))  # type: ignore[attr-defined]

    record("ready")
    while not os.path.exists(go):
        time.sleep(0.005)
    record("subscribing")
    if bare:
        consumer.assign([TopicPartition(TOPIC, int(p)) for p in group_id[len(BARE) :].split(",") if p])
    else:
        consumer.subscribe([TOPIC], listener=Listener())
    next_commit = 0.0
    while not os.path.exists(stop):
        table = consumer.poll_arrow(timeout_ms=100)
        if table.num_rows:
            partitions = table.column("partition").to_numpy()
            offsets = table.column("offset").to_numpy()
            for p in sorted(set(partitions.tolist())):
                mine = offsets[partitions == p]
                record("records", p=int(p), first=int(mine[0]), last=int(mine[-1]), n=len(mine))
            if not bare and time.monotonic() >= next_commit:
                consumer.commit()
                next_commit = time.monotonic() + int(commit_interval_ms) / 1000
    record("closing")
    consumer.close(autocommit=False)


def kafka_member(
    bootstrap: str, group_id: str, name: str, log_path: str, go: str, stop: str, commit_interval_ms: str
) -> None:
    from confluent_kafka import Consumer, KafkaException

    record = _logger(log_path, name)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "client.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
        }
    )

    def on_assign(c: object, partitions: list) -> None:
        record("assigned", partitions=sorted(tp.partition for tp in partitions))

    def on_revoke(c: object, partitions: list) -> None:
        record("revoked", partitions=sorted(tp.partition for tp in partitions))
        if partitions:
            with contextlib.suppress(KafkaException):  # nothing consumed yet: nothing to commit
                consumer.commit(asynchronous=False)

    record("ready")
    while not os.path.exists(go):
        time.sleep(0.005)
    record("subscribing")
    consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
    next_commit = 0.0
    while not os.path.exists(stop):
        messages = consumer.consume(num_messages=500, timeout=0.1)
        good = [m for m in messages if m.error() is None]
        if not good:
            continue
        by_partition: dict[int, list[int]] = {}
        for m in good:
            by_partition.setdefault(m.partition(), []).append(m.offset())
        for p, offsets in sorted(by_partition.items()):
            record("records", p=p, first=offsets[0], last=offsets[-1], n=len(offsets))
        if time.monotonic() >= next_commit:
            consumer.commit(asynchronous=False)
            next_commit = time.monotonic() + int(commit_interval_ms) / 1000
    record("closing")
    consumer.close()


# -- one side, one group size ---------------------------------------------------------


class Group:
    """N member processes of one side in one group, their logs, their start and stop files."""

    def __init__(
        self, work: Path, side: str, target: str, group_id: str, commit_interval_ms: int = COMMIT_INTERVAL_MS
    ) -> None:
        self.work, self.side, self.target, self.group_id = work, side, target, group_id
        self.commit_interval_ms = commit_interval_ms
        self.go = work / f"{side}.go"
        self.procs: dict[str, subprocess.Popen] = {}
        # Events read so far, per member log, and where its complete lines end: the driver
        # polls them while members run and must not compete with them for the CPU.
        self._read: dict[str, tuple[int, list[dict]]] = {}
        self.records_seen = 0

    def start(self, name: str, group_id: str | None = None) -> None:
        verb = "kafka-member" if self.side == "kafka" else "lakelog-member"
        args = [sys.executable, "-m", "benchmarks.groups", verb, self.target, group_id or self.group_id, name]
        args += [str(self.work / f"{name}.jsonl"), str(self.go), str(self.work / f"{name}.stop")]
        args.append(str(self.commit_interval_ms))
        self.procs[name] = subprocess.Popen(
            args,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=open(self.work / f"{name}.err", "w"),  # noqa: SIM115
        )

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def stop(self, name: str) -> None:
        (self.work / f"{name}.stop").touch()
        if self.procs[name].wait(timeout=600) != 0:
            raise RuntimeError(f"{self.side} member {name} failed: {(self.work / f'{name}.err').read_text()[-2000:]}")

    def events(self) -> list[dict]:
        found = []
        for name in self.procs:
            path = self.work / f"{name}.jsonl"
            at, parsed = self._read.get(name, (0, []))
            if path.exists():
                with open(path, "rb") as handle:
                    handle.seek(at)
                    chunk = handle.read()
                complete = chunk[: chunk.rfind(b"\n") + 1]
                new = [json.loads(line) for line in complete.splitlines() if line.strip()]
                self.records_seen += sum(e["n"] for e in new if e["event"] == "records")
                parsed = parsed + new
                self._read[name] = (at + len(complete), parsed)
            found += parsed
        return sorted(found, key=lambda e: e["t"])

    def delivered(self) -> Counter:
        seen: Counter = Counter()
        for e in self.events():
            if e["event"] == "records":
                seen.update((e["p"], o) for o in range(e["first"], e["last"] + 1))
        return seen


def _settled(events: list[dict], since: float) -> float:
    """Seconds from ``since`` to the last ``assigned`` callback after it (the rebalance's end)."""
    after = [e["t"] for e in events if e["event"] == "assigned" and e["t"] >= since]
    return (max(after) - since) if after else float("nan")


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def run_side(
    side: str,
    target: str,
    work: Path,
    size: int,
    records: int,
    *,
    rebalances: bool,
    commit_interval_ms: int = COMMIT_INTERVAL_MS,
) -> dict[str, float]:
    """One run of a group of ``size`` members (a new group) reading the whole topic; with
    ``rebalances``, then a join and a leave."""
    group = Group(work, side, target, group_id=work.name, commit_interval_ms=commit_interval_ms)
    try:
        figures = _throughput(group, side, size, records)
        if rebalances:
            figures |= _rebalances(group, side, size)
        _stop_all(group)
        return figures
    finally:
        group.kill()  # whatever happened: no member outlives the run


def _names(side: str, size: int) -> list[str]:
    return [f"{side}-{i}" for i in range(size)]


def _range_share(i: int, size: int) -> list[int]:
    """Member ``i``'s partitions under Kafka's range assignor (the first ones get one more)."""
    per, extra = divmod(PARTITIONS, size)
    first = i * per + min(i, extra)
    return list(range(first, first + per + (1 if i < extra else 0)))


def _throughput(group: Group, side: str, size: int, records: int) -> dict[str, float]:
    names = _names(side, size)
    for i, name in enumerate(names):
        # The bare side splits the partitions as the range assignor would.
        group.start(name, f"{BARE}{','.join(map(str, _range_share(i, size)))}" if side == "bare" else None)
    ready = set(names)
    _wait_for(lambda: ready <= {e["member"] for e in group.events() if e["event"] == "ready"}, 300, "members")
    time.sleep(0.5)  # every process is up, has its client built and waits for the start signal
    started = time.time()
    group.go.touch()
    _wait_for(lambda: group.events() and group.records_seen >= records, 900, f"{side} to deliver {records} records")
    seen = group.delivered()
    last = max(e["t"] for e in group.events() if e["event"] == "records")
    events = group.events()
    # When the group last changed hands before the end: what throughput leaves to formation.
    formed = max((e["t"] for e in events if e["event"] == "assigned" and e["t"] <= last), default=started)
    after = sum(e["n"] for e in events if e["event"] == "records" and e["t"] > formed)
    return {
        "throughput_rps": records / (last - started),
        "formed_s": formed - started,
        "steady_rps": after / (last - formed) if last > formed else 0.0,
        "delivered_twice": sum(1 for n in seen.values() if n > 1),
        "missing": records - len(seen),
    }


def _rebalances(group: Group, side: str, size: int) -> dict[str, float]:
    """A member joins the settled group, then (once that settled) one leaves."""
    joiner = f"{side}-joiner"
    group.start(joiner)
    _wait_for(lambda: any(e["event"] == "subscribing" and e["member"] == joiner for e in group.events()), 60, "join")
    joined_at = next(e["t"] for e in group.events() if e["event"] == "subscribing" and e["member"] == joiner)
    _quiet_after(group, joined_at)
    figures = {"join_settled_s": _settled(group.events(), joined_at)}
    left_at = time.time()
    group.stop(_names(side, size)[0])
    _quiet_after(group, left_at)
    figures["leave_settled_s"] = _settled(group.events(), left_at)
    return figures


def _quiet_after(group: Group, since: float, quiet_s: float = 4.0, limit_s: float = 12.0) -> None:
    """Wait until a rebalance begun at ``since`` has handed out partitions and then none for
    ``quiet_s`` (longer than a cooperative rebalance's second round takes to follow its first),
    or ``limit_s`` passed."""
    while time.time() < since + limit_s:
        assigned = [e["t"] for e in group.events() if e["event"] == "assigned" and e["t"] >= since]
        if assigned and time.time() - max(assigned) >= quiet_s:
            return
        time.sleep(0.1)


def _stop_all(group: Group) -> None:
    running = [name for name, proc in group.procs.items() if proc.poll() is None]
    for name in running:
        (group.work / f"{name}.stop").touch()
    for name in running:
        group.stop(name)


def idle_commits(work: Path, size: int, seconds: float) -> float:
    """Delta commits per minute in a store whose group of ``size`` members has nothing to read."""
    from lakelog.store import Store

    path = str(work / "idle-store")
    store = Store.open(path)
    store.create_topic(TOPIC, partitions=PARTITIONS)
    group = Group(work, "lakelog", path, group_id="idle")
    try:
        for i in range(size):
            group.start(f"idle-{i}")
        group.go.touch()
        _wait_for(
            lambda: sum(1 for e in group.events() if e["event"] == "assigned") >= min(size, PARTITIONS),
            120,
            "assignment",
        )
        time.sleep(3)
        before = store.log.latest_version()
        time.sleep(seconds)
        commits = store.log.latest_version() - before
        for i in range(size):
            group.stop(f"idle-{i}")
    finally:
        group.kill()
    return commits * 60.0 / seconds


def _fill_lakelog(path: str, records: int) -> None:
    from benchmarks.commit import random_values
    from lakelog.store import Store

    store = Store.open(path)
    store.create_topic(TOPIC, partitions=PARTITIONS)
    values = random_values(records, 100)
    per = records // PARTITIONS
    with store.producer(linger_ms=0) as producer:
        for p in range(PARTITIONS):
            producer.send_batch(TOPIC, values.slice(p * per, per), partition=p).get()


def _fill_kafka(bootstrap: str, records: int) -> None:
    from confluent_kafka import Producer

    from benchmarks.kafka_reference import create_topic

    create_topic(bootstrap, TOPIC, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    value = os.urandom(100)
    per = records // PARTITIONS
    for p in range(PARTITIONS):
        for _ in range(per):
            while True:
                try:
                    producer.produce(TOPIC, value=value, partition=p)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush()


def perf_groups(
    sizes: Sequence[int],
    *,
    records: int,
    repeat: int,
    idle_seconds: float,
    kafka: bool,
    work_dir: str | None,
    out: Callable[[str], None],
    commit_interval_ms: int = COMMIT_INTERVAL_MS,
    warmup: bool = True,
) -> dict[str, dict[int, dict[str, float]]]:
    """Run both sides for every group size, ``repeat`` times interleaved, members committing
    at most every ``commit_interval_ms``; print one line per size and side, then the ratios.
    With ``warmup``, every side first runs once at the first size, not counted."""
    work = Path(tempfile.mkdtemp(prefix="lakelog-perf-groups-", dir=work_dir))
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    broker = None
    try:
        records -= records % PARTITIONS
        # "bare": the same N processes reading the same partitions outside any group (no
        # membership, no commits): what N readers get out of this machine at all.
        targets = {"lakelog": str(work / "store"), "bare": str(work / "store")}
        _fill_lakelog(targets["lakelog"], records)
        if kafka:
            from benchmarks.kafka_reference import KafkaBroker

            broker = KafkaBroker().start()
            _fill_kafka(broker.bootstrap, records)
            targets["kafka"] = broker.bootstrap
        if warmup:
            lap = []
            for side, target in targets.items():
                side_work = work / f"{side}-warmup"
                side_work.mkdir()
                figures = run_side(side, target, side_work, sizes[0], records, rebalances=False)
                lap.append(f"{side} {figures['throughput_rps']:,.0f} rec/s")
            out(f"warm-up lap, {sizes[0]} member(s), not counted: " + ", ".join(lap))
        for rep in range(repeat):
            for size in sizes:
                for side, target in targets.items():
                    side_work = work / f"{side}-{size}-{rep}"
                    side_work.mkdir()
                    rebalances = rep == repeat - 1 and side != "bare"
                    figures = run_side(
                        side,
                        target,
                        side_work,
                        size,
                        records,
                        rebalances=rebalances,
                        commit_interval_ms=commit_interval_ms,
                    )
                    runs.setdefault((side, size), []).append(figures)
        results: dict[str, dict[int, dict[str, float]]] = {side: {} for side in targets}
        out(f"group members commit at most every {commit_interval_ms} ms and when partitions are revoked")
        for (side, size), figures in runs.items():
            results[side][size] = _summary(figures)
            out(_line(side, size, results[side][size]))
        for side, by_size in results.items():
            one = by_size[sizes[0]]["throughput_rps"]
            ratios = ", ".join(f"{s}: {by_size[s]['throughput_rps'] / one:.2f}" for s in by_size)
            out(f"{side} group throughput / {sizes[0]}-member group's: {ratios}")
        out(
            "lakelog group / bare readers throughput: "
            + ", ".join(
                f"{s}: {results['lakelog'][s]['throughput_rps'] / results['bare'][s]['throughput_rps']:.2f}"
                for s in results["bare"]
            )
        )
        if "kafka" in results:
            out(
                "lakelog / kafka throughput: "
                + ", ".join(
                    f"{s}: {results['lakelog'][s]['throughput_rps'] / results['kafka'][s]['throughput_rps']:.2f}"
                    for s in results["kafka"]
                )
            )
        if idle_seconds > 0:
            rate = idle_commits(work, max(sizes), idle_seconds)
            out(f"lakelog idle group of {max(sizes)} members: {rate:.1f} Delta commits per minute")
            results["lakelog"]["idle_commits_per_min"] = {"rate": rate}  # type: ignore[index]
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results


def _summary(runs: list[dict[str, float]]) -> dict[str, float]:
    """The median run's figures (by throughput), the range of throughputs, and the worst
    duplicates and misses of any run."""
    ordered = sorted(runs, key=lambda r: r["throughput_rps"])
    summary = dict(ordered[(len(ordered) - 1) // 2])
    summary["throughput_min_rps"] = ordered[0]["throughput_rps"]
    summary["throughput_max_rps"] = ordered[-1]["throughput_rps"]
    summary["delivered_twice"] = max(r["delivered_twice"] for r in runs)
    summary["missing"] = max(r["missing"] for r in runs)
    summary["runs"] = len(runs)
    for key in ("join_settled_s", "leave_settled_s"):
        summary[key] = next((r[key] for r in runs if key in r), float("nan"))
    return summary


def _line(side: str, size: int, f: dict[str, float]) -> str:
    line = (
        f"{side:7} {size:2} member(s): {f['throughput_rps']:,.0f} rec/s (median of {f['runs']:.0f}, "
        f"{f['throughput_min_rps']:,.0f}-{f['throughput_max_rps']:,.0f}), {f['delivered_twice']:.0f} delivered "
        f"twice, {f['missing']:.0f} missing"
    )
    if side == "bare":
        return line
    return (
        f"{line}; rebalance settled {f['join_settled_s']:.2f} s after a join, "
        f"{f['leave_settled_s']:.2f} s after a leave; group formed {f['formed_s']:.2f} s after the start, "
        f"{f['steady_rps']:,.0f} rec/s after"
    )


if __name__ == "__main__":
    verb = sys.argv[1]
    if verb == "lakelog-member":
        lakelog_member(*sys.argv[2:9])
    elif verb == "kafka-member":
        kafka_member(*sys.argv[2:9])
