"""The commit loop against a real local directory and the loopback S3 server, with faults.

Every test ends with the invariant checked on what the store holds: offsets
dense from each partition's start, nothing acknowledged lost or doubled, no
referenced data file missing. No Spark anywhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from lakelog.compaction import maintain
from lakelog.engine.commit import AppTransaction, Committer, MaintenanceChange, RetryPolicy, TableLog
from lakelog.engine.commit.actions import RemoveFile
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import CommitConflictError, CommitStateUnknownError, InvalidTxnStateError
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.storage.object_store import filesystem
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
FAST = RetryPolicy(retries=5, backoff_ms=1, backoff_max_ms=5)


@pytest.fixture(params=["local", "s3"])
def uri(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "store")
    return request.getfixturevalue("s3_uri")


@pytest.fixture
def store(uri) -> Store:
    store = Store.open(uri)
    store.create_topic("t", partitions=2)
    return store


def batch(tp: TopicPartition, values: list[str], app: AppTransaction | None = None) -> ProducerBatch:
    records = RecordBatch()
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        records.add(tp, None, v.encode(), None, now, len(v), i)
    return ProducerBatch(records, 1, app)


def append(committer: Committer, tp: TopicPartition, values: list[str], app=None, policy=FAST):
    result = committer.append(batch(tp, values, app), policy)
    assert result.version is not None
    return result


def rival_append(uri: str, tp: TopicPartition, values: list[str]) -> Callable[[], None]:
    def run() -> None:
        append(Committer(TableLog(uri), "rival"), tp, values)

    return run


class Faults:
    """Replaces a LogFiles' put of commit files; each queued action handles one put."""

    def __init__(self, committer: Committer) -> None:
        self.files = committer.log.files
        self.real = self.files.put_commit
        self.queue: list[Callable[..., bool]] = []
        self.versions: list[int] = []
        self.files.put_commit = self.put  # type: ignore[method-assign]

    def put(self, version: int, data: bytes, *rest: object) -> bool:
        self.versions.append(version)
        if self.queue:
            return self.queue.pop(0)(version, data, *rest)
        return self.real(version, data, *rest)

    def landed_but_lost(self, version: int, data: bytes, *rest: object) -> bool:
        assert self.real(version, data, *rest)
        raise CommitStateUnknownError("the response was lost")

    def lost(self, version: int, data: bytes, *rest: object) -> bool:
        raise CommitStateUnknownError("the request was lost before it reached the store")

    def after(self, rival: Callable[[], None]) -> Callable[..., bool]:
        def action(version: int, data: bytes, *rest: object) -> bool:
            rival()
            return self.real(version, data, *rest)

        return action


def data_files(uri: str) -> set[str]:
    fs, root = filesystem(uri)
    found = fs.glob(f"{root}/topic=*/partition=*/*.parquet")
    return {path[len(root) + 1 :] for path in found}


def check_store(uri: str) -> dict[TopicPartition, list[str]]:
    """The invariant on a fresh reader: dense offsets, every referenced file present; values per partition."""
    state = TableLog(uri).latest()
    reader = PartitionReader(uri)
    on_disk = data_files(uri)
    values = {}
    for tp, files in state.partitions.items():
        for f in files.all():
            assert f.path in on_disk, f"{f.path} is referenced but missing"
        rows = reader.read(files.all(), tp, 0)
        offsets = rows.column("offset").to_pylist()
        start = offsets[0] if offsets else 0
        assert offsets == list(range(start, state.end_offset(tp))), f"{tp}: offsets {offsets}"
        values[tp] = [bytes(v).decode() for v in rows.column("value").to_pylist()]
    return values


def test_a_response_lost_after_the_commit_landed_is_acknowledged_once(store, uri):
    committer = Committer(store.log, "p")
    faults = Faults(committer)
    faults.queue.append(faults.landed_but_lost)
    result = append(committer, T0, ["a", "b"])
    assert result.ranges[T0].start == 0 and result.version == faults.versions[0]
    assert check_store(uri)[T0] == ["a", "b"]


def test_a_request_lost_before_landing_is_settled_by_taking_the_version(store, uri):
    committer = Committer(store.log, "p")
    faults = Faults(committer)
    faults.queue.append(faults.lost)
    before = data_files(uri)
    result = append(committer, T0, ["a", "b"])
    lost_version = faults.versions[0]
    assert result.version == lost_version + 1  # the lost version holds an empty commit now
    settled = TableLog(uri).read_commit(lost_version)
    assert settled.adds == () and settled.commit_info.tags["lakelog.operation"] == "settle"
    assert check_store(uri)[T0] == ["a", "b"]
    assert len(data_files(uri) - before) == 1  # the first attempt's file was deleted


def test_an_append_to_the_same_partition_makes_it_replan_after_the_winner(store, uri):
    committer = Committer(store.log, "p")
    faults = Faults(committer)
    faults.queue.append(faults.after(rival_append(uri, T0, ["r1", "r2"])))
    before = data_files(uri)
    result = append(committer, T0, ["ours"])
    assert result.ranges[T0].start == 2 and result.attempts == 2
    assert check_store(uri)[T0] == ["r1", "r2", "ours"]
    assert len(data_files(uri) - before) == 2  # the rival's and ours; our first attempt's is gone


def test_an_append_to_another_partition_is_rebased_over_with_the_same_files(store, uri):
    committer = Committer(store.log, "p")
    faults = Faults(committer)
    faults.queue.append(faults.after(rival_append(uri, T1, ["other"])))
    before = data_files(uri)
    result = append(committer, T0, ["ours"])
    assert result.attempts == 1 and faults.versions == [faults.versions[0], faults.versions[0] + 1]
    assert result.version == faults.versions[1]
    assert check_store(uri) == {T0: ["ours"], T1: ["other"]}
    assert len(data_files(uri) - before) == 2  # no file was written twice


def test_an_optimize_of_the_partition_is_rebased_over(store, uri):
    committer = Committer(store.log, "p")
    for i in range(3):
        append(committer, T0, [f"v{i}"])
    faults = Faults(committer)
    faults.queue.append(faults.after(lambda: maintain(uri, topics=["t"], vacuum=False)))
    result = append(committer, T0, ["ours"])
    assert result.attempts == 1 and result.ranges[T0].start == 3
    assert len(TableLog(uri).latest().files_of(T0)) == 2  # OPTIMIZE merged the three, ours came after
    assert check_store(uri)[T0] == ["v0", "v1", "v2", "ours"]


def test_a_metadata_change_makes_an_append_replan(store, uri):
    committer = Committer(store.log, "p")
    faults = Faults(committer)
    faults.queue.append(faults.after(lambda: Store.open(uri).create_topic("u", partitions=1)))
    result = append(committer, T0, ["ours"])
    assert result.attempts == 2
    assert check_store(uri)[T0] == ["ours"]


def test_the_same_app_id_set_by_a_winner_makes_an_append_replan_and_refuse(store, uri):
    committer = Committer(store.log, "p")
    app = AppTransaction("lakelog-producer-42", 1)

    def twin() -> None:
        append(Committer(TableLog(uri), "twin"), T0, ["twin"], app=app)

    faults = Faults(committer)
    faults.queue.append(faults.after(twin))
    with pytest.raises(InvalidTxnStateError, match="already at version 1"):
        append(committer, T0, ["ours"], app=app)
    assert check_store(uri)[T0] == ["twin"]


def test_exhausted_retries_commit_nothing_and_leave_no_files(store, uri):
    committer = Committer(store.log, "p")
    faults = Faults(committer)
    faults.queue.extend(faults.after(rival_append(uri, T0, [f"r{i}"])) for i in range(10))
    before = data_files(uri)
    with pytest.raises(CommitConflictError, match="3 times"):
        append(committer, T0, ["ours"], policy=RetryPolicy(retries=2, backoff_ms=1))
    assert check_store(uri)[T0] == ["r0", "r1", "r2"]
    assert len(data_files(uri) - before) == 3  # only the rivals'


def test_a_maintenance_commit_with_an_unknown_outcome_keeps_its_files(store, uri):
    committer = Committer(store.log, "p")
    for i in range(2):
        append(committer, T0, [f"v{i}"])
    state = store.log.latest()
    old = state.files_of(T0).all()
    from lakelog.engine.commit.data_files import DataFileWriter

    rows = PartitionReader(uri).read(old, T0, 0)
    (merged,) = DataFileWriter(uri).write(rows, data_change=False)
    change = MaintenanceChange(
        "OPTIMIZE",
        "t",
        state.topics["t"].topic_id,
        [RemoveFile.of(f, 1, data_change=False) for f in old],
        [merged],
        False,
        {},
        {},
        {},
    )
    maintenance = Committer(TableLog(uri), "m")
    faults = Faults(maintenance)

    def unreadable(version: int):
        raise OSError("the log cannot be read back")

    def landed_then_unreachable(version: int, data: bytes, *rest: object) -> bool:
        maintenance.log.files.read_commit = unreadable  # type: ignore[method-assign]
        return faults.landed_but_lost(version, data, *rest)

    faults.queue.append(landed_then_unreachable)
    with pytest.raises(CommitStateUnknownError, match="its files were kept"):
        maintenance.commit_maintenance(change, state.version, FAST)
    # It did land, and references the new file: which must still be there.
    assert merged.stats.path in data_files(uri)
    assert check_store(uri)[T0] == ["v0", "v1"]


CRASH = """
import os, signal, sys
from lakelog.engine.commit import Committer, TableLog
from lakelog.engine.commit.log_files import LogFiles
from tests.engine.test_commit_loop import FAST, T0, batch

def die(self, version, data, *rest):
    os.kill(os.getpid(), signal.SIGKILL)

LogFiles.put_commit = die
Committer(TableLog(sys.argv[1]), "doomed").append(batch(T0, ["lost"]), FAST)
"""


def test_a_crash_between_data_files_and_the_commit_leaves_only_an_unreferenced_file(store, uri):
    append(Committer(store.log, "p"), T0, ["before"])
    before = data_files(uri)
    child = subprocess.run([sys.executable, "-c", CRASH, uri], cwd=os.getcwd(), env=os.environ.copy(), timeout=120)
    assert child.returncode == -signal.SIGKILL
    orphans = data_files(uri) - before
    assert len(orphans) == 1  # written, never committed
    result = append(Committer(TableLog(uri), "next"), T0, ["after"])
    assert result.ranges[T0].start == 1
    assert check_store(uri)[T0] == ["before", "after"]
    assert not orphans & {f.path for f in TableLog(uri).latest().files_of(T0).all()}
