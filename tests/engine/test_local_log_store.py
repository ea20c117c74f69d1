"""AtomicLocalLogStore against a real race: two JVM processes create the same commit files.

Delta's default store for local paths (HDFSLogStore) makes create-if-absent
atomic only inside one JVM. Measured with this same race (tests/workers/
logstore_race.py, 1000 versions, three runs): 0, 1 and 2 versions that both
processes were told they created, and 0, 1 and 4 whose file held the content
of the process told it had lost -- each one an acknowledged commit silently
replaced. Here every version must have exactly one winner, and the file must
hold the winner's content.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "workers" / "logstore_race.py"
VERSIONS = 1000


def test_exactly_one_process_creates_each_commit_file(tmp_path):
    log_dir = tmp_path / "_delta_log"
    log_dir.mkdir()
    start = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "--dir",
                str(log_dir),
                "--name",
                name,
                "--count",
                str(VERSIONS),
                "--log-store",
                "io.lakelog.storage.AtomicLocalLogStore",
                "--start",
                str(start),
                "--ready",
                str(tmp_path / f"{name}.ready"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for name in ("p0", "p1")
    ]
    deadline = time.monotonic() + 300
    while not all((tmp_path / f"{n}.ready").exists() for n in ("p0", "p1")):
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes)
        time.sleep(0.1)
    start.touch()
    results = {}
    for process in processes:
        out, _ = process.communicate(timeout=600)
        assert process.returncode == 0
        result = json.loads(out.strip().splitlines()[-1])
        results[result["name"]] = set(result["won"])
    assert not results["p0"] & results["p1"], "a version was created twice"
    assert results["p0"] | results["p1"] == set(range(VERSIONS))
    assert results["p0"] and results["p1"], "the processes did not race"
    for version in range(VERSIONS):
        writer = json.loads((log_dir / f"{version:020d}.json").read_text())["writer"]
        assert version in results[writer]
    assert not [p for p in os.listdir(log_dir) if p.endswith(".tmp")]
