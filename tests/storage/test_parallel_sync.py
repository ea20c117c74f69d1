"""Several local paths fsync'd at once on native threads, outside the interpreter lock
(engine.storage.parallel_sync), as a commit syncs its file, data files and directories: every
path is synced, each on a thread of its own but the first, and a failure names its path."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys

import pytest

from lakelog.engine.storage.object_store import sync_all
from lakelog.engine.storage.parallel_sync import sync_paths


def test_every_path_is_synced_each_on_its_own_thread_but_the_first(tmp_path):
    if shutil.which("strace") is None:
        pytest.skip("needs strace (Debian's strace package) on PATH")
    files = [tmp_path / f"f{i}" for i in range(3)]
    for f in files:
        f.write_bytes(b"x" * 1000)
    script = (
        "import json, sys; from lakelog.engine.storage.parallel_sync import sync_paths; "
        "print(json.dumps(sync_paths(sys.argv[1:4], [sys.argv[4]])))"
    )
    done = subprocess.run(
        ["strace", "-f", "-e", "trace=fsync", "-o", str(tmp_path / "trace"), sys.executable, "-c", script]
        + [str(f) for f in files]
        + [str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [0, 0, 0, 0]
    # A sync that overlaps another is traced in two lines ("<unfinished ...>", then "resumed").
    syncs = [line for line in (tmp_path / "trace").read_text().splitlines() if "fsync(" in line]
    assert len(syncs) == 4
    assert len({line.split()[0] for line in syncs}) == 4  # four threads: the caller's and three started


def test_paths_that_cannot_be_synced_get_their_errno_and_sync_all_names_the_first(tmp_path):
    good = tmp_path / "good"
    good.write_bytes(b"x")
    assert sync_paths([str(good), str(tmp_path / "missing")], [str(tmp_path), str(good)]) == [
        0,
        errno.ENOENT,
        0,
        errno.ENOTDIR,
    ]
    assert sync_paths([], []) == []
    with pytest.raises(FileNotFoundError, match="missing"):
        sync_all([str(good), str(tmp_path / "missing")], [str(tmp_path)])
    sync_all([str(good)], [str(tmp_path)])  # all there: nothing raised
