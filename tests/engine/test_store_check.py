"""``lakelog check``: injected holes, duplicates, missing and unreadable files, wrong statistics and
stray temporaries are found (exit 8), healthy stores pass, and ``--repair`` fixes only what it may
(no Spark)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from lakelog.cli import main
from lakelog.engine.admin.check import FileContents, check_partition, recorded_runs, stray_temporaries
from lakelog.engine.offsets import FileStats
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

TP = TopicPartition("t", 0)


# -- pure -------------------------------------------------------------------------------


def _file(path: str, first: int, last: int, n: int | None = None) -> FileStats:
    return FileStats(path, TP, last - first + 1 if n is None else n, first, last)


def _held(path: str, first: int, last: int) -> FileContents:
    return FileContents(path, np.arange(first, last + 1, dtype=np.int64))


def test_dense_unique_offsets_pass_and_each_fault_is_named():
    files = [_file("lakelog-a", 0, 4), _file("lakelog-b", 5, 9)]
    contents = {"lakelog-a": _held("lakelog-a", 0, 4), "lakelog-b": _held("lakelog-b", 5, 9)}
    report = check_partition(TP, files, contents, 0, 10, compacted=False)
    assert report.violations == [] and report.records == 10

    hole = check_partition(
        TP,
        [*files[:1], _file("lakelog-c", 7, 9)],
        {**contents, "lakelog-c": _held("lakelog-c", 7, 9)},
        0,
        10,
        compacted=False,
    )
    assert [(v.kind, v.detail) for v in hole.violations] == [("offset_gap", "2 offset(s) held by no file: 5..6")]
    assert check_partition(TP, files[:1], contents, 0, 10, compacted=True).violations == []  # the cleaner's gaps

    twice = [*files, _file("lakelog-d", 3, 6)]
    dup = check_partition(TP, twice, {**contents, "lakelog-d": _held("lakelog-d", 3, 6)}, 0, 10, compacted=False)
    assert [v.kind for v in dup.violations] == ["duplicate_offset"] and "3..6" in dup.violations[0].detail
    # Another writer's row at a committed offset is left out by readers: a warning, not a violation.
    foreign = check_partition(
        TP, [*files, _file("part-x", 3, 3)], {**contents, "part-x": _held("part-x", 3, 3)}, 0, 10, compacted=False
    )
    assert foreign.violations == [] and "repeated by another writer" in foreign.warnings[0]

    lying = check_partition(TP, [_file("lakelog-a", 0, 4, n=7), files[1]], contents, 0, 10, compacted=False)
    assert [v.kind for v in lying.violations] == ["wrong_stats"] and "numRecords 7" in lying.violations[0].detail
    shifted = check_partition(TP, [_file("lakelog-a", 0, 3, n=5), files[1]], contents, 0, 10, compacted=False)
    assert [v.kind for v in shifted.violations] == ["wrong_stats"]

    gone = check_partition(
        TP,
        files,
        {"lakelog-a": FileContents("lakelog-a", None, missing=True), "lakelog-b": contents["lakelog-b"]},
        0,
        10,
        compacted=False,
    )
    assert [v.kind for v in gone.violations] == ["missing_file"]  # its range is not reported again as a gap
    bad = check_partition(
        TP,
        files,
        {**contents, "lakelog-b": FileContents("lakelog-b", None, error="ArrowInvalid: x")},
        0,
        10,
        compacted=False,
    )
    assert [v.kind for v in bad.violations] == ["unreadable_file"] and "ArrowInvalid" in bad.violations[0].detail


def test_recorded_losses_cover_a_gap_and_chain():
    marks = {5: 7, 7: 9}

    def lost(a):
        return marks.get(a, -1)

    assert recorded_runs((5, 9), {"lost": lost}) == [(5, 9, "lost")]
    assert recorded_runs((5, 10), {"lost": lost}) == [(5, 9, "lost")]  # 9 is a hole nobody recorded
    assert recorded_runs((4, 9), {"lost": lost}) == []
    aborted = {9: 12}
    assert recorded_runs((5, 12), {"lost": lost, "aborted": lambda a: aborted.get(a, -1)}) == [
        (5, 9, "lost"),
        (9, 12, "aborted"),
    ]
    report = check_partition(
        TP,
        [_file("lakelog-a", 0, 4)],
        {"lakelog-a": _held("lakelog-a", 0, 4)},
        0,
        8,
        compacted=False,
        lost_end=lambda a: {5: 8}.get(a, -1),
    )
    assert report.violations == [] and report.lost == [(5, 8)]


def test_aborted_and_pending_reservations_are_no_holes():
    report = check_partition(
        TP,
        [_file("lakelog-a", 0, 2), _file("lakelog-b", 6, 7)],
        {"lakelog-a": _held("lakelog-a", 0, 2), "lakelog-b": _held("lakelog-b", 6, 7)},
        0,
        12,
        compacted=False,
        aborted_end=lambda a: {3: 6}.get(a, -1),
        pending_end=lambda a: {8: 12}.get(a, -1),
    )
    assert report.violations == []
    assert (report.aborted, report.pending) == ([(3, 6)], [(8, 12)])
    assert "aborted (reserved, never written) 3..5" in report.line() and "in progress 8..11" in report.line()
    unrecorded = check_partition(
        TP,
        [_file("lakelog-a", 0, 2), _file("lakelog-b", 6, 7)],
        {"lakelog-a": _held("lakelog-a", 0, 2), "lakelog-b": _held("lakelog-b", 6, 7)},
        0,
        8,
        compacted=False,
    )
    assert [v.kind for v in unrecorded.violations] == ["offset_gap"]


def test_only_old_temporaries_in_the_stores_own_directories_are_stray():
    now = 10_000.0
    listing = [
        ("_delta_log/.00000000000000000012.checkpoint.parquet.3f1e.tmp", now - 7200),
        ("_delta_log/.00000000000000000013.json.ab12.tmp", now - 10),  # a writer in flight
        ("_lakelog/groups/g/members/.ab.tmp", now - 7200),
        ("_delta_log/00000000000000000012.json", now - 7200),
        ("topic=t/partition=0/.x.tmp", now - 7200),  # data directories are not the writers' scratch
    ]
    assert stray_temporaries(listing, now, 3600) == [
        "_delta_log/.00000000000000000012.checkpoint.parquet.3f1e.tmp",
        "_lakelog/groups/g/members/.ab.tmp",
    ]


# -- a real store ----------------------------------------------------------------------


def _store(tmp_path: Path, records: int = 12) -> tuple[Store, Path]:
    root = tmp_path / "store"
    store = Store.open(root)
    store.create_topic("t", partitions=2)
    with store.producer(linger_ms=0) as producer:
        for i in range(records):
            producer.send("t", f"v{i}", partition=i % 2).get()
    return store, root


def _check(root: Path, *extra: str) -> int:
    return main(["--store", str(root), "check", *extra])


def _log_versions(root: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (root / "_delta_log").glob("*.json"))


def _adds(root: Path) -> dict[str, dict]:
    """Every add action the store's commit files hold, by path (the latest wins)."""
    found = {}
    for version in _log_versions(root):
        for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                found[action["add"]["path"]] = action["add"]
    return found


def _files_of(root: Path, partition: int) -> list[tuple[str, dict]]:
    """The partition's data files as (path, add), by first offset."""
    live = [(p, a) for p, a in _adds(root).items() if f"partition={partition}/" in p and (root / p).exists()]
    return sorted(live, key=lambda pa: json.loads(pa[1]["stats"])["minValues"]["offset"])


def _commit(root: Path, actions: list[dict]) -> None:
    """Append a commit to the Delta log by hand, as a foreign writer (or a corrupting one) would."""
    version = _log_versions(root)[-1] + 1
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _remove(add: dict) -> dict:
    return {"remove": {"path": add["path"], "deletionTimestamp": int(time.time() * 1000), "dataChange": True}}


def test_a_healthy_store_passes(tmp_path, capsys):
    store, root = _store(tmp_path)
    store.create_topic("c", partitions=1, config={"cleanup.policy": "compact"})
    with store.producer(linger_ms=0) as producer:
        for i in range(6):
            producer.send("c", f"v{i}", key=f"k{i % 2}", partition=0).get()
    tx = store.transactional_producer("tx")
    tx.init_transactions()
    tx.begin_transaction()
    tx.send("t", "aborted", partition=0)
    tx.abort_transaction()
    tx.begin_transaction()
    tx.send("t", "kept", partition=1)
    tx.commit_transaction()
    tx.close()
    consumer = store.consumer("g", enable_auto_commit=False)
    consumer.assign([TP])
    consumer.poll(timeout_ms=500)
    consumer.commit()
    consumer.close(autocommit=False)
    from lakelog.compaction.maintain import maintain

    maintain(store, vacuum=False)
    assert _check(root) == 0
    out = capsys.readouterr().out
    assert "t/0: ok, offsets 0..5" in out and "t/1: ok, offsets 0..6" in out and "c/0: ok" in out
    assert "at version" in out and ": ok, violations: none" in out


def test_a_missing_file_is_found_and_dropped_only_when_asked(tmp_path, capsys):
    _, root = _store(tmp_path)
    path, _ = _files_of(root, 0)[2]  # offsets 2..2
    (root / path).unlink()
    assert _check(root, "--topic", "t") == 8
    out = capsys.readouterr().out
    assert f"missing_file: {path} (offsets 2..2)" in out and "FAILED" in out
    versions = _log_versions(root)
    assert _check(root, "--repair") == 8  # without --drop-missing-files nothing is committed
    assert _log_versions(root) == versions
    assert main(["--store", str(root), "check", "--drop-missing-files"]) == 2
    capsys.readouterr()

    assert _check(root, "--repair", "--drop-missing-files") == 0
    out = capsys.readouterr().out
    assert "dropped 1 missing file(s)" in out and "lost offsets 2..2" in out and "lost (recorded) 2..2" in out
    last = (root / "_delta_log" / f"{_log_versions(root)[-1]:020d}.json").read_text()
    assert '"operation":"FSCK"' in last and "lost_offsets" in last and "lakelog.lost." in last
    fresh = Store.open(root, create=False)
    consumer = fresh.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TP])
    got = []
    for _ in range(10):
        got += [r.offset for r in consumer.poll(timeout_ms=200)]
    assert got == [0, 1, 3, 4, 5]  # the lost offset is skipped, nothing renumbered
    consumer.close()


def test_an_unreadable_file_a_hole_a_duplicate_and_wrong_stats_are_found(tmp_path, capsys):
    _, root = _store(tmp_path)
    files = _files_of(root, 0)
    (root / files[0][0]).write_bytes(b"not parquet at all")
    _commit(root, [_remove(files[3][1])])  # a hole at offset 3
    copy = files[4][0].replace("lakelog-", "lakelog-copy-")
    shutil.copyfile(root / files[4][0], root / copy)
    _commit(root, [{"add": {**files[4][1], "path": copy}}])  # offset 4 twice
    other = _files_of(root, 1)[1]
    stats = json.loads(other[1]["stats"])
    stats["numRecords"] = 3
    stats["maxValues"]["offset"] = 3
    _commit(root, [{"add": {**other[1], "stats": json.dumps(stats)}}])  # a re-add replaces the add
    assert _check(root) == 8
    out = capsys.readouterr().out
    assert f"unreadable_file: {files[0][0]}" in out
    assert "offset_gap: 1 offset(s) held by no file: 3..3" in out
    assert "duplicate_offset: 1 offset(s) held by two lakelog files: 4..4" in out
    assert f"wrong_stats: {other[0]}: numRecords 3, file holds 1" in out
    assert "violations: duplicate_offset 1, offset_gap 1, unreadable_file 1, wrong_stats" in out
    versions = _log_versions(root)
    assert _check(root, "--repair", "--drop-missing-files") == 8  # none of these is repaired by guessing
    assert _log_versions(root) == versions


def test_repair_removes_only_old_temporaries_of_the_stores_writers(tmp_path, capsys):
    _, root = _store(tmp_path, records=2)
    old = root / "_delta_log" / ".00000000000000000010.checkpoint.parquet.5e1d9c.tmp"
    young = root / "_delta_log" / ".00000000000000000011.json.77aa.tmp"
    lease = root / "_lakelog" / "groups" / "g" / "members" / ".c0ffee.tmp"
    lease.parent.mkdir(parents=True)
    mine = tmp_path / ".users-own.tmp"  # beside the store: never touched
    for f in (old, young, lease, mine):
        f.write_bytes(b"x")
    hour_ago = time.time() - 7200
    for f in (old, lease, mine):
        os.utime(f, (hour_ago, hour_ago))
    assert _check(root) == 8
    out = capsys.readouterr().out
    assert f"stray_temporary: _delta_log/{old.name}" in out and "_lakelog/groups/g/members/.c0ffee.tmp" in out
    assert young.name not in out
    assert _check(root, "--repair") == 0
    out = capsys.readouterr().out
    assert f"removed stray temporary _delta_log/{old.name}" in out
    assert not old.exists() and not lease.exists() and young.exists() and mine.exists()
    assert _check(root, "--grace-seconds", "0") == 8  # the young one, once it counts as old


def test_check_names_unknown_topics_and_missing_stores_and_creates_nothing(tmp_path, capsys):
    _, root = _store(tmp_path, records=1)
    assert _check(root, "--topic", "nope") == 6
    typo = tmp_path / "stroe"
    assert main(["--store", str(typo), "check"]) == 1
    assert not typo.exists()
    assert "error:" in capsys.readouterr().err


def test_an_empty_store_passes(tmp_path, capsys):
    _, root = _store(tmp_path, records=0)
    assert _check(root) == 0
    assert "checked 2 partition(s) (2 empty)" in capsys.readouterr().out
