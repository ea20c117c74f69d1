"""A streaming copy topic -> topic, SIGKILLed at random points and restarted from its checkpoint."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WORKER = Path(__file__).parent.parent / "workers" / "stream_copy.py"
KILLS = int(os.environ.get("LAKELOG_TEST_STREAM_KILLS", "3"))


def values_by_partition(store, topic):
    rows = store.read(topic).select("partition", "offset", "key", "value").collect()
    result = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r.partition, r.offset)):
        result[r.partition].append((bytes(r.key), bytes(r.value)))
    return dict(result)


def copied_total(store) -> int:
    return sum(store.end_offsets("b").values())


def run(store, checkpoint, log, *extra):
    args = [sys.executable, str(WORKER), "--store", store.uri, "--source", "a", "--sink", "b"]
    args += ["--checkpoint", str(checkpoint), *extra]
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).parent.parent.parent)


def test_killed_and_restarted_stream_copies_every_record_exactly_once_in_order(store, tmp_path):
    store.create_topic("a", partitions=4)
    store.create_topic("b", partitions=4)
    with store.producer(linger_ms=0) as producer:
        for i in range(3000):
            producer.send("a", f"r{i}", key=f"k{i % 101}")
            if i % 100 == 99:
                producer.flush()  # 30 commits: micro-batches of 200 records end between them
    source = values_by_partition(store, "a")
    rng = random.Random(int(os.environ.get("LAKELOG_TEST_SEED", "11")))
    checkpoint = tmp_path / "checkpoint"
    kills_with_progress = 0
    with open(tmp_path / "workers.log", "ab") as log:
        for round_ in range(KILLS):
            before = copied_total(store)
            worker = run(store, checkpoint, log)
            if round_ % 3 == 1:
                time.sleep(rng.uniform(2, 10))  # now and then a kill during start-up or planning
            else:
                # Wait for the copy to move (start-up takes 10-60 s, more on a busy machine), then
                # kill at a random point of the following micro-batches.
                deadline = time.monotonic() + 240
                while copied_total(store) == before and before < 3000 and time.monotonic() < deadline:
                    assert worker.poll() is None, (tmp_path / "workers.log").read_text()[-3000:]
                    time.sleep(0.2)
                time.sleep(rng.uniform(0, 1.5))
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            copied = values_by_partition(store, "b")
            for p, records in copied.items():
                # Never a duplicate, never out of order: each partition is a prefix of the source's.
                assert records == source[p][: len(records)], f"partition {p} diverged after a kill"
            total = sum(len(r) for r in copied.values())
            kills_with_progress += before < total < 3000
        final = run(store, checkpoint, log, "--available-now")
        assert final.wait(timeout=600) == 0, (tmp_path / "workers.log").read_text()[-3000:]
    assert values_by_partition(store, "b") == source
    assert kills_with_progress >= 1, "no kill landed while the copy was under way; the test proved nothing"
