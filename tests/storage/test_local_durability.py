"""An acknowledged commit on a local store survives a power loss: its data files, the commit
file and every directory entry leading to them are synced before the acknowledgement, and a
failed put leaves nothing behind. No Spark."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from lakelog.engine.commit.log_files import LogFiles
from lakelog.engine.errors import CommitNotDurableError
from lakelog.engine.storage import object_store
from lakelog.engine.storage.object_store import put_if_absent
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from tests.storage.power_loss import PowerLoss, watch_native_syncs

TP = TopicPartition("t", 0)


class SyncLog:
    """Records, in order, every fsync (naming the file or directory) and every link."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        self.inodes: list[int] = []  # of each event's file or directory (0 for a link)
        real_fsync, real_link = os.fsync, os.link

        def fsync(fd: int) -> None:
            real_fsync(fd)
            info = os.fstat(fd)
            kind = "sync-dir" if stat.S_ISDIR(info.st_mode) else "sync-file"
            # A file synced before it has a name reads as "<directory>/#<inode> (deleted)".
            self.events.append((kind, os.readlink(f"/proc/self/fd/{fd}")))
            self.inodes.append(info.st_ino)

        def link(src: str, dst: str, *args: object, **kwargs: object) -> None:
            real_link(src, dst, *args, **kwargs)
            self.events.append(("link", os.path.abspath(dst)))
            self.inodes.append(0)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "link", link)
        watch_native_syncs(monkeypatch)

    def index(self, kind: str, predicate) -> int:
        return next(i for i, (k, path) in enumerate(self.events) if k == kind and predicate(path))


@pytest.fixture
def store(tmp_path) -> Store:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd")
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    return store


def test_an_acknowledged_send_synced_its_data_file_commit_file_and_directories_in_order(store, monkeypatch):
    syncs = SyncLog(monkeypatch)
    entered: list[int] = []
    returned: list[int] = []
    real_put = LogFiles.put_commit

    def put_commit(self, version: int, data: bytes, with_files=(), linked=None, while_syncing=None) -> bool:
        entered.append(len(syncs.events))  # what had happened when put_commit was called
        landed = real_put(self, version, data, with_files, linked, while_syncing)
        returned.append(len(syncs.events))  # what had happened when put_commit returned
        return landed

    monkeypatch.setattr(LogFiles, "put_commit", put_commit)
    version = store.log.latest().version + 1
    with store.producer(linger_ms=0) as producer:
        assert producer.send("t", b"v", partition=0).get().offset == 0
    root = store.uri
    log_dir = f"{root}/_delta_log"
    partition_dir = f"{root}/topic=t/partition=0"
    commit = f"{log_dir}/{version:020d}.json"
    done = syncs.events[: returned[0]]
    data = next(i for i, (k, p) in enumerate(done) if k == "sync-file" and p.endswith(".parquet"))
    data_dir = next(i for i, (k, p) in enumerate(done) if k == "sync-dir" and p == partition_dir)
    linked = done.index(("link", commit))
    # The commit file's bytes, synced before it had its name (unnamed, or a temporary name).
    temp = syncs.inodes.index(os.stat(commit).st_ino)
    assert done[temp][0] == "sync-file" and os.path.dirname(done[temp][1]) == log_dir
    log_synced = next(i for i, (k, p) in enumerate(done) if k == "sync-dir" and p == log_dir and i > linked)
    # The data file, its directory and the commit file are synced together, in the commit's put
    # (one journal commit, not one round of syncs for the data and another for the commit file),
    # all before the commit file is linked; _delta_log/ after.
    assert entered[0] <= min(data, data_dir, temp) and max(data, data_dir, temp) < linked < log_synced
    # New directories were synced into their parents when created (the topic's, the partition's).
    assert ("sync-dir", root) in done[:data_dir] and ("sync-dir", f"{root}/topic=t") in done[:data_dir]


def test_a_new_store_syncs_its_root_and_delta_log_into_their_parents(tmp_path, monkeypatch):
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd")
    syncs = SyncLog(monkeypatch)
    root = tmp_path / "a" / "store"
    Store.open(root)
    commit = ("link", f"{root}/_delta_log/{0:020d}.json")
    before = syncs.events[: syncs.events.index(commit)]
    assert ("sync-dir", str(tmp_path)) in before  # "a" is new: its parent holds its name
    assert ("sync-dir", str(tmp_path / "a")) in before and ("sync-dir", str(root)) in before
    assert ("sync-dir", f"{root}/_delta_log") in syncs.events[syncs.events.index(commit) :]


@pytest.mark.parametrize("synced", [True, False], ids=["directories-synced", "control-without-directory-sync"])
def test_no_acknowledged_offset_is_reused_after_a_power_loss(tmp_path, monkeypatch, synced):
    """A power loss right after the acknowledgements; then a new process reads and appends.

    The control run switches directory syncs off for the sends (the benchmark's private hook):
    the simulated file system must then lose acknowledged commits and hand their offsets out
    again, which shows that it can catch the fault the syncs prevent."""
    power = PowerLoss(tmp_path, monkeypatch)
    root = tmp_path / "store"
    store = Store.open(root)
    store.create_topic("t", partitions=1)
    monkeypatch.setattr(object_store, "_sync_directories", synced)
    acked: dict[int, bytes] = {}
    with store.producer(linger_ms=0) as producer:
        for i in range(6):
            value = f"acked-{i}".encode()
            acked[producer.send("t", value, partition=0).get().offset] = value
    lost = power.crash()
    monkeypatch.setattr(object_store, "_sync_directories", True)
    after = Store.open(root, create=False)
    consumer = after.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TP])
    found = {r.offset: r.value for r in consumer.poll(timeout_ms=500)}
    consumer.close()
    with after.producer(linger_ms=0) as producer:
        next_offset = producer.send("t", b"after", partition=0).get().offset
    if synced:
        assert not [name for name in lost if name.endswith(".json") or name.endswith(".parquet")], lost
        assert found == acked
        assert next_offset == max(acked) + 1
    else:
        assert any(name.startswith("_delta_log/") or "/_delta_log/" in name for name in lost), lost
        assert found != acked and next_offset in acked  # an acknowledged offset handed out again


def test_a_put_that_fails_on_a_full_disk_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        put_if_absent(str(tmp_path), "00000000000000000001.json", b"{}\n")
    assert list(tmp_path.iterdir()) == []


def test_a_commit_whose_directory_cannot_be_synced_is_not_acknowledged_and_keeps_its_files(store, monkeypatch):
    def failing(path: str) -> None:
        if path.endswith("_delta_log"):
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(object_store, "sync_directory", failing)
    with store.producer(linger_ms=0) as producer:
        future = producer.send("t", b"v", partition=0)
        producer.flush()
        assert isinstance(future.exception(), CommitNotDurableError)
    monkeypatch.undo()
    # Visible (readers may have seen it) and complete: its data file was not deleted.
    consumer = Store.open(store.uri, create=False).consumer(None, auto_offset_reset="earliest")
    consumer.assign([TP])
    assert [(r.offset, r.value) for r in consumer.poll(timeout_ms=500)] == [(0, b"v")]
    consumer.close()


def test_a_put_links_its_bytes_whole_once_and_leaves_no_other_file(tmp_path):
    assert put_if_absent(str(tmp_path), "00000000000000000001.json", b"first")
    assert not put_if_absent(str(tmp_path), "00000000000000000001.json", b"second")
    assert put_if_absent(str(tmp_path), "00000000000000000001.crc", b"{}", durable=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000001.crc", "00000000000000000001.json"]
    assert (tmp_path / "00000000000000000001.json").read_bytes() == b"first"
    assert stat.S_IMODE((tmp_path / "00000000000000000001.json").stat().st_mode) == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    "refusal", [errno.EOPNOTSUPP, errno.EISDIR, None], ids=["EOPNOTSUPP", "EISDIR", "no-O_TMPFILE"]
)
def test_where_no_unnamed_file_can_be_made_a_put_writes_a_named_temporary_one(tmp_path, monkeypatch, refusal):
    """A file system without O_TMPFILE (EOPNOTSUPP), a kernel older than it (EISDIR), a
    platform without it or without /proc: the bytes go to a named temporary file, removed after."""
    created: list[str] = []
    real_open = os.open
    unnamed = getattr(os, "O_TMPFILE", 0)

    def open_(path, flags, *args, **kwargs):
        if unnamed and flags & unnamed == unnamed:
            if refusal is not None:
                raise OSError(refusal, os.strerror(refusal), path)
            raise AssertionError("an unnamed file was asked for where there are none")
        if flags & os.O_CREAT:
            created.append(os.path.basename(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    if refusal is None:
        monkeypatch.setattr(object_store, "_O_TMPFILE", None)
    assert put_if_absent(str(tmp_path), "00000000000000000001.json", b"first")
    assert not put_if_absent(str(tmp_path), "00000000000000000001.json", b"second")
    assert len(created) == 2 and all(
        n.startswith(".00000000000000000001.json.") and n.endswith(".tmp") for n in created
    )
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000001.json"]
    assert (tmp_path / "00000000000000000001.json").read_bytes() == b"first"


def test_a_put_into_a_missing_directory_raises_and_creates_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        put_if_absent(str(tmp_path / "missing"), "00000000000000000001.json", b"x")
    assert list(tmp_path.iterdir()) == []
