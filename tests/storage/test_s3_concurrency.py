"""Several producer processes (no Spark) producing into the same partitions of one S3 store:
each commit file is created with S3's conditional write, so the invariant holds as it does
for local stores (tests/engine/test_concurrency.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.log_checks import check_acknowledged, check_dense, read_acks

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.s3]

WORKER = Path(__file__).resolve().parents[1] / "workers" / "produce.py"
ROOT = Path(__file__).resolve().parents[2]


def test_three_drivers_producing_into_the_same_s3_partitions_keep_offsets_dense(s3_server, s3_store, tmp_path):
    store = s3_store
    store.create_topic("shared", partitions=2)
    start = tmp_path / "go"
    workers = ["d0", "d1", "d2"]
    processes, logs = {}, []
    for name in workers:
        log = tmp_path / f"{name}.jsonl"
        logs.append(log)
        out = open(tmp_path / f"{name}.out", "w")  # noqa: SIM115 - closed when the process is reaped
        args = ["--worker", name, "--log", str(log), "--store", store.uri, "--start", str(start)]
        args += ["--topic", "shared", "--partitions", "0,1", "--count", "30", "--batch", "3"]
        processes[name] = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            # The endpoint and credentials reach the drivers the AWS way (AWS_* env).
            env={**os.environ, **s3_server.env, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
        )
    # Start them together once every driver has opened the store.
    deadline = time.monotonic() + 600
    outs = [tmp_path / f"{name}.out" for name in workers]
    while not all("ready after" in o.read_text() for o in outs):
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes.values()), [
            o.read_text()[-2000:] for o in outs
        ]
        time.sleep(0.2)
    start.touch()
    for name, process in processes.items():
        code = process.wait(timeout=max(1, deadline - time.monotonic()))
        assert code == 0, f"driver {name} exited {code}:\n" + (tmp_path / f"{name}.out").read_text()[-3000:]

    acks = read_acks(logs)
    assert len(acks) == 3 * 30 and [a for a in acks if "error" in a] == []
    rows = store.read("shared").select("topic", "partition", "offset", "value").collect()
    counts = check_dense(rows)
    assert counts[("shared", 0)] == counts[("shared", 1)] == 45
    check_acknowledged(rows, acks)
    assert {e.client_id for e in store.history_entries("shared") if e.ranges} == set(workers)
    # The drivers really raced for versions: S3 refused at least one commit file
    # because another driver had just created it (If-None-Match: * -> 412); the commit
    # core then read the winner and planned again with fresh offsets.
    refusals = sum(o.read_text().count("was taken by another commit") for o in outs)
    assert refusals >= 1, "no commit of one driver was refused for another's: the drivers did not race"
