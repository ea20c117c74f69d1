"""Files a store writes get the process umask's mode, so another user (a Spark job, a notebook
server, a reader account) can read the table as it can read any file its owner creates.
Commit files once came out 0600 (a temp file renamed into place). No JVM."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest

from lakelog.compaction import maintain
from lakelog.engine.consume.consumer import Consumer
from lakelog.engine.produce.producer import Producer
from lakelog.store import Store


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def busy_store(root: Path) -> Store:
    """A store that went through every kind of write: topics, appends, a checkpoint,
    group offsets, leases, maintenance and VACUUM."""
    store = Store.open(root)
    store.create_topic("t", partitions=2, config={"cleanup.policy": "compact,delete"})
    with Producer(store.context, {"linger.ms": 0}) as producer:
        for i in range(50):  # past the store's delta.checkpointInterval (50 versions)
            producer.send_batch("t", [f"v{i}".encode()] * 3, keys=[b"a", b"b", b"c"], partition=i % 2).get(30)
    deadline = time.monotonic() + 60  # the checkpoint is written in the background
    while not (root / "_delta_log" / "_last_checkpoint").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    consumer = Consumer(store.context, {"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    got = 0
    for _ in range(50):
        got += len(consumer.poll(timeout_ms=200))
        if got >= 150:
            break
    consumer.commit()
    consumer.close()
    maintain(store, vacuum=True, vacuum_retention_hours=0)
    store.close()
    return store


def test_every_file_and_directory_a_store_writes_is_readable_by_others_under_umask_022(tmp_path, umask_022):
    root = tmp_path / "store"
    busy_store(root)
    kinds = set()
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode & 0o055 == 0o055, f"{path} is {oct(mode)}"
        else:
            assert mode & 0o044 == 0o044, f"{path} is {oct(mode)}"
            kinds.add(path.suffix or path.name)
    # What was checked: commit files, checksums, a checkpoint, Parquet data, leases.
    assert {".json", ".crc", ".parquet"} <= kinds
    assert any(p.name.endswith(".checkpoint.parquet") for p in (root / "_delta_log").iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another user needs root to switch users")
def test_another_user_can_list_and_read_every_file_of_the_store(umask_022):
    # pytest's own temporary directories are 0700: use one "nobody" may enter.
    top = Path(tempfile.mkdtemp(prefix="lakelog-permissions-"))
    os.chmod(top, 0o755)
    try:
        _read_as_nobody(top / "store")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _read_as_nobody(root: Path) -> None:
    busy_store(root)
    nobody = pwd.getpwnam("nobody")
    # A forked child that becomes "nobody" and only lists and reads (this interpreter may sit
    # in a directory "nobody" cannot enter, so no new interpreter is started).
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            count = 0

            def fail(exc: OSError) -> None:
                raise exc

            for directory, _, names in os.walk(root, onerror=fail):
                for name in names:
                    with open(os.path.join(directory, name), "rb") as handle:
                        handle.read()
                    count += 1
            os.write(write_end, str(count).encode())
            code = 0
        except BaseException as exc:
            os.write(write_end, repr(exc).encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        said = pipe.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, said
    assert int(said) == sum(1 for p in root.rglob("*") if p.is_file())
