"""Perf verbs write their baselines (plain-Delta tables, checkpoints, copies) only into a
directory of their own, which they delete afterwards: never beside the store, where
``<store>-plain-delta`` could be anything of the user's (issue 18). Small sizes."""

from __future__ import annotations

import tempfile
import uuid

import pytest

from lakelog.cli import main
from lakelog.engine.storage.object_store import filesystem

VERBS = {
    "produce": (
        ["perf", "produce", "--num-records", "200", "--batch-size", "100", "--partitions", "2", "--compare-plain"],
        "-plain-delta",
        "plain delta: 200 records sent",
    ),
    "transactions": (
        ["perf", "transactions", "--num-transactions", "2", "--records", "3", "--partitions", "2", "--compare-plain"],
        "-plain-delta",
        "plain delta: 2 commits of 3 records",
    ),
    "stream": (
        ["perf", "stream", "--num-records", "300", "--partitions", "2", "--latency-samples", "1", "--rounds", "2"],
        "-perf-stream",
        "copy 300 records, median of 2 interleaved round(s): lakelog",
    ),
    "maintain": (
        ["perf", "maintain", "--commits", "3", "--small", "100", "--large", "200", "--compaction-records", "100"],
        "-perf-maintain",
        "log compaction of 100 records",
    ),
}


@pytest.mark.spark
@pytest.mark.parametrize("verb", list(VERBS))
def test_perf_verbs_leave_everything_outside_the_store_alone(spark, tmp_path, capsys, monkeypatch, verb):
    argv, old_suffix, expected = VERBS[verb]
    store = tmp_path / "store"
    # Where the baselines used to go (and be deleted): a user's directory now.
    keep = tmp_path / f"store{old_suffix}" / "keep.txt"
    keep.parent.mkdir()
    keep.write_text("mine")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    work = tmp_path / "work"
    work.mkdir()
    # produce and maintain use the default temp directory, the others --work-dir.
    extra = ["--work-dir", str(work)] if verb in ("transactions", "stream") else []
    assert main(["--store", str(store), *argv, *extra]) == 0
    assert expected in capsys.readouterr().out
    assert keep.read_text() == "mine" and list(keep.parent.iterdir()) == [keep]
    assert list(work.iterdir()) == [] and list(temp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["store", f"store{old_suffix}", "tmp", "work"])


@pytest.mark.spark
@pytest.mark.s3
def test_perf_baselines_of_an_s3_store_go_to_a_fresh_prefix_under_an_s3_work_dir(spark, s3_uri, s3_bucket, capsys):
    fs, root = filesystem(s3_uri)
    fs.pipe(f"{root}-plain-delta/keep.txt", b"mine")
    scratch = f"s3a://{s3_bucket}/scratch-{uuid.uuid4().hex[:8]}"
    fs.pipe(f"{filesystem(scratch)[1]}/other.txt", b"theirs")
    argv = ["perf", "transactions", "--num-transactions", "2", "--records", "3", "--compare-plain"]
    assert main(["--store", s3_uri, *argv, "--work-dir", scratch]) == 0
    assert "plain delta: 2 commits of 3 records" in capsys.readouterr().out
    assert fs.cat(f"{root}-plain-delta/keep.txt") == b"mine"
    assert fs.ls(f"{root}-plain-delta") == [f"{root}-plain-delta/keep.txt"]
    # Only the run's own prefix under the work dir was made, and it is gone.
    scratch_root = filesystem(scratch)[1]
    assert fs.ls(scratch_root, refresh=True) == [f"{scratch_root}/other.txt"]
