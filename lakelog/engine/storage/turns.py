"""Commit turns: an advisory lock that lets one local appender of a table at a time go from
its plan to its put.

Put-if-absent alone keeps the log correct, but appenders of one partition in several
processes then race for every version, and each loser has written and synced a data file
numbered from an end offset that moved under it: it deletes the file, waits and writes it
again (measured, 4 processes on one partition: half of all attempts lost, a quarter of the
time spent backing off, and deleting synced files slows the next journal commits). Taking
turns, an appender plans against the newest version while no other lakelog appender of the
table is between its plan and its put, so another lakelog appender never moves its offsets
and it writes each file once. What a turn holds is what the table's commit rate pays for, so
the work that does not depend on the ends is done before it: a producer's files are written
ahead and only renumbered in the turn (engine.commit.committer, DataFileWriter.renumber;
4 processes on one partition: a turn 4.2 -> 3.1 ms).

The lock only orders; nothing depends on it for correctness. A committer that cannot take
its turn in time (a holder stopped by a debugger), or cannot open the lock file (a
read-only store), goes on without it, and put-if-absent and the conflict rules decide as
before; so do foreign writers and S3, which take no turns. ``flock(2)`` locks die with
their process, so a crashed holder never blocks anyone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable

# In ``_delta_log/``: Delta readers and lakelog's listing only take names they know
# (commits, checksums, checkpoints), as they already skip the put's hidden temporary files.
TURN_FILE = ".lakelog-commit-turn"
# How often a waiting committer tries the lock: a turn lasts a few milliseconds. The longer
# it has waited, the more often it tries, so the committer that has waited longest most often
# takes the next turn (flock(2) hands a released lock to no one in particular).
_POLL_S = 0.0005
_POLL_MIN_S = 0.0001
_EAGER_AFTER_S = 0.01


def poll_interval(waited_s: float) -> float:
    """How long a committer that has waited ``waited_s`` seconds sleeps before trying again."""
    return max(_POLL_MIN_S, _POLL_S / (1 + waited_s / _EAGER_AFTER_S))


class Turn:
    """One held (or not taken) turn; :meth:`release` ends it and may be called again."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor of the open file drops its flock


def take_turn(log_dir: str, wait_s: float, waiting: Callable[[], None] | None = None) -> Turn:
    """The turn of the local table whose log directory is ``log_dir``, waiting up to
    ``wait_s`` seconds for the committer holding it. A turn not taken in that time, or
    whose lock file cannot be opened, is returned not held (:attr:`Turn.held` False).
    ``waiting()`` is called between tries (a committer reads the commits landing meanwhile,
    so little is left to read in its turn); it must not raise."""
    fd = _open(os.path.join(log_dir, TURN_FILE))
    if fd is None:
        return Turn(None)
    began = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return Turn(fd)
        except BlockingIOError:
            waited = time.monotonic() - began
            if waited >= wait_s:
                break
            if waiting is not None:
                waiting()
            time.sleep(poll_interval(waited))
        except OSError:
            break
    with contextlib.suppress(OSError):
        os.close(fd)
    return Turn(None)


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except PermissionError:
        pass  # created by another user: flock(2) takes a descriptor opened for reading too
    except OSError:
        return None
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
