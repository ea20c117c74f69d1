"""What a short-lived client's start imports (issue 30): each check runs in a fresh process,
so ``sys.modules`` holds exactly what that path imported.

Producing to a store, reading it without a consumer group and the console commands that do so
import neither delta-rs (a young table is replayed from its commits, a grown one read from its
checkpoint), nor fsspec (local files are read and written with plain file calls), nor the group
side (Kafka's protocol types, the group coordinator), nor any admin module they do not use;
importing the CLI (``lakelog --help``, a command refused for its arguments) loads neither
pyarrow nor the commit core.
The speed itself is measured by ``lakelog perf startup``, not here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lakelog.engine.commit import wait_for_checkpoints
from lakelog.engine.commit.state_snapshot import SNAPSHOT_NAME
from lakelog.store import Store

ROOT = Path(__file__).resolve().parents[1]

PREAMBLE = """
import sys

# On none of these paths: delta-rs, fsspec, pandas (and pyarrow.dataset, which imports it),
# Spark, Kafka's protocol types, lakelog serve.
NEVER = ("deltalake", "fsspec", "pandas", "pyarrow.dataset", "pyspark", "kio", "lakelog.kafka_endpoint")
# The group side, which a consumer without a group.id does not use.
GROUP_SIDE = ("lakelog.engine.consume.group_client", "lakelog.engine.groups.coordinator")

def assert_unimported(*names):
    found = sorted(n for n in names if n in sys.modules)
    assert not found, f"imported: {found}"
"""

CLIENT = (
    PREAMBLE
    + """
import lakelog.cli
assert_unimported("pyarrow", "lakelog.engine.commit", "lakelog.engine.context")  # lakelog --help

from lakelog import Store, TopicPartition

store = Store.open(sys.argv[1], create=False)
with store.producer(linger_ms=0) as producer:
    producer.send("t", b"first").get()
assert_unimported(
    *NEVER,
    "lakelog.engine.admin.delete_records",
    "lakelog.engine.admin.history",
    "lakelog.engine.admin.time_travel",
    "lakelog.engine.consume",
)

consumer = store.consumer(enable_auto_commit=False)
consumer.assign([TopicPartition("t", 0)])
consumer.seek(TopicPartition("t", 0), 0)
records = consumer.poll(timeout_ms=10_000)
consumer.close(autocommit=False)
assert [r.value for r in records] == [b"first"], records
assert_unimported(*NEVER, *GROUP_SIDE)
print("ok")
"""
)

CLI = (
    PREAMBLE
    + """
import io
from contextlib import redirect_stdout

from lakelog.cli import main

store = sys.argv[1]
sys.stdin = io.TextIOWrapper(io.BytesIO(b"one\\ntwo\\nthree\\n"))
with redirect_stdout(io.StringIO()) as out:
    assert main(["--store", store, "topics", "--create", "--topic", "cli", "--partitions", "1"]) == 0
    assert main(["--store", store, "produce", "--topic", "cli"]) == 0
    assert main(["--store", store, "consume", "--topic", "cli", "--from-beginning", "--max-messages", "3"]) == 0
assert out.getvalue().split()[-3:] == ["one", "two", "three"], out.getvalue()
assert_unimported(*NEVER, *GROUP_SIDE)
print("ok")
"""
)


def _run(script: str, store: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", script, str(store)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout[-2000:] + done.stderr[-4000:]


def test_producing_and_reading_without_a_group_import_only_what_they_use(tmp_path):
    Store.open(tmp_path / "store").create_topic("t", partitions=1)
    _run(CLIENT, tmp_path / "store")


def test_the_console_commands_import_only_what_they_use(tmp_path):
    Store.open(tmp_path / "store")
    _run(CLI, tmp_path / "store")


CHECKPOINTED = (
    PREAMBLE
    + """
from lakelog import Store, TopicPartition
from lakelog.engine.commit import wait_for_checkpoints

store = Store.open(sys.argv[1], create=False)
consumer = store.consumer(enable_auto_commit=False)
consumer.assign([TopicPartition("t", 0)])
consumer.seek(TopicPartition("t", 0), 0)
assert consumer.poll(timeout_ms=10_000)
consumer.close(autocommit=False)
assert_unimported(*NEVER, *GROUP_SIDE)
# Across the next checkpoint: written (delta-rs, its check, the state snapshot) by this process.
with store.producer(linger_ms=0) as producer:
    while store.log.latest_version() % 50:
        producer.send("t", b"more").get()
assert wait_for_checkpoints(120)
assert_unimported("fsspec", "pandas", "pyarrow.dataset", "pyspark", "kio", "lakelog.kafka_endpoint")
print("ok")
"""
)


@pytest.mark.parametrize("read_from", ["state-snapshot", "checkpoint"])
def test_a_checkpointed_store_is_read_and_checkpointed_without_pandas(tmp_path, read_from):
    """A cold open from the checkpoint's state snapshot or from the checkpoint itself, and
    writing the next checkpoint with its snapshot, import neither pandas nor the rest."""
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        while store.log.latest_version() < 52:
            producer.send("t", b"r").get()
    assert wait_for_checkpoints(60)
    snapshot = tmp_path / "store" / "_delta_log" / SNAPSHOT_NAME
    assert snapshot.exists()
    if read_from == "checkpoint":
        snapshot.unlink()
    _run(CHECKPOINTED, tmp_path / "store")
