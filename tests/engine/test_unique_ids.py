"""Names that must never repeat (data files, temporaries, txnIds) are drawn without a system
call, yet never repeat across processes: not after a fork, not when a program seeds random."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from lakelog.engine.storage.unique_ids import new_uuid


def test_ids_are_random_version_4_uuids_that_do_not_repeat():
    ids = [new_uuid() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)


def test_a_forked_child_draws_other_ids_than_its_parent():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, "".join(new_uuid().hex for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    parent = "".join(new_uuid().hex for _ in range(3))
    assert len(child) == len(parent) == 96 and child != parent


def test_processes_that_seed_random_alike_still_draw_different_ids():
    code = "import random; random.seed(7); from lakelog.engine.storage.unique_ids import new_uuid; print(new_uuid())"
    drawn = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        for _ in range(2)
    }
    assert len(drawn) == 2
