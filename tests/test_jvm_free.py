"""Clients without a JVM: a process where ``import pyspark`` and ``import py4j`` fail still
opens a store, administers topics, produces, consumes in a group, commits offsets, runs a
transaction, runs ``lakelog maintain`` and reads history."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Prepended to a script: every import of pyspark or py4j in that process fails.
NO_JVM = r"""
import sys


class NoJvm:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j"):
            raise ImportError(f"{name} is blocked in this process")
        return None


sys.meta_path.insert(0, NoJvm())
"""

SCRIPT = (
    NO_JVM
    + r"""

from lakelog.store import Store
from lakelog.cli import main as cli

store = Store.open(sys.argv[1])
store.create_topic("in", partitions=2)
store.create_topic("out", partitions=2)
with store.producer(linger_ms=1) as producer:
    futures = [producer.send("in", f"v{i}", key=f"k{i % 3}") for i in range(30)]
    offsets = sorted((f.get().partition, f.get().offset) for f in futures)

consumer = store.consumer("g", auto_offset_reset="earliest", enable_auto_commit=False)
consumer.subscribe(["in"])
txn = store.transactional_producer("copier")
txn.init_transactions()
copied = 0
while copied < 30:
    records = consumer.poll(timeout_ms=2000)
    assert records, "the consumer stopped receiving records"
    txn.begin_transaction()
    for r in records:
        txn.send("out", r.value, key=r.key)
    txn.send_offsets_to_transaction(
        {tp: consumer.position(tp) for tp in consumer.assignment()}, consumer.group_metadata()
    )
    txn.commit_transaction()
    copied += len(records)
consumer.commit()
consumer.close()
committed = Store.open(sys.argv[1]).consumer("g").committed([("in", 0), ("in", 1)])
assert sum(o.offset for o in committed.values()) == 30, committed
assert sum(store.end_offsets("out").values()) == 30
assert cli(["--store", sys.argv[1], "maintain"]) == 0
assert any(e.operation == "transaction" for e in store.history_entries("out"))
assert "pyspark" not in sys.modules and "py4j" not in sys.modules
print("jvm-free ok")
"""
)


def run_without_jvm(script: str, store: Path) -> subprocess.CompletedProcess:
    """``script`` (starting with :data:`NO_JVM`) in a process of its own, ``store`` as its argument."""
    return subprocess.run(
        [sys.executable, "-c", script, str(store)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_producing_consuming_groups_transactions_and_maintenance_need_no_jvm(tmp_path):
    result = run_without_jvm(SCRIPT, tmp_path / "store")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "jvm-free ok" in result.stdout
