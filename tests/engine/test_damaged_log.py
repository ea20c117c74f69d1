"""A damaged Delta log fails closed everywhere, and never costs an acknowledged offset.

Each row of the durability issue, on real stores with real producers (no Spark):
an empty, non-UTF-8 or unparseable commit file is a CorruptLogError naming it for
every reader and writer and a ``corrupt_commit`` violation for ``lakelog check``
(``--repair`` leaves it alone); a ``_last_checkpoint`` naming a missing
checkpoint costs one warning and nothing else, and ``--repair`` removes the hint
so that delta-rs reads the log again; a ``.crc`` that disagrees with the log is
not trusted by readers, not passed on by writers, reported and removed by
``--repair``; an orphaned checksum or a missing commit is named, not retried as
a listing race forever.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakelog.cli import main
from lakelog.engine.commit import wait_for_checkpoints
from lakelog.engine.commit.actions import CorruptCommitError, decode_commit
from lakelog.engine.errors import CorruptLogError
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from tests.test_jvm_free import NO_JVM, run_without_jvm

TP = TopicPartition("t", 0)
EMPTY, NON_UTF8, UNPARSEABLE = b"", b'{"commitInfo":{"operation":"WRITE\xff"}}\n', b'{"commitInfo":{}}\n{"add":{"pa'
DAMAGE = {"empty": EMPTY, "non-utf8": NON_UTF8, "unparseable": UNPARSEABLE}


def _store(path: Path, records: int = 3) -> tuple[Store, dict[int, bytes]]:
    store = Store.open(path)
    store.create_topic("t", partitions=1)
    acked = {}
    with store.producer(linger_ms=0) as producer:
        for i in range(records):
            value = f"v{i}".encode()
            acked[producer.send("t", value, partition=0).get().offset] = value
    return store, acked


def _commits(root: Path) -> list[Path]:
    return sorted((root / "_delta_log").glob("*.json"))


def _read_all(store: Store) -> dict[int, bytes]:
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TP])
    found = {r.offset: r.value for r in consumer.poll(timeout_ms=500)}
    consumer.close()
    return found


def _check(root: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--store", str(root), "check", *extra])
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("data", "why"),
    [(EMPTY, "holds no action"), (NON_UTF8, "not UTF-8"), (UNPARSEABLE, "not a Delta action"), (b"\n \n", "no action")],
)
def test_a_commit_file_that_is_empty_not_utf8_or_not_actions_is_corrupt(data, why):
    with pytest.raises(CorruptCommitError, match=why):
        decode_commit(data)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_newest_commit_fails_closed_for_a_new_process_and_check_names_it(tmp_path, capsys, damage):
    root = tmp_path / "store"
    _, acked = _store(root)
    newest = _commits(root)[-1]  # the commit of offset 2
    newest.write_bytes(DAMAGE[damage])
    if damage == "empty":
        DeltaTable(str(root))  # delta-rs reads it as a commit of nothing: why lakelog decodes it itself
    with pytest.raises(CorruptLogError, match=newest.name):
        Store.open(root, create=False)  # so nothing can be produced at offset 2 again
    assert main(["--store", str(root), "offsets", "t"]) == 1
    code, out = _check(root, capsys)
    assert code == 8
    assert f"store: corrupt_commit: {newest} is corrupt" in out
    # --repair reports it and changes nothing: an empty commit in its place would hand out its offsets.
    code, out = _check(root, capsys, "--repair")
    assert code == 8 and "corrupt_commit" in out and newest.read_bytes() == DAMAGE[damage]
    assert sorted(acked) == [0, 1, 2]


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_commit_a_running_process_has_not_read_yet_fails_its_readers_and_writers(tmp_path, damage):
    root = tmp_path / "store"
    store, _ = _store(root)
    consumer = store.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TP])
    assert len(consumer.poll(timeout_ms=500)) == 3
    producer = store.producer(linger_ms=0)
    with Store.open(root, create=False).producer(linger_ms=0) as other:  # another process
        assert other.send("t", b"v3", partition=0).get().offset == 3
    damaged = _commits(root)[-1]
    damaged.write_bytes(DAMAGE[damage])
    for _ in range(2):  # every poll says why, none skips it
        with pytest.raises(CorruptLogError, match=damaged.name):
            consumer.poll(timeout_ms=100)
    future = producer.send("t", b"never", partition=0)
    producer.flush()
    assert isinstance(future.exception(), CorruptLogError), future.exception()
    assert damaged.name in str(future.exception())  # not acknowledged at offset 3, which "v3" holds
    producer.close()
    consumer.close()


def test_a_damaged_commit_under_a_checkpoint_is_named_by_check_only(tmp_path, capsys):
    """Readers of the latest snapshot start from the checkpoint and never read it; check reads every
    commit the log holds (history, time travel and the streaming source may)."""
    root = tmp_path / "store"
    _, acked = _store(root, records=52)  # a checkpoint at version 50
    wait_for_checkpoints()
    damaged = _commits(root)[10]
    damaged.write_bytes(NON_UTF8)
    assert _read_all(Store.open(root, create=False)) == acked
    code, out = _check(root, capsys)
    assert code == 8 and f"corrupt_commit: {damaged}" in out and "not UTF-8" in out


@pytest.fixture
def checkpointed(tmp_path) -> tuple[Path, dict[int, bytes]]:
    root = tmp_path / "store"
    _, acked = _store(root, records=105)  # checkpoints at versions 50 and 100
    wait_for_checkpoints()
    return root, acked


def _checkpoint(root: Path, version: int) -> Path:
    return root / "_delta_log" / f"{version:020d}.checkpoint.parquet"


@pytest.mark.parametrize("which", ["newest", "all"])
def test_a_missing_checkpoint_costs_one_warning_and_nothing_else(checkpointed, caplog, capsys, which):
    root, acked = checkpointed
    assert json.loads((root / "_delta_log" / "_last_checkpoint").read_text())["version"] == 100
    for version in (100,) if which == "newest" else (50, 100):
        _checkpoint(root, version).unlink()
    with pytest.raises(Exception, match="didn't find any checkpoints"):
        DeltaTable(str(root))  # what every command met before
    with caplog.at_level(logging.WARNING):
        store = Store.open(root, create=False)
        assert _read_all(store) == acked
        with store.producer(linger_ms=0) as producer:
            assert producer.send("t", b"after", partition=0).get().offset == 105
        assert _read_all(Store.open(root, create=False))[105] == b"after"
    warnings = [r for r in caplog.records if "checkpoint.parquet" in r.getMessage()]
    assert len(warnings) == 1 and "reading the JSON log instead" in warnings[0].getMessage()
    code, out = _check(root, capsys)
    assert code == 8 and "missing_checkpoint: _last_checkpoint names the checkpoint of version 100" in out
    code, out = _check(root, capsys, "--repair")
    assert code == 0, out
    assert "removed _delta_log/_last_checkpoint" in out and "wrote a checkpoint of version" in out
    table = DeltaTable(str(root))  # delta-rs (and Spark) read the log again
    assert table.version() == Store.open(root, create=False).log.latest().version
    assert len(_read_all(Store.open(root, create=False))) == 106


def test_a_checkpoint_missing_with_the_json_before_it_is_a_named_corruption(checkpointed, capsys):
    root, _ = checkpointed
    _checkpoint(root, 100).unlink()
    _checkpoint(root, 50).unlink()
    for commit in _commits(root)[:3]:  # log cleanup had removed what the checkpoints covered
        commit.unlink()
    with pytest.raises(CorruptLogError, match=r"00000000000000000100\.checkpoint\.parquet is missing"):
        Store.open(root, create=False)
    code, out = _check(root, capsys, "--repair")
    assert code == 8 and "missing_commit" in out


def _tamper_checksum(root: Path, version: int, change) -> Path:
    path = root / "_delta_log" / f"{version:020d}.crc"
    checksum = json.loads(path.read_text())
    change(checksum)
    path.write_text(json.dumps(checksum))
    return path


def test_a_checksum_that_disagrees_is_not_trusted_reported_and_removed(tmp_path, caplog, capsys):
    root = tmp_path / "store"
    store, acked = _store(root)
    version = store.log.latest().version

    def change(checksum):
        checksum["numFiles"] += 7
        checksum["metadata"]["configuration"] = {}  # would hide every topic if trusted

    crc = _tamper_checksum(root, version, change)
    assert "lakelog.topic.t" not in DeltaTable(str(root)).metadata().configuration  # delta-rs trusts it
    with caplog.at_level(logging.WARNING):
        reopened = Store.open(root, create=False)
    assert "t" in reopened.list_topics() and _read_all(reopened) == acked
    assert any(f"{crc.name} disagrees with the log (numFiles 10" in r.getMessage() for r in caplog.records)
    with reopened.producer(linger_ms=0) as producer:
        assert producer.send("t", b"v3", partition=0).get().offset == 3
    # The next commit's checksum is not derived from the bad one (nor is any later).
    assert not (root / "_delta_log" / f"{version + 1:020d}.crc").exists()
    assert _read_all(Store.open(root, create=False))[3] == b"v3"
    code, out = _check(root, capsys)
    assert code == 8 and f"checksum_mismatch: {crc.name} disagrees with the log: numFiles 10" in out
    code, out = _check(root, capsys, "--repair")
    assert code == 0 and not crc.exists(), out
    assert "lakelog.topic.t" in DeltaTable(str(root)).metadata().configuration


def test_an_orphaned_checksum_or_a_missing_commit_is_named_not_retried_forever(tmp_path, capsys):
    root = tmp_path / "store"
    store, acked = _store(root)
    version = store.log.latest().version
    orphan = root / "_delta_log" / f"{version + 1:020d}.crc"
    orphan.write_text((root / "_delta_log" / f"{version:020d}.crc").read_text())
    with pytest.raises(CorruptLogError, match=orphan.name):
        Store.open(root, create=False)
    code, out = _check(root, capsys, "--repair")
    assert code == 0 and f"removed _delta_log/{orphan.name}" in out
    assert _read_all(Store.open(root, create=False)) == acked
    missing = _commits(root)[-2]
    missing.unlink()
    with pytest.raises(CorruptLogError, match=missing.name):
        Store.open(root, create=False)
    code, out = _check(root, capsys, "--repair")
    assert code == 8 and f"missing_commit: {missing.name} is missing" in out


def test_checking_and_repairing_a_damaged_log_needs_no_jvm(tmp_path):
    root = tmp_path / "store"
    _store(root, records=55)
    wait_for_checkpoints()
    _checkpoint(root, 50).unlink()
    _commits(root)[-1].write_bytes(EMPTY)
    script = (
        NO_JVM
        + r"""
from lakelog.cli import main
from lakelog.store import Store
from lakelog.engine.errors import CorruptLogError
try:
    Store.open(sys.argv[1], create=False)
    raise SystemExit("opened a damaged store")
except CorruptLogError:
    pass
assert main(["--store", sys.argv[1], "check", "--repair"]) == 8
assert "pyspark" not in sys.modules
"""
    )
    done = run_without_jvm(script, root)
    assert done.returncode == 0, done.stderr
    assert "corrupt_commit" in done.stdout and "removed _delta_log/_last_checkpoint" in done.stdout


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_no_checkpoint_is_ever_written_over_a_damaged_commit(tmp_path, damage):
    """delta-rs reads an empty commit as one without actions: a checkpoint built over it would
    drop the commit's files for every reader for good, and no repair could tell."""
    from lakelog.engine.commit.checkpoints import write_checkpoint

    store, _ = _store(tmp_path / "store")
    newest = _commits(tmp_path / "store")[-1]
    version = int(newest.stem)
    newest.write_bytes(DAMAGE[damage])
    with pytest.raises(CorruptLogError, match=newest.name):
        write_checkpoint(store.uri, version)
    assert not list((tmp_path / "store" / "_delta_log").glob("*.checkpoint.parquet"))


def test_a_commit_cut_at_a_line_boundary_still_parses_and_is_still_corrupt(tmp_path):
    """Each lakelog commit's commitInfo (its first line) holds the CRC-32 of the lines after it:
    a file that lost its last actions but still parses is told from a whole one."""
    _, acked = _store(tmp_path / "store")
    newest = _commits(tmp_path / "store")[-1]
    data = newest.read_bytes()
    first_line = data[: data.index(b"\n") + 1]
    assert len(data.splitlines()) > 1 and "commitInfo" in json.loads(first_line)
    newest.write_bytes(first_line)  # the add and the end marker are gone, every line is valid JSON
    with pytest.raises(CorruptCommitError, match="CRC-32"):
        decode_commit(first_line)
    with pytest.raises(CorruptLogError, match=newest.name):  # readers and writers alike
        Store.open(tmp_path / "store")
    newest.write_bytes(data)
    assert _read_all(Store.open(tmp_path / "store")) == acked
