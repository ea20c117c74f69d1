"""A consumer group of real processes (no Spark) over a topic being produced to: members join at
staggered times, two leave, one is SIGKILLed. Every record is delivered; records are delivered
twice only from the killed member's uncommitted range; and no two members ever own one partition
at the same time (ownership intervals from each member's own callbacks)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from lakelog.store import Store

pytestmark = pytest.mark.slow

WORKER = Path(__file__).resolve().parents[1] / "workers" / "group_member.py"
ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 8


class Members:
    def __init__(self, tmp_path: Path, store: str, assignor: str) -> None:
        self.tmp_path, self.store, self.assignor = tmp_path, store, assignor
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        args = [sys.executable, str(WORKER), "--store", self.store, "--group", "g", "--topic", "t", "--name", name]
        args += ["--log", str(self.tmp_path / f"{name}.jsonl"), "--stop", str(self.tmp_path / f"{name}.stop")]
        args += ["--assignor", self.assignor]
        out = open(self.tmp_path / f"{name}.out", "w")  # noqa: SIM115 - closed when the process is reaped
        self.procs[name] = subprocess.Popen(
            args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=subprocess.STDOUT
        )

    def stop(self, name: str, timeout: float = 60) -> None:
        (self.tmp_path / f"{name}.stop").touch()
        code = self.procs[name].wait(timeout=timeout)
        assert code == 0, (self.tmp_path / f"{name}.out").read_text()[-3000:]

    def events(self) -> list[dict]:
        found = []
        for name in self.procs:
            path = self.tmp_path / f"{name}.jsonl"
            if path.exists():
                found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return sorted(found, key=lambda e: e["t"])


def produce_until(store: Store, stop: threading.Event, sent: list[int]) -> None:
    with store.producer(linger_ms=5) as producer:
        i = 0
        while not stop.is_set():
            for _ in range(20):
                producer.send("t", f"r{i}", key=f"k{i % 97}")
                i += 1
            producer.flush()
            sent[0] = i
            time.sleep(0.05)


def ownership_intervals(events: list[dict], ends: dict[str, float]) -> dict[int, list[tuple[float, float, str]]]:
    """Per partition, (from, to, member) of each time a member owned it."""
    open_since: dict[tuple[str, int], float] = {}
    intervals: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for e in events:
        if e["event"] == "assigned":
            for p in e["partitions"]:
                open_since[(e["member"], p)] = e["t"]
        elif e["event"] in ("revoked", "lost"):
            for p in e["partitions"]:
                start = open_since.pop((e["member"], p), None)
                if start is not None:
                    intervals[p].append((start, e["t"], e["member"]))
    for (member, p), start in open_since.items():
        intervals[p].append((start, ends[member], member))
    return intervals


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range"])
def test_a_group_of_processes_joining_leaving_and_killed_owns_each_partition_once(tmp_path, assignor):
    path = str(tmp_path / "store")
    store = Store.open(path)
    store.create_topic("t", partitions=PARTITIONS)
    stop_producing = threading.Event()
    sent = [0]
    producer = threading.Thread(target=produce_until, args=(store, stop_producing, sent))
    producer.start()
    members = Members(tmp_path, path, assignor)
    names = [f"m{i}" for i in range(8)]
    ends: dict[str, float] = {}
    try:
        for name in names:
            members.start(name)
            time.sleep(1.0)
        time.sleep(3)
        for name in ("m2", "m5"):  # two leave cleanly
            members.stop(name)
            ends[name] = time.time()
        time.sleep(2)
        victim = "m6"
        members.procs[victim].send_signal(signal.SIGKILL)
        members.procs[victim].wait()
        ends[victim] = time.time()
        time.sleep(6)  # its session (4 s) expires; the others take over its partitions
    finally:
        stop_producing.set()
        producer.join()
    total = sent[0]
    # The rest drain the topic, then stop.
    end_offsets = store.end_offsets("t")
    assert sum(end_offsets.values()) == total
    deadline = time.monotonic() + 120
    alive = [n for n in names if n not in ends]
    while time.monotonic() < deadline:
        committed = Store.open(path).consumer("g").committed([("t", p) for p in range(PARTITIONS)])
        if all(c is not None and c.offset == end_offsets[tp.partition] for tp, c in committed.items()):
            break
        time.sleep(0.5)
    for name in alive:
        members.stop(name)
        ends[name] = time.time()

    events = members.events()
    delivered: dict[tuple[int, int], list[str]] = defaultdict(list)
    for e in events:
        if e["event"] == "records":
            assert e["last"] - e["first"] + 1 == e["n"]
            for offset in range(e["first"], e["last"] + 1):
                delivered[(e["p"], offset)].append(e["member"])
    expected = {(p, o) for p, end in end_offsets.items() for o in range(end)}
    assert set(delivered) == expected, f"missing {sorted(expected - set(delivered))[:10]}"
    # Duplicates only from the killed member's range after its last commit.
    last_commit: dict[int, int] = {}
    for e in events:
        if e["member"] == victim and e["event"] == "committed":
            last_commit.update({int(p): o for p, o in e["offsets"].items()})
    twice = {k: v for k, v in delivered.items() if len(v) > 1}
    for (p, offset), who in twice.items():
        assert victim in who and offset >= last_commit.get(p, 0), f"{p}:{offset} delivered to {who}"
    # One owner at a time.
    for p, spans in ownership_intervals(events, ends).items():
        spans.sort()
        for (_, a_to, a), (b_from, _, b) in itertools.pairwise(spans):
            assert a_to <= b_from, f"partition {p}: {a} owned it until {a_to}, {b} from {b_from}"
    # Liveness stayed off the Delta log: only joins, syncs, leaves, expiries and commits are in it.
    operations = {e.operation for e in store.history_entries()}
    assert "heartbeat" not in operations and "group_deadlines" in operations
