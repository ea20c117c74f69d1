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


# Client paths in a process that has not imported pandas: pyarrow imports it for pa.array,
# pa.scalar, to_numpy and zoned timestamps' as_py (lakelog/engine/arrow_columns.py), which
# costs every short-lived client a third of a second or more.
NO_PANDAS = r"""
import io
import sys
import traceback
from contextlib import redirect_stdout


class WhoImportsPandas:
    # Lets the import happen (pyarrow would swallow an ImportError); remembers from where.
    stack = None

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" and WhoImportsPandas.stack is None:
            frames = [f for f in traceback.extract_stack() if not f.filename.startswith("<")]
            WhoImportsPandas.stack = "".join(traceback.format_list(frames[-12:]))
        return None


sys.meta_path.insert(0, WhoImportsPandas())

from lakelog.cli import main as cli
from lakelog.store import Store

store = Store.open(sys.argv[1])
store.create_topic("t", partitions=2)
with store.producer(linger_ms=1) as producer:
    producer.send("t", b"v0", key=b"k", headers=[("h", b"x"), ("n", None)]).get()
    producer.send("t", b"v1", timestamp=1_700_000_000_000).get()
    producer.send_batch("t", [b"a", "b", None], keys=[b"k1", None, "k3"], timestamps=[1, 2, 3]).get()
consumer = store.consumer("g", auto_offset_reset="earliest")
consumer.subscribe(["t"])
seen = []
while len(seen) < 5:
    records = consumer.poll(timeout_ms=5000)
    assert records, f"the consumer stopped after {len(seen)} records"
    seen += records
consumer.commit()
consumer.close()
assert sorted(r.value for r in seen if r.value) == [b"a", b"b", b"v0", b"v1"], seen
assert [r.headers for r in seen if r.value == b"v0"] == [[("h", b"x"), ("n", None)]]

reopened = Store.open(sys.argv[1])  # a cold open of a store with data files
assert sum(reopened.end_offsets("t").values()) == 5
assert reopened.offsets_for_times("t", {0: 0, 1: 0})[0] is not None
sys.stdin = io.TextIOWrapper(io.BytesIO(b"one\ntwo\nthree\n"))
with redirect_stdout(io.StringIO()) as out:
    assert cli(["--store", sys.argv[1], "topics", "--create", "--topic", "cli", "--partitions", "1"]) == 0
    assert cli(["--store", sys.argv[1], "produce", "--topic", "cli"]) == 0
    assert cli(["--store", sys.argv[1], "consume", "--topic", "cli", "--from-beginning", "--max-messages", "3"]) == 0
    assert cli(["--store", sys.argv[1], "topics", "--list"]) == 0
assert "three" in out.getvalue(), out.getvalue()
imported = sorted(m for m in ("pandas", "pyspark", "py4j", "confluent_kafka") if m in sys.modules)
assert not imported, f"client paths imported {imported}; pandas from:\n{WhoImportsPandas.stack}"
print("no pandas ok")
"""


def test_client_paths_do_not_import_pandas(tmp_path):
    result = run_without_jvm(NO_JVM + NO_PANDAS, tmp_path / "store")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "no pandas ok" in result.stdout
