"""The same lakelog code on a Spark standalone cluster (master + worker on loopback) instead of local[*],
against an S3 store (the loopback S3 server of tests/conftest.py): a produce job, a streaming copy with
its checkpoint on S3, and maintenance with its rewrites as Spark tasks.

As on a real cluster, no process has the store's endpoint or credentials in its environment (the
AWS_* variables the test session exports are removed): the job's session is configured with
``spark.hadoop.fs.s3a.*`` only, and lakelog's Python code in Spark's Python workers -- the streaming
source and sink, maintenance's rewrite tasks -- must get them from there (LakelogProvider's options,
tasks carrying the driver's settings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from tests.standalone import standalone_cluster
from tests.storage.s3_server import CREDENTIALS

WORKER = Path(__file__).resolve().parent / "workers" / "cluster_job.py"
ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def without_aws() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


@pytest.fixture(scope="module")
def master_url(s3_server):
    with standalone_cluster(cores=2, memory="2g", base_env=without_aws()) as url:
        yield url


def s3a_conf(endpoint: str, bucket: str, credentials: dict[str, str]) -> list[str]:
    """The loopback server as Spark settings: endpoint for every bucket, keys for this bucket only."""
    return [
        f"spark.hadoop.fs.s3a.endpoint={endpoint}",
        f"spark.hadoop.fs.s3a.endpoint.region={credentials['AWS_REGION']}",
        "spark.hadoop.fs.s3a.path.style.access=true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled=false",
        f"spark.hadoop.fs.s3a.bucket.{bucket}.access.key={credentials['AWS_ACCESS_KEY_ID']}",
        f"spark.hadoop.fs.s3a.bucket.{bucket}.secret.key={credentials['AWS_SECRET_ACCESS_KEY']}",
    ]


def run_job(master: str, store: str, checkpoint: str, conf: list[str], env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, str(WORKER), "--master", master, "--store", store, "--checkpoint", checkpoint]
        + [arg for c in conf for arg in ("--conf", c)],
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


def test_produce_stream_and_maintain_on_a_standalone_cluster_against_an_s3_store(master_url, s3_server):
    bucket = s3_server.create_bucket("lakelog-cluster")
    run = uuid.uuid4().hex[:8]
    seen = run_job(
        master_url,
        f"s3a://{bucket}/{run}/store",
        f"s3a://{bucket}/{run}/checkpoints/copy",
        conf=s3a_conf(s3_server.endpoint, bucket, CREDENTIALS),
        env=without_aws(),
    )
    check_job(seen)
    print("cluster job seconds:", seen["seconds"])
