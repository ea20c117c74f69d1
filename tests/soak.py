"""The soak: the randomized multi-process workload under SIGKILLs, checked by tests/history_checker.py.

    .venv/bin/python -m tests.soak --operations 100000 --kills 50 [--s3] [--seed 0]

One store (a local directory, or with ``--s3`` a bucket on a loopback S3
server this process starts, as the tests' ``s3_server`` fixture does), two
topics that are never compacted and have no retention, ``h`` and ``hw``, and
these workers, each a real process running tests/workers/history_worker.py:

* ``p1``, ``p2``: plain idempotent producers to ``h`` (single sends and ``send_batch``);
* ``x1``: a transactional producer to ``h`` that aborts about 30% of its transactions;
* ``c1``, ``c2``: one consumer group on both topics, polling and committing;
* ``w1``: ``store.write(df)`` batches (a process with a SparkSession of its own)
  to ``hw``, one in five to ``h``, beside the producers' commits (its offsets are
  reserved before its files are written);
* ``s1``: a Structured Streaming query (its own SparkSession) from JSON files it
  drops into an inbox into ``format("lakelog")`` on ``h`` at 2 s triggers, each
  file one all-or-nothing write, acknowledged once its micro-batch committed;
* ``m1``: ``compaction.maintain`` over the whole store (OPTIMIZE, VACUUM, and
  log compaction of ``__consumer_offsets``) every few seconds.

A killer SIGKILLs a random worker (with its process group: the writer's JVM
too) every ``--kill-interval`` seconds on average and restarts it at once as
a new incarnation: a producer sends fresh values, a transactional producer
fences its predecessor, a consumer joins the group again. Once at least
``--operations`` acknowledged operations (see
``history_checker.operation_kind``) and ``--kills`` kills happened and every
role completed one operation, the writers stop, the group must catch up
(committed offsets = log end offsets), the consumers stop, and the whole
history is checked against the final table read twice (a lakelog consumer,
read_committed, and delta-rs as a plain Delta reader) and the group's final
committed offsets.

A damager (local stores; ``--damage-interval`` seconds on average, 0 for none)
empties or truncates the newest commit file of the Delta log, leaves it so
for up to a second and puts the original bytes back -- a disk or a person
damaging the log under live writers. Meanwhile every reader and writer that
reaches that version must fail closed (CorruptLogError, an outcome like any
other): none may read the damaged commit as fewer records, or take offsets it
had acknowledged, which the history check would see as lost or renumbered
records.

It prints operations by kind, kills by role, anomalies by kind and the wall
time, and exits 1 on any anomaly, worker crash, liveness failure (targets
not reached in ``--max-minutes``, a worker that does not stop, a group that
does not catch up) or unexpected error (an error a worker survived that is
not a LakelogError, unless ``--allow-unexpected-errors`` names its
operation). Logs stay in the work directory when it fails (or with
``--keep``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.history_checker import OPERATION_KINDS, Report, check, load_events, operation_kind

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "workers" / "history_worker.py"
TOPIC = "h"  # the producers' and the transactional producer's
WRITE_TOPIC = "hw"  # the writer's (it also writes to TOPIC now and then)
GROUP = "history"
TXN_ID = "soak-x1"
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


@dataclass(frozen=True)
class Role:
    """One worker slot: its name, its role in history_worker.py, and how likely the killer picks it."""

    name: str
    role: str
    kill_weight: float = 1.0
    # Killed only once its current incarnation acknowledged an operation: else a JVM start (and the slow
    # first Spark job) could be killed again and again, and the run would mostly wait for it.
    warm_up: bool = False

    @property
    def writes(self) -> bool:
        """Whether it stops with the writers (everything but the consumers)."""
        return self.role != "consumer"


# The writer's restart costs a JVM start, so it is killed less often than the others, and not while starting.
ROLES = (
    Role("p1", "producer"),
    Role("p2", "producer"),
    Role("x1", "txn"),
    Role("c1", "consumer"),
    Role("c2", "consumer"),
    Role("w1", "writer", 0.3, warm_up=True),
    Role("s1", "streamer", 0.3, warm_up=True),
    Role("m1", "maintainer"),
)


@dataclass(frozen=True)
class SoakConfig:
    """How long and how hard to soak: the run ends once ``operations`` acknowledged operations and
    ``kills`` kills happened (and every role acknowledged one), a kill comes every ``kill_interval_s``
    on average, and ``pace`` scales the workers' pauses."""

    operations: int = 20_000
    kills: int = 10
    s3: bool = False
    seed: int = 0
    partitions: int = 3  # of TOPIC; WRITE_TOPIC has 2
    # Mean seconds between kills; None: 4 on a local store, 15 on S3, where a maintenance run over a grown
    # table takes long enough that kills every 4 s would hardly ever let one finish.
    kill_interval_s: float | None = None
    pace: float = 1.0
    # maintain() truncates the hours to an int, and 0 deletes files a consumer may be about to read.
    vacuum_retention_hours: float = 1.0
    # Operations (history_worker's names: maintain, consume, write, ...) whose unexpected errors are printed
    # but do not fail the run.
    allow_unexpected_errors: frozenset[str] = frozenset()
    # Mean seconds between damages of the newest commit file (local stores); None or 0: none.
    damage_interval_s: float | None = 20.0
    max_minutes: float = 120.0
    stop_timeout_s: float = 240.0
    drain_timeout_s: float = 300.0
    workdir: Path | None = None


@dataclass
class SoakResult:
    """What a soak did and found; ``ok`` is the verdict and ``lines()`` the printed account."""

    config: SoakConfig
    store: str
    assignor: str
    operations: Counter = field(default_factory=Counter)
    kills: Counter = field(default_factory=Counter)
    damages: Counter = field(default_factory=Counter)  # by kind: empty, truncated
    crashes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # Errors workers recorded and survived, by (operation, error name, unexpected), with a first message:
    # unexpected ones are not LakelogErrors, which lakelog's API promises to raise only.
    errors: Counter = field(default_factory=Counter)
    error_examples: dict[tuple[str, str, bool], str] = field(default_factory=dict)
    report: Report | None = None
    wall_s: float = 0.0

    @property
    def unexpected_errors(self) -> int:
        return sum(n for (_, _, unexpected), n in self.errors.items() if unexpected)

    @property
    def disallowed_errors(self) -> int:
        allowed = self.config.allow_unexpected_errors
        return sum(n for (op, _, unexpected), n in self.errors.items() if unexpected and op not in allowed)

    @property
    def ok(self) -> bool:
        return (
            self.report is not None
            and self.report.ok
            and not self.crashes
            and not self.failures
            and not self.disallowed_errors
        )

    def lines(self) -> list[str]:
        ops = sum(self.operations.values())
        kinds = ", ".join(f"{kind} {self.operations[kind]:,}" for kind in OPERATION_KINDS)
        kills = ", ".join(f"{role.name} ({role.role}) {self.kills[role.name]}" for role in ROLES)
        out = [
            f"soak: {'S3 store' if self.config.s3 else 'local store'} {self.store}, seed {self.config.seed},"
            f" assignor {self.assignor}",
            f"operations: {ops:,} acknowledged ({kinds})",
            f"kills: {sum(self.kills.values())} ({kills})",
            f"damaged newest commits: {sum(self.damages.values())}"
            f" ({', '.join(f'{kind} {n}' for kind, n in sorted(self.damages.items())) or 'none'})",
            f"worker crashes: {len(self.crashes)}",
            *[f"  - {crash}" for crash in self.crashes],
            f"liveness failures: {len(self.failures)}",
            *[f"  - {failure}" for failure in self.failures],
            f"errors workers survived: {sum(self.errors.values())}, unexpected (not a LakelogError):"
            f" {self.unexpected_errors}, of which allowed ({', '.join(sorted(self.config.allow_unexpected_errors))}):"
            f" {self.unexpected_errors - self.disallowed_errors}",
            *[
                f"  - {operation}: {error} x{n}{' (unexpected)' if unexpected else ''}, first:"
                f" {self.error_examples[(operation, error, unexpected)].splitlines()[0][:300]}"
                for (operation, error, unexpected), n in self.errors.most_common()
            ],
        ]
        if self.report is not None:
            counts = self.report.counts()
            out.append(f"anomalies: {sum(counts.values())} ({', '.join(f'{k} {n}' for k, n in counts.items())})")
            summary = self.report.summary(examples=5).splitlines()
            out.append(summary[1])  # the stats
            if not self.report.ok:
                out += summary[2:]  # each kind with its first anomalies
        out.append(f"wall time: {self.wall_s:.1f} s")
        out.append(f"verdict: {'ok' if self.ok else 'FAILED'}")
        return out


class _Worker:
    """One role's current process; each (re)start is a new incarnation with its own name and log."""

    def __init__(self, index: int, role: Role, config: SoakConfig, store: str, workdir: Path, assignor: str) -> None:
        self.index = index
        self.role = role
        self._config = config
        self._store = store
        self._workdir = workdir
        self._assignor = assignor
        self.incarnation = -1
        self.proc: subprocess.Popen | None = None
        self._out: IO[bytes] | None = None
        self.logs: list[Path] = []

    @property
    def name(self) -> str:
        return f"{self.role.name}.{self.incarnation}"

    def start(self) -> None:
        self.incarnation += 1
        log = self._workdir / f"{self.name}.jsonl"
        self.logs.append(log)
        stop = self._workdir / ("stop-writers" if self.role.writes else "stop-consumers")
        args = [sys.executable, str(WORKER), "--store", self._store, "--role", self.role.role, "--name", self.name]
        args += ["--log", str(log), "--stop", str(stop), "--group", GROUP, "--txn-id", TXN_ID]
        if self.role.role == "consumer":
            args += ["--topic", f"{TOPIC},{WRITE_TOPIC}"]
        elif self.role.role == "writer":
            args += ["--topic", WRITE_TOPIC, "--race-topic", TOPIC]
        elif self.role.role == "streamer":  # beside the producers, on their topic
            args += ["--topic", TOPIC, "--inbox", str(self._workdir / "inbox")]
        else:
            args += ["--topic", TOPIC]
        args += ["--seed", str(self._config.seed * 1_000_003 + self.index * 10_007 + self.incarnation)]
        args += ["--pace", str(self._config.pace), "--assignor", self._assignor]
        args += ["--vacuum-retention-hours", str(self._config.vacuum_retention_hours)]
        self._close_output()
        self._out = open(self._workdir / f"{self.name}.out", "wb")  # noqa: SIM115 - closed at the next start
        # Its own process group, so that a kill takes the writer's JVM (and PySpark's workers) with it.
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
            with contextlib.suppress(ProcessLookupError):  # children that outlived the leader
                os.killpg(self.proc.pid, signal.SIGKILL)

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def output_tail(self, lines: int = 15) -> str:
        path = self._workdir / f"{self.name}.out"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _close_output(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def close(self) -> None:
        self.kill()
        self._close_output()


class _Damager:
    """Empties or truncates the newest commit file of a local store's log, then puts it back."""

    def __init__(self, store: str, rng: random.Random) -> None:
        self._log = Path(store) / "_delta_log"
        self._rng = rng
        self._held: tuple[Path, bytes] | None = None
        self.restore_at = 0.0

    def damage(self, result: SoakResult, kills: IO[str]) -> None:
        commits = sorted(self._log.glob("[0-9]*.json"))
        if not commits:
            return
        newest = commits[-1]
        data = newest.read_bytes()
        kind = self._rng.choice(["empty", "truncated"])
        damaged = b"" if kind == "empty" else data[: self._rng.randrange(1, max(2, len(data)))]
        self._replace(newest, damaged)
        self._held = (newest, data)
        self.restore_at = time.monotonic() + self._rng.uniform(0.1, 1.0)
        result.damages[kind] += 1
        kills.write(json.dumps({"time": time.time(), "damaged": newest.name, "kind": kind}) + "\n")
        kills.flush()

    def restore(self) -> None:
        if self._held is not None:
            self._replace(*self._held)
            self._held = None

    @staticmethod
    def _replace(path: Path, data: bytes) -> None:
        temporary = path.with_name(f".{path.name}.damage.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)


class _LogTail:
    """Counts acknowledged operations in the workers' logs as they grow (complete lines only)."""

    def __init__(self) -> None:
        self._read: dict[Path, int] = {}
        self.operations: Counter = Counter()
        self.roles_done: set[str] = set()
        self.by_log: Counter = Counter()  # acknowledged operations per incarnation's log

    def update(self, workers: list[_Worker]) -> None:
        for worker in workers:
            for path in worker.logs:
                if not path.exists():
                    continue
                with path.open("rb") as file:
                    file.seek(self._read.get(path, 0))
                    data = file.read()
                complete = data[: data.rfind(b"\n") + 1]
                self._read[path] = self._read.get(path, 0) + len(complete)
                for line in complete.splitlines():
                    with contextlib.suppress(ValueError):  # a line cut by a kill, followed by the next start
                        kind = operation_kind(json.loads(line))
                        if kind is not None:
                            self.operations[kind] += 1
                            self.by_log[path] += 1
                            self.roles_done.add(worker.role.name)

    def warming_up(self, worker: _Worker) -> bool:
        """Whether the worker's current incarnation acknowledged nothing yet."""
        return not worker.logs or not self.by_log[worker.logs[-1]]


@contextlib.contextmanager
def _store_location(config: SoakConfig, workdir: Path) -> Iterator[str]:
    """A fresh store URI: a local directory, or a prefix in a bucket of a loopback S3 server started here
    (its endpoint and credentials in this process's environment while it runs, so the workers inherit them)."""
    if not config.s3:
        yield str(workdir / "store")
        return
    from tests.storage.s3_server import s3_server

    with s3_server() as server:
        saved = {key: os.environ.get(key) for key in server.env}
        os.environ.update(server.env)
        try:
            yield f"s3a://{server.create_bucket('lakelog-soak')}/{uuid.uuid4().hex[:12]}"
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def run_soak(config: SoakConfig, progress: Callable[[str], None] = print) -> SoakResult:
    """Run the soak described in the module docstring; the result says what happened (nothing raises on an
    anomaly). Worker logs and outputs go to ``config.workdir`` (a new temporary directory when None)."""
    workdir = config.workdir or Path(tempfile.mkdtemp(prefix="lakelog-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(config.seed)
    assignor = rng.choice(ASSIGNORS)
    with _store_location(config, workdir) as uri:
        result = SoakResult(config, uri, assignor)
        began = time.monotonic()
        from lakelog.store import Store

        store = Store.open(uri)
        # Nothing may legitimately disappear: no retention, no compaction; small segments for OPTIMIZE to bin.
        for topic, partitions in ((TOPIC, config.partitions), (WRITE_TOPIC, 2)):
            store.create_topic(topic, partitions=partitions, config={"retention.ms": -1, "segment.bytes": 65_536})
        workers = [_Worker(i, role, config, uri, workdir, assignor) for i, role in enumerate(ROLES)]
        try:
            _run(config, rng, workers, workdir, result, progress, uri)
            _drain(config, store, workers, workdir, result, progress)
        finally:
            for worker in workers:
                worker.close()
        progress("checking the history")
        events = load_events([log for worker in workers for log in worker.logs if log.exists()])
        result.operations = Counter(kind for event in events if (kind := operation_kind(event)) is not None)
        for event in events:
            if event["type"] == "error":
                key = (event["operation"], event["error"], bool(event.get("unexpected")))
                result.errors[key] += 1
                where = f" (at {event['where']})" if event.get("where") else ""
                result.error_examples.setdefault(key, f"{event['process']}{where}: {event['message']}")
        final, plain, committed = _final_reads(store)
        result.report = check(events, final, final_committed=committed, plain_log=plain)
        result.wall_s = time.monotonic() - began
    return result


def _run(
    config: SoakConfig,
    rng: random.Random,
    workers: list[_Worker],
    workdir: Path,
    result: SoakResult,
    progress: Callable[[str], None],
    uri: str,
) -> None:
    """Start every worker, kill and restart them (and damage the log, then mend it) until the targets are
    reached (or time runs out)."""
    tail = _LogTail()
    for worker in workers:
        worker.start()
    began = time.monotonic()
    deadline = began + config.max_minutes * 60
    interval = config.kill_interval_s or (15.0 if config.s3 else 4.0)
    next_kill = began + rng.uniform(0.5, 1.5) * interval
    next_report = began + 30
    damager = _Damager(uri, rng) if config.damage_interval_s and not config.s3 else None
    next_damage = began + rng.uniform(0.5, 1.5) * (config.damage_interval_s or 0)
    with (workdir / "kills.jsonl").open("a", encoding="utf-8") as kills, contextlib.ExitStack() as undo:
        if damager is not None:
            undo.callback(damager.restore)  # never leave the log damaged, whatever happens
        while True:
            tail.update(workers)
            done = sum(tail.operations.values())
            now = time.monotonic()
            _restart_crashed(workers, result, progress)
            if (
                done >= config.operations
                and sum(result.kills.values()) >= config.kills
                and tail.roles_done >= {role.name for role in ROLES}
            ):
                break
            if now > deadline:
                result.failures.append(
                    f"targets not reached in {config.max_minutes} min: {done} operations,"
                    f" {sum(result.kills.values())} kills, roles done {sorted(tail.roles_done)}"
                )
                break
            if now >= next_kill:
                weights = [0.0 if w.role.warm_up and tail.warming_up(w) else w.role.kill_weight for w in workers]
                victim = rng.choices(workers, weights=weights)[0]
                kills.write(json.dumps({"time": time.time(), "killed": victim.name}) + "\n")
                kills.flush()
                victim.kill()
                result.kills[victim.role.name] += 1
                victim.start()
                next_kill = time.monotonic() + rng.uniform(0.5, 1.5) * interval
            if damager is not None and damager.restore_at and now >= damager.restore_at:
                damager.restore()
                damager.restore_at = 0.0
                next_damage = now + rng.uniform(0.5, 1.5) * (config.damage_interval_s or 0)
            elif damager is not None and not damager.restore_at and now >= next_damage:
                damager.damage(result, kills)
            if now >= next_report:
                progress(f"{now - began:.0f} s: {done:,} operations, {sum(result.kills.values())} kills")
                next_report = now + 30
            time.sleep(0.25)


def _restart_crashed(workers: list[_Worker], result: SoakResult, progress: Callable[[str], None]) -> None:
    """A worker that exited without being told to is a crash: remember why, start it again."""
    for worker in workers:
        code = worker.exited()
        if code is not None:
            result.crashes.append(f"{worker.name} exited with {code}:\n{worker.output_tail()}")
            progress(f"crash: {result.crashes[-1]}")
            worker.start()


def _drain(
    config: SoakConfig,
    store: Any,
    workers: list[_Worker],
    workdir: Path,
    result: SoakResult,
    progress: Callable[[str], None],
) -> None:
    """Stop the writers, let the group catch up with the log end, stop the consumers."""
    progress("stopping producers, writer and maintenance")
    (workdir / "stop-writers").touch()
    for worker in workers:
        if worker.role.writes:
            _await_exit(worker, config.stop_timeout_s, result)
    progress("waiting for the group to catch up")
    # A write whose abort failed (the log was damaged just then) leaves its reservation to expire:
    # readers, and so the group and the final read, wait at it until any client aborts it.
    deadline = time.monotonic() + config.drain_timeout_s
    while any(store.log.latest().pending_reservations(tp) for tp in _partitions(store)):
        if time.monotonic() > deadline:
            result.failures.append(f"offset reservations still pending after {config.drain_timeout_s} s")
            break
        time.sleep(0.5)

    tps = _partitions(store)
    probe = store.consumer(GROUP)
    deadline = time.monotonic() + config.drain_timeout_s
    while True:
        ends = {str(tp): end for tp, end in probe.end_offsets(tps).items()}
        committed = {str(tp): (om.offset if om else None) for tp, om in probe.committed(tps).items()}
        if committed == ends:
            break
        if time.monotonic() > deadline:
            result.failures.append(f"the group did not catch up in {config.drain_timeout_s} s: {committed} of {ends}")
            break
        _restart_crashed([w for w in workers if not w.role.writes], result, progress)
        time.sleep(0.5)
    probe.close()
    (workdir / "stop-consumers").touch()
    for worker in workers:
        if not worker.role.writes:
            _await_exit(worker, 60, result)


def _await_exit(worker: _Worker, timeout_s: float, result: SoakResult) -> None:
    assert worker.proc is not None
    try:
        code = worker.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        result.failures.append(f"{worker.name} did not stop within {timeout_s} s:\n{worker.output_tail()}")
        worker.kill()
        return
    if code != 0:
        result.crashes.append(f"{worker.name} exited with {code} while stopping:\n{worker.output_tail()}")


def _partitions(store: Any) -> list[Any]:
    from lakelog.engine.topics import TopicPartition

    return [
        TopicPartition(topic, p)
        for topic in (TOPIC, WRITE_TOPIC)
        for p in range(store.describe_topic(topic).partitions)
    ]


def _final_reads(store: Any) -> tuple[list[dict], list[dict], dict[tuple[str, str, int], int]]:
    """The topics read by a lakelog consumer (read_committed) and by delta-rs, and the group's committed offsets."""
    from deltalake import DeltaTable, QueryBuilder

    from lakelog.engine.storage.object_store import delta_storage_options, python_uri

    tps = _partitions(store)
    reader = store.consumer(auto_offset_reset="earliest")
    reader.assign(tps)
    reader.seek_to_beginning()
    ends = reader.end_offsets(tps)
    final: list[dict] = []
    deadline = time.monotonic() + 600
    while any(reader.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        final += [
            {"topic": r.topic, "partition": r.partition, "offset": r.offset, "value": r.value.decode()}
            for r in reader.poll(timeout_ms=500, max_records=50_000)
        ]
    reader.close()
    table = DeltaTable(python_uri(store.uri), storage_options=delta_storage_options(store.uri))
    rows = (
        QueryBuilder()
        .register("log", table)
        .execute(f"""SELECT topic, "partition", "offset", value FROM log WHERE topic IN ('{TOPIC}', '{WRITE_TOPIC}')""")
        .read_all()
    )
    import pyarrow as pa

    plain = [
        {"topic": row["topic"], "partition": row["partition"], "offset": row["offset"], "value": row["value"].decode()}
        for row in pa.table(rows).to_pylist()
    ]
    probe = store.consumer(GROUP)
    committed = {(GROUP, tp.topic, tp.partition): om.offset for tp, om in probe.committed(tps).items() if om}
    probe.close()
    return final, plain, committed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--operations", type=int, default=SoakConfig.operations, help="acknowledged operations")
    parser.add_argument("--kills", type=int, default=SoakConfig.kills)
    parser.add_argument("--s3", action="store_true", help="a store on a loopback S3 server instead of a directory")
    parser.add_argument("--seed", type=int, default=SoakConfig.seed)
    parser.add_argument("--kill-interval", type=float, help="mean, in seconds (default: 4, on S3 15)")
    parser.add_argument("--pace", type=float, default=SoakConfig.pace, help="scales the workers' pauses")
    parser.add_argument(
        "--damage-interval",
        type=float,
        default=SoakConfig.damage_interval_s,
        help="mean seconds between damages of the newest commit file (local stores; 0: none)",
    )
    parser.add_argument("--max-minutes", type=float, default=SoakConfig.max_minutes)
    parser.add_argument("--workdir", type=Path, help="where logs go (default: a new temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory even when the soak passes")
    parser.add_argument(
        "--allow-unexpected-errors",
        default="",
        metavar="OPERATION[,OPERATION]",
        help="pass even if these operations (maintain, consume, write, send, commit, commit_transaction) raised"
        " errors that are not LakelogErrors; they are still printed",
    )
    args = parser.parse_args(argv)
    if args.operations < 0 or args.kills < 0:
        parser.error("--operations and --kills must be >= 0")
    config = SoakConfig(
        operations=args.operations,
        kills=args.kills,
        s3=args.s3,
        seed=args.seed,
        kill_interval_s=args.kill_interval,
        damage_interval_s=args.damage_interval,
        pace=args.pace,
        max_minutes=args.max_minutes,
        workdir=args.workdir,
        allow_unexpected_errors=frozenset(filter(None, args.allow_unexpected_errors.split(","))),
    )
    # A SIGTERM (say from `timeout`) unwinds like Ctrl-C, so that every worker is killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = config.workdir or Path(tempfile.mkdtemp(prefix="lakelog-soak-"))
    result = run_soak(dataclasses.replace(config, workdir=workdir), progress=lambda text: print(text, flush=True))
    print("\n".join(result.lines()), flush=True)
    if result.ok and not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs: {workdir}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
