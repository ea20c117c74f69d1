"""Exactly-once read-process-write under SIGKILL, with real processes (JVM-free workers)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WORKER = Path(__file__).parent.parent / "workers" / "eos_pipeline.py"
KILLS = int(os.environ.get("LAKELOG_TEST_EOS_KILLS", "4"))
RECORDS = 1500


def start(store_path, log):
    args = [sys.executable, str(WORKER), "--store", str(store_path), "--group", "pipeline"]
    args += ["--source", "a", "--sink", "b", "--transactional-id", "pipeline-0"]
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).parent.parent.parent)


def test_killed_and_restarted_pipeline_writes_each_record_exactly_once(store, tmp_path):
    store.create_topic("a", partitions=2)
    store.create_topic("b", partitions=2)
    with store.producer(linger_ms=5) as producer:
        for i in range(RECORDS):
            producer.send("a", f"r{i}", key=f"k{i % 17}")
    rng = random.Random(int(os.environ.get("LAKELOG_TEST_SEED", "7")))
    log_path = tmp_path / "workers.log"
    killed_while_running = 0
    with open(log_path, "ab") as log:
        for _ in range(KILLS):
            worker = start(store.uri, log)
            # Kill anywhere: during start-up, mid-transaction, mid-commit.
            time.sleep(rng.uniform(0.5, 3.0))
            killed_while_running += worker.poll() is None
            worker.send_signal(signal.SIGKILL)
            worker.wait()
        worker = start(store.uri, log)
        try:
            assert worker.wait(timeout=300) == 0, log_path.read_text()[-3000:]
        finally:
            worker.kill()
    assert killed_while_running >= KILLS // 2, "the kills landed after the work was done"
    written = Counter(bytes(r.value).decode() for r in store.read("b").collect())
    expected = Counter(f"T:r{i}" for i in range(RECORDS))
    assert written == expected, f"missing {expected - written}, extra {written - expected}"
    ends = store.end_offsets("a")
    with store.consumer("pipeline") as reader:
        committed = reader.committed([("a", p) for p in ends])
    assert {tp.partition: om.offset for tp, om in committed.items()} == ends
