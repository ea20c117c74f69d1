"""The invariant under real concurrency: separate OS processes (JVM-free producers; Spark only for
``write(df)``), maintenance racing them, and a writer SIGKILLed between its data files and its commit."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakelog.compaction import maintain
from lakelog.store import Store
from tests.log_checks import check_acknowledged, check_dense, read_acks

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WORKER = Path(__file__).resolve().parents[1] / "workers" / "produce.py"
ROOT = Path(__file__).resolve().parents[2]


def spawn(tmp_path, name, *args):
    log = tmp_path / f"{name}.jsonl"
    out = open(tmp_path / f"{name}.out", "w")  # noqa: SIM115 - closed when the process is reaped
    process = subprocess.Popen(
        [sys.executable, str(WORKER), "--worker", name, "--log", str(log), *args],
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    return process, log


def wait_all(processes, tmp_path, timeout=900):
    deadline = time.monotonic() + timeout
    for name, process in processes.items():
        code = process.wait(timeout=max(1, deadline - time.monotonic()))
        assert code == 0, f"worker {name} exited {code}:\n" + (tmp_path / f"{name}.out").read_text()[-3000:]


def test_concurrent_producers_keep_offsets_dense_and_acknowledged(spark, tmp_path):
    path = str(tmp_path / "store")
    store = Store.open(path, spark=spark)
    store.create_topic("shared", partitions=3)
    store.create_topic("side", partitions=2)
    start = tmp_path / "go"
    common = ["--store", path, "--start", str(start), "--count", "30", "--batch", "5"]
    plan = {
        # four producers fight over the same two partitions ...
        **{f"w{i}": ["--topic", "shared", "--partitions", "0,1"] for i in range(4)},
        # ... while one writes another topic, keyed over its partitions
        "w4": ["--topic", "side", "--mode", "keyed"],
    }
    processes, logs = {}, []
    for name, args in plan.items():
        processes[name], log = spawn(tmp_path, name, *common, *args)
        logs.append(log)
    start.touch()
    wait_all(processes, tmp_path)

    acks = read_acks(logs)
    assert len(acks) == 5 * 30
    assert [a for a in acks if "error" in a] == []
    rows = store.read(["shared", "side"]).select("topic", "partition", "offset", "value").collect()
    counts = check_dense(rows)
    assert counts[("shared", 0)] == counts[("shared", 1)] == 60
    assert counts[("side", 0)] + counts[("side", 1)] == 30
    check_acknowledged(rows, acks)
    assert {e.client_id for e in store.history_entries("shared")} >= {"w0", "w1", "w2", "w3"}


def data_files(path: str) -> set[str]:
    root = Path(path)
    return {str(p.relative_to(root)) for p in root.glob("topic=*/partition=*/*.parquet")}


def committed_files(store: Store) -> set[str]:
    files = set()
    for version in range(store.log.latest_version() + 1):
        commit = store.log.read_commit(version)
        files |= {a.path for a in (commit.adds if commit else ())}
    return files


def test_a_producer_killed_mid_commit_leaves_the_log_consistent(spark, tmp_path):
    path = str(tmp_path / "store")
    store = Store.open(path, spark=spark)
    store.create_topic("t", partitions=2)
    start = tmp_path / "go"
    steady = {}
    for name in ("s0", "s1"):
        steady[name], _ = spawn(
            tmp_path,
            name,
            "--store",
            path,
            "--start",
            str(start),
            "--topic",
            "t",
            "--partitions",
            "0",
            "--count",
            "40",
            "--batch",
            "4",
        )
    start.touch()
    rng = random.Random(7)
    victim_logs = []
    killed_mid_commit = False
    for attempt in range(5):
        victim, log = spawn(
            tmp_path,
            f"victim{attempt}",
            "--store",
            path,
            "--topic",
            "t",
            "--partitions",
            "1",
            "--mode",
            "dataframe",
            "--batch",
            "200000",
            "--count",
            "1000",
        )
        victim_logs.append(log)
        deadline = time.monotonic() + 300
        while not (log.exists() and log.read_text().strip()) and time.monotonic() < deadline:
            assert victim.poll() is None, (tmp_path / f"victim{attempt}.out").read_text()[-3000:]
            time.sleep(0.2)
        # Kill once a later batch has data files on disk that no commit names yet (or
        # after a random wait: then the kill lands elsewhere and the next victim tries).
        give_up = time.monotonic() + rng.uniform(5.0, 20.0)
        while time.monotonic() < give_up and not (data_files(path) - committed_files(store)):
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        if data_files(path) - committed_files(store):
            killed_mid_commit = True  # files written, commit never published
            break
    assert killed_mid_commit, "no kill landed between writing data files and committing"
    wait_all(steady, tmp_path)

    rows = store.read("t").select("topic", "partition", "offset", "value").collect()
    check_dense(rows)
    check_acknowledged(rows, read_acks([tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"]))
    victim_rows = [r for r in rows if bytes(r.value).startswith(b"victim")]
    assert len(victim_rows) % 200_000 == 0  # whole batches only
    present = {(r.partition, r.offset) for r in victim_rows}
    for ack in read_acks(victim_logs):
        assert {(ack["p"], o) for o in range(ack["start"], ack["end"])} <= present


def test_jvm_free_producers_a_dataframe_write_and_maintenance_race_on_one_partition(spark, tmp_path):
    path = str(tmp_path / "store")
    store = Store.open(path, spark=spark)
    store.create_topic("one", partitions=1, config={"segment.bytes": 1 << 20})
    start = tmp_path / "go"
    processes, logs = {}, []
    for i in range(3):
        name = f"p{i}"
        common = ["--store", path, "--start", str(start), "--topic", "one", "--count", "60", "--batch", "3"]
        processes[name], log = spawn(tmp_path, name, *common)
        logs.append(log)
    processes["df"], df_log = spawn(
        tmp_path, "df", "--store", path, "--topic", "one", "--mode", "dataframe", "--batch", "500", "--count", "3"
    )
    start.touch()
    runs = 0
    while any(p.poll() is None for p in processes.values()):
        maintain(path, topics=["one"], vacuum=False)
        runs += 1
        time.sleep(0.2)
    wait_all(processes, tmp_path)
    maintain(path, topics=["one"], vacuum=False)
    assert runs >= 1
    rows = Store.open(path, spark=spark).read("one").select("topic", "partition", "offset", "value").collect()
    assert check_dense(rows)[("one", 0)] == 3 * 60 + 3 * 500
    check_acknowledged(rows, read_acks(logs))
    present = {r.offset for r in rows if bytes(r.value).startswith(b"df:")}
    for ack in read_acks([df_log]):
        assert set(range(ack["start"], ack["end"])) <= present
