"""A randomized workload of real processes against one store, checked Jepsen-style.

Plain producers, transactional producers that sometimes abort, and two
consumers of one group (one SIGKILLed midway) run at once; every send,
transaction, poll and commit is recorded and tests/history_checker.py must
find no anomaly. ``LAKELOG_TEST_HISTORY_RECORDS`` sets the records per producer
(CI runs a small workload; a soak can run a long one).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.history_checker import check, load_events

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WORKER = Path(__file__).parent / "workers" / "history_worker.py"
RECORDS = int(os.environ.get("LAKELOG_TEST_HISTORY_RECORDS", "40"))


def test_randomized_workload_has_no_anomalies(store, tmp_path):
    store.create_topic("h", partitions=3)
    stop = tmp_path / "stop"
    roles = [("p1", "producer"), ("p2", "producer"), ("x1", "txn"), ("c1", "consumer"), ("c2", "consumer")]
    logs = {name: tmp_path / f"{name}.jsonl" for name, _ in roles}
    out = open(tmp_path / "workers.out", "ab")  # noqa: SIM115
    procs = {}
    for seed, (name, role) in enumerate(roles):
        args = [sys.executable, str(WORKER), "--store", store.uri, "--role", role, "--name", name, "--topic", "h"]
        args += ["--count", str(RECORDS), "--log", str(logs[name]), "--stop", str(stop), "--seed", str(seed)]
        procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).parent.parent)
    try:
        deadline = time.monotonic() + 600
        # Kill one consumer once it has polled something (or after a while).
        while time.monotonic() < deadline:
            if (logs["c1"].exists() and '"poll"' in logs["c1"].read_text()) or time.monotonic() > deadline - 500:
                break
            time.sleep(0.5)
        procs["c1"].send_signal(signal.SIGKILL)
        for name in ("p1", "p2", "x1"):
            assert procs[name].wait(timeout=max(1, deadline - time.monotonic())) == 0, name
        time.sleep(12)  # c2 takes over c1's partitions after its session and catches up
        stop.touch()
        assert procs["c2"].wait(timeout=120) == 0
    finally:
        for p in procs.values():
            p.kill()
        out.close()
    final = [
        {"topic": r.topic, "partition": r.partition, "offset": r.offset, "value": bytes(r.value).decode()}
        for r in store.read("h").collect()
    ]
    report = check(load_events([logs[n] for n, _ in roles if logs[n].exists()]), final)
    assert report.ok, report.summary()
    assert report.stats["polled_records"] > 0 and report.stats["txns"].get("aborted", 0) > 0
    assert report.stats["sends"]
