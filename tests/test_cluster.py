"""The same lakelog code on a Spark standalone cluster (master + worker on loopback) instead of local[*]:
a produce job, a streaming copy with its checkpoint next to the store, and maintenance as Spark tasks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.standalone import standalone_cluster

WORKER = Path(__file__).resolve().parent / "workers" / "cluster_job.py"
ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master_url():
    with standalone_cluster(cores=2, memory="2g") as url:
        yield url


def run_job(master: str, store: str, checkpoint: str, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, str(WORKER), "--master", master, "--store", store, "--checkpoint", checkpoint],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_job(seen: dict) -> None:
    assert seen["master"].startswith("spark://127.0.0.1:")
    assert len(seen["executors"]) >= 2  # the driver and at least one executor of the worker
    by_partition = defaultdict(list)
    for key, value, partition, offset in sorted(seen["events"], key=lambda r: (r[2], r[3])):
        by_partition[partition].append((key, value, offset))
    copied = defaultdict(list)
    for key, value, partition, offset in sorted(seen["copy"], key=lambda r: (r[2], r[3])):
        copied[partition].append((key, value, offset))
    assert sum(len(v) for v in by_partition.values()) == 20_000
    for partition, records in by_partition.items():
        assert [r[2] for r in records] == list(range(len(records)))  # dense offsets
        assert copied[partition] == records  # record for record, in order, same offsets
    # compaction kept the newest value of each of the 10 keys (plus each file's first record)
    latest = {}
    for key, value, _partition, _offset in sorted(seen["prices"], key=lambda r: (r[2], r[3])):
        latest[key] = value
    assert latest == {f"fruit{i}": "4" for i in range(10)}
    assert seen["compacted"] > 0
    assert sum(seen["end_offsets"]["prices"].values()) == 250  # compaction never moves end offsets
    assert seen["files_after"]["events"] == 4  # OPTIMIZE left one file per partition


def test_produce_stream_and_maintain_on_a_standalone_cluster(master_url, tmp_path):
    seen = run_job(master_url, str(tmp_path / "store"), str(tmp_path / "checkpoint"))
    check_job(seen)
    print("cluster job seconds:", seen["seconds"])
