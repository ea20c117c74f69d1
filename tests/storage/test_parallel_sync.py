"""Several local paths fsync'd at once on native threads, outside the interpreter lock
(engine.storage.parallel_sync), as a commit syncs its file, data files and directories: every
path is synced, each on a thread of its own but the first (every one, when the caller has work of its
own for the meantime), and a failure names its path."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from typing import Any

import pytest

from lakelog.engine.storage.object_store import sync_all
from lakelog.engine.storage.parallel_sync import sync_paths


def _under_strace(tmp_path, call: str) -> tuple[Any, list[str]]:
    """Run the Python statements ``call`` (``sync_paths`` imported, three files' paths in
    ``sys.argv[1:4]``, their directory in ``sys.argv[4]``) under strace: the JSON it printed
    and the fsync lines traced (a sync that overlaps another is traced in two lines,
    "<unfinished ...>", then "resumed")."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace (Debian's strace package) on PATH")
    files = [tmp_path / f"f{i}" for i in range(3)]
    for f in files:
        f.write_bytes(b"x" * 1000)
    script = "import json, os, sys, threading; from lakelog.engine.storage.parallel_sync import sync_paths; " + call
    done = subprocess.run(
        ["strace", "-f", "-e", "trace=fsync", "-o", str(tmp_path / "trace"), sys.executable, "-c", script]
        + [str(f) for f in files]
        + [str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), [line for line in (tmp_path / "trace").read_text().splitlines() if "fsync(" in line]


def test_every_path_is_synced_each_on_its_own_thread_but_the_first(tmp_path):
    printed, syncs = _under_strace(tmp_path, "print(json.dumps(sync_paths(sys.argv[1:4], [sys.argv[4]])))")
    assert printed == [0, 0, 0, 0]
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


def test_meanwhile_runs_once_on_the_caller_while_every_path_syncs_on_a_thread_of_its_own(tmp_path):
    (errors, calls, pid), syncs = _under_strace(
        tmp_path,
        "calls = []; "
        "errors = sync_paths(sys.argv[1:4], [sys.argv[4]], lambda: calls.append(threading.get_native_id())); "
        "print(json.dumps([errors, calls, os.getpid()]))",
    )
    assert errors == [0, 0, 0, 0] and calls == [pid]  # once, on the calling (main) thread
    threads = {int(line.split()[0]) for line in syncs}
    assert len(syncs) == 4 and len(threads) == 4 and pid not in threads


def test_what_meanwhile_raises_is_raised_once_the_syncs_finished(tmp_path):
    good = tmp_path / "good"
    good.write_bytes(b"x")
    calls = []

    def failing() -> None:
        calls.append(1)
        raise ValueError("meanwhile failed")

    with pytest.raises(ValueError, match="meanwhile failed"):
        sync_paths([str(good)], [str(tmp_path)], failing)
    with pytest.raises(ValueError, match="meanwhile failed"):
        sync_all([str(good)], [], meanwhile=failing)
    assert sync_paths([], [], lambda: calls.append(2)) == []  # nothing to sync: still called
    sync_all([], [], meanwhile=lambda: calls.append(3))
    assert calls == [1, 1, 2, 3]
