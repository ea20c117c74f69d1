"""A full disk ends every writer with StoreFullError and leaves no temporary file behind (no Spark).

The disk is simulated in-process: under the store, files are still created (as on a real full disk,
where ``open`` succeeds and the bytes do not fit) but every write of bytes fails with ENOSPC: Python's
file objects, ``os.write`` to a descriptor opened there, and pyarrow's Parquet writer (to a path or to
a stream opened there).
"""

from __future__ import annotations

import builtins
import errno
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelog.cli import main as cli_main
from lakelog.compaction import maintain
from lakelog.compaction.rewrite import run_tasks
from lakelog.engine.admin.check import check_store
from lakelog.engine.errors import StoreFullError
from lakelog.engine.groups.leases import LeaseStore
from lakelog.store import Store

NO_SPACE = "No space left on device"


class _FullFile:
    """A file opened for writing on a full disk: it exists, its bytes never fit."""

    def __init__(self, handle) -> None:
        self._handle = handle

    def write(self, _data) -> int:
        raise OSError(errno.ENOSPC, NO_SPACE, self._handle.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


class _FullStream:
    """pyarrow's output stream to a file on a full disk: created, its bytes never fit."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def tell(self) -> int:
        return 0


@pytest.fixture
def full_disk(monkeypatch):
    """Call with a store's path: from then on, writes under it fail with ENOSPC."""
    real_open, real_write_table, real_output_stream = builtins.open, pq.write_table, pa.output_stream
    real_os_open, real_os_write = os.open, os.write

    def fill(root: str) -> None:
        full_fds: set[int] = set()

        def under(path) -> bool:
            return isinstance(path, str | os.PathLike) and os.path.abspath(path).startswith(root)

        def open_(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            return _FullFile(handle) if under(file) and any(m in mode for m in "wax+") else handle

        def os_open(path, flags, *args, **kwargs):
            fd = real_os_open(path, flags, *args, **kwargs)
            if under(path) and flags & (os.O_WRONLY | os.O_RDWR):
                full_fds.add(fd)
            else:
                full_fds.discard(fd)  # a number reused after a close
            return fd

        def os_write(fd, data):
            if fd in full_fds:
                raise OSError(errno.ENOSPC, NO_SPACE)
            return real_os_write(fd, data)

        def output_stream(where, *args, **kwargs):
            if not under(where):
                return real_output_stream(where, *args, **kwargs)
            real_open(where, "wb").close()  # opening the stream creates the file
            return _FullStream(where)

        def write_table(table, where, *args, **kwargs):
            if not under(where) and not isinstance(where, _FullStream):
                return real_write_table(table, where, *args, **kwargs)
            if not isinstance(where, _FullStream):
                real_open(where, "wb").close()  # pyarrow has created the file when the write fails
            raise OSError(errno.ENOSPC, f"Error writing bytes to file. Detail: [errno 28] {NO_SPACE}")

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(os, "write", os_write)
        monkeypatch.setattr(pa, "output_stream", output_stream)
        monkeypatch.setattr(pq, "write_table", write_table)

    return fill


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_lease_that_does_not_fit_raises_store_full_and_leaves_no_temporary_file(tmp_path, full_disk):
    uri = str(tmp_path / "store")
    store = Store.open(uri)
    leases = LeaseStore(uri, "g")
    leases.renew("kept", None)
    before = files_under(tmp_path)
    full_disk(uri)
    with pytest.raises(StoreFullError, match=NO_SPACE):
        leases.renew("m-1", None)
    with pytest.raises(StoreFullError, match=NO_SPACE):
        leases.renew("kept", None)  # a renewal over an existing lease
    assert files_under(tmp_path) == before
    assert set(leases.read()) == {"kept"}
    assert check_store(store.context, grace_s=0).ok


def test_a_group_join_on_a_full_disk_raises_store_full_and_commits_nothing(tmp_path, full_disk):
    uri = str(tmp_path / "store")
    store = Store.open(uri)
    store.create_topic("t", partitions=2)
    producer = store.producer()
    producer.send("t", b"v", partition=0)
    producer.flush()
    version = store.log.latest_version()
    before = files_under(tmp_path)
    full_disk(uri)
    consumer = store.consumer(group_id="g")
    consumer.subscribe(["t"])
    with pytest.raises(StoreFullError, match=NO_SPACE):
        consumer.poll(timeout_ms=2_000)
    consumer.close()  # its leave fails too (the commit's temporary file is put_if_absent's to remove)
    assert store.log.latest_version() == version
    outside_log = {f for f in files_under(tmp_path) if not f.startswith("store/_delta_log/")}
    assert outside_log == {f for f in before if not f.startswith("store/_delta_log/")}  # no lease


def _small_files(store: Store) -> None:
    store.create_topic("t", partitions=2)
    producer = store.producer()
    for i in range(6):
        producer.send("t", f"v{i}".encode(), partition=i % 2)
        producer.flush()  # a commit, a file each
    producer.close()


def test_maintenance_on_a_full_disk_raises_store_full_and_commits_nothing(tmp_path, full_disk):
    uri = str(tmp_path / "store")
    store = Store.open(uri)
    _small_files(store)
    version = store.log.latest_version()
    ends = store.end_offsets("t")
    full_disk(uri)
    with pytest.raises(StoreFullError, match=NO_SPACE):
        maintain(store, vacuum=False)
    assert store.log.latest_version() == version
    assert store.end_offsets("t") == ends
    assert check_store(store.context, grace_s=0).ok


def test_maintain_from_the_cli_on_a_full_disk_exits_as_the_table_says(tmp_path, full_disk, capsys):
    uri = str(tmp_path / "store")
    _small_files(Store.open(uri))
    full_disk(uri)
    code = cli_main(["--store", uri, "maintain", "--no-vacuum"])
    err = capsys.readouterr().err
    assert code == StoreFullError.exit_code == 1
    last = err.splitlines()[-1]  # after the progress lines
    assert last.startswith("error: maintain failed: ") and NO_SPACE in last and "Traceback" not in err


@dataclass(frozen=True)
class _Task:
    uri: str


def _no_space(task: _Task) -> None:
    raise OSError(errno.ENOSPC, NO_SPACE, f"{task.uri}/topic=t/partition=0/part.parquet")


@pytest.mark.spark
def test_a_full_disk_in_a_spark_task_of_maintenance_is_store_full_on_the_driver(spark, tmp_path):
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the task's function, for the workers
    with pytest.raises(StoreFullError, match=f"maintain failed: {NO_SPACE}"):
        run_tasks([_Task(str(tmp_path / "store"))], _no_space, spark)
