"""Checkpoints of the log table: made from the previous checkpoint and the commits since when
those only add files and set transactions (:mod:`engine.commit.checkpoint_extension`), else
written by delta-rs; either way checked against the commits lakelog decodes, on one background
thread per process so that a commit is acknowledged before its checkpoint is written (delta-rs'
own PostCommitHook runs inline).

Only the newest version asked for is written. A checkpoint of version V is "the complete
replay of all actions, up to and including the checkpointed table version" (Delta protocol,
"Checkpoints"), so once V is asked for, an older version still waiting is worth nothing: a
reader starts from the newest checkpoint ``_last_checkpoint`` names and replays the commits
after it. Writing every requested version in order fell behind for good once one checkpoint
took longer than ``delta.checkpointInterval`` commits (measured: after 20,000 one-record
commits the newest checkpoint was 2,350 versions old, and every cold open replayed them).

Checkpoints are paced: after one that took ``t`` seconds, the next of the same table starts
no sooner than ``t * (1 - SHARE) / SHARE`` seconds later (:func:`pause_after`), so writing
checkpoints takes at most :data:`SHARE` of the time of the process that commits, whatever the
size of the table, while a checkpoint is never more than about ``t / SHARE`` seconds behind.

The pace is the table's, not each process's: every process committing to a table asks for the
checkpoints of the versions it lands, so before writing one a process looks at the table's
newest checkpoint (``_last_checkpoint``). One at or past the version asked for covers it (it is
dropped); one written by any process less than a pause ago (the pause this process's own last
checkpoint of the table calls for) defers it to the pause's end. Paced per process alone, N
processes committing to one table could each spend the share on checkpoints of the same table,
and write checkpoints another process's newer one already covers. (Measured when the share was
a half and delta-rs wrote every checkpoint, with four processes appending 100-record batches to
one partition, ``perf commit --sections contention``: checkpoints are a tenth of their busy time;
10 -> 8 checkpoints in 800 versions, the records a second unchanged within the runs' spread. A
twentieth of the share gave 11 % more records a second, but left a single committing process's
newest checkpoint ten times as far behind.)

The checkpoint a process made last is kept (per table, a few tables), so the next one is made
from it without reading that file again, unless the file changed since (:func:`_previous`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa

from lakelog.engine.commit.checkpoint_extension import extend
from lakelog.engine.commit.checkpoint_state import STATE_COLUMNS, write_state_snapshot
from lakelog.engine.commit.follower import checkpoint_basis
from lakelog.engine.commit.log_files import HINT, LogFiles, checkpoint_name, contents_of
from lakelog.engine.errors import CorruptLogError

log = logging.getLogger(__name__)

# The largest share of the committing process's time spent writing checkpoints. A tenth: since
# checkpoints are made from the previous one (checkpoint_extension), one of a few thousand files
# takes a few tens of ms, so a tenth still keeps the newest under a second behind, while a half
# made them come every delta.checkpointInterval versions under load, each re-reading and
# re-writing the whole table's file list. Measured under Kafka's ProducerPerformance (warm,
# alternating with the version before both changes): faster in six pairs of six, median +12%
# a pair; the checkpoints' share of the agent's CPU ~13% -> ~4%.
SHARE = 0.1
# How long a process exiting waits for the checkpoint being written (seconds).
CLOSE_TIMEOUT_S = 120.0


def pause_after(took_s: float, share: float = SHARE) -> float:
    """How long after a checkpoint that took ``took_s`` seconds the next one of the same
    table may start, so that checkpoints take at most ``share`` of the time."""
    return max(0.0, took_s) * (1.0 - share) / share


# How much lower than its process's CPU priority the checkpoint thread runs (a nice increment).
NICE_INCREMENT = 10


def background_priority() -> None:
    """Lower the calling thread's CPU priority by :data:`NICE_INCREMENT` (Linux, where the
    nice value is per thread; elsewhere nothing). A checkpoint only saves readers work later,
    so on a busy machine it yields the CPU to commits, whose turns other processes wait for
    (engine.storage.turns); its pacing (:func:`pause_after`) measures its wall time, so a
    slowed checkpoint also comes less often. Never raises."""
    if sys.platform != "linux":
        return  # macOS's setpriority(PRIO_PROCESS) would take a thread id for a process id
    with contextlib.suppress(OSError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE_INCREMENT))


def write_checkpoint(uri: str, version: int) -> None:
    """A checkpoint of ``version`` (classic single-file Parquet): made from the previous one and
    the commits since where they allow it (:func:`_write_extended`), else written by delta-rs.

    Raises CorruptLogError, leaving no checkpoint, when a commit since the newest checkpoint
    is damaged or missing, or the checkpoint delta-rs wrote disagrees with the commits as
    lakelog decodes them (files, txn versions): delta-rs reads an empty commit file as a
    commit without actions, and a checkpoint built over one would drop that commit's files
    and markers for every reader, for good (the damage must stay visible until repaired).
    """
    files = LogFiles(uri)
    if _write_extended(files, version):
        return
    # delta-rs' snapshot, checked against the commits lakelog decodes itself (CorruptLogError
    # for a damaged one, a load again for one that changed while read) ...
    basis = checkpoint_basis(uri, version)
    basis.table.create_checkpoint()
    # ... and the checkpoint delta-rs then wrote (it reads the log again), checked against it.
    checkpoint, problem = _read_back(files, version, set(basis.paths), basis.txns)
    if checkpoint is None:
        if files.last_checkpoint() == version:
            files.remove(HINT)
        raise CorruptLogError(f"the checkpoint of version {version} just written {problem}; removed")
    _snapshot(files, version, checkpoint)


def _read_back(
    files: LogFiles, version: int, paths: set[str], txns: Mapping[str, int], *, every_txn: bool = False
) -> tuple[pa.Table | None, str | None]:
    """The checkpoint of ``version`` just written, read with :data:`STATE_COLUMNS` (what the
    check and the state snapshot need), when it holds exactly ``paths`` and ``txns`` at their
    versions (as the commits lakelog decodes give them; with ``every_txn`` no other txn either);
    else it is removed (before a reader trusts it over the commits) and None and what was wrong
    is returned."""
    try:
        checkpoint = files.read_checkpoint(version, STATE_COLUMNS)
    except (OSError, ValueError, pa.ArrowException) as exc:
        checkpoint, problem = None, f"cannot be read: {exc}"
    else:
        found_paths, found_txns = contents_of(checkpoint)
        wrong = sorted(paths ^ found_paths) + sorted(i for i, v in txns.items() if found_txns.get(i) != v)
        if every_txn:
            wrong += sorted(set(found_txns) - set(txns))
        if not wrong:
            return checkpoint, None
        # Built from a commit damaged while it was read, or made wrong.
        problem = f"disagreed with the log ({len(wrong)} file(s) or txn(s), e.g. {wrong[0]})"
    files.remove(checkpoint_name(version))
    return None, problem


def _snapshot(files: LogFiles, version: int, checkpoint: pa.Table) -> None:
    # The checkpoint's rows as a cold open maps them, instead of decoding the checkpoint's (a
    # state snapshot only saves readers work: one that cannot be written is left to the next).
    try:
        write_state_snapshot(files, version, checkpoint)
    except (OSError, ValueError, pa.ArrowException) as exc:
        log.warning("state snapshot of %s at version %s not written: %s", files.uri, version, exc)


@dataclass(frozen=True)
class _Made:
    """A checkpoint this process made (:func:`_write_extended`), kept for making the next one
    without reading it again: the table written, the files and txn versions it holds, and the
    file's identity, so one replaced since (by another process, or a table made anew at the
    same path) is read instead."""

    version: int
    file: tuple[int, int, int]  # inode, size, mtime in ns
    table: pa.Table
    paths: frozenset[str]
    txns: Mapping[str, int]


_made: dict[str, _Made] = {}  # log directory -> the newest checkpoint of it this process made
_made_lock = threading.Lock()
# Tables whose made checkpoint is kept, the most recently made (a process committing to many
# stores in turn reads the others' again rather than keeping them all).
_MAX_KEPT = 8
# Chunks a kept table may gather (one per checkpoint made from it) before they are combined.
_MAX_CHUNKS = 16


def _file_identity(files: LogFiles, version: int) -> tuple[int, int, int] | None:
    try:
        found = os.stat(os.path.join(files.log_dir, checkpoint_name(version)))
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def _previous(files: LogFiles, version: int) -> tuple[pa.Table, set[str], dict[str, int]] | None:
    """The checkpoint of ``version`` (every column) with its files and txn versions: the one
    this process made when the file is still that one, else read; None when it cannot be read."""
    with _made_lock:
        made = _made.get(files.log_dir)
    if made is not None and made.version == version and made.file == _file_identity(files, version):
        return made.table, set(made.paths), dict(made.txns)
    try:
        previous = files.read_checkpoint(version, None)
    except (OSError, ValueError, pa.ArrowException):
        return None  # delta-rs' load names what is wrong with it
    paths, txns = contents_of(previous)
    return previous, paths, txns


def _write_extended(files: LogFiles, version: int) -> bool:
    """Write the checkpoint of ``version`` from the table's newest checkpoint and the commits
    after it (:func:`engine.commit.checkpoint_extension.extend`) on a local store; False when it
    was not written that way (delta-rs then writes it). Checked as delta-rs' are
    (:func:`_read_back`): the file read back must hold exactly the previous checkpoint's files
    and txn versions as the commits since (decoded by lakelog) change them, else it is removed
    again. Raises CorruptLogError for a damaged commit among them (as delta-rs' way does)."""
    if not files.local:
        return False
    previous_version = files.last_checkpoint()
    if previous_version is None or previous_version >= version:
        return False
    found = _previous(files, previous_version)
    if found is None:
        return False
    previous, paths, txns = found
    commits = []
    for at in range(previous_version + 1, version + 1):
        commit = files.read_commit(at)
        if commit is None:
            return False  # removed since, or missing: delta-rs' load names it
        commits.append(commit)
    try:
        table = extend(previous, commits)
    except (ValueError, TypeError, OverflowError, pa.ArrowException) as exc:
        # A value it does not read (a malformed statistic): delta-rs' way, rather than none.
        log.warning("the checkpoint of version %s is left to delta-rs: %s", version, exc)
        return False
    if table is None:
        return False
    for commit in commits:
        paths |= {unquote(add.path) for add in commit.adds}
        txns.update(commit.txns)
    size_in_bytes = files.write_checkpoint(version, table)
    written, problem = _read_back(files, version, paths, txns, every_txn=True)
    if written is None:
        log.warning("the checkpoint of version %s made from the previous one %s; removed", version, problem)
        return False
    identity = _file_identity(files, version)
    files.write_checkpoint_hint(version, table.num_rows, size_in_bytes, table.num_rows - table.column("add").null_count)
    if identity is not None:
        kept = table.combine_chunks() if table.column(0).num_chunks > _MAX_CHUNKS else table
        with _made_lock:
            _made.pop(files.log_dir, None)
            _made[files.log_dir] = _Made(version, identity, kept, frozenset(paths), txns)
            while len(_made) > _MAX_KEPT:
                del _made[next(iter(_made))]
    _snapshot(files, version, written)
    return True


def newest_checkpoint(uri: str) -> tuple[int, float] | None:
    """The table's newest checkpoint version and when it was written (seconds since the epoch),
    from ``_last_checkpoint``; None when there is none or it cannot be read."""
    return LogFiles(uri).last_checkpoint_written()


class Checkpointer:
    """Writes the checkpoints a process asks for on one background thread: per table, the
    newest version asked for, paced by :func:`pause_after` across every process writing the
    table's checkpoints (see the module docstring). Thread-safe; a forked child starts its own
    thread. ``write`` defaults to :func:`write_checkpoint`, ``newest`` (the table's newest
    checkpoint and when it was written, wall seconds as ``wall`` tells them) to
    :func:`newest_checkpoint`."""

    def __init__(
        self,
        write: Callable[[str, int], None] | None = None,
        *,
        share: float = SHARE,
        clock: Callable[[], float] = time.monotonic,
        newest: Callable[[str], tuple[int, float] | None] = newest_checkpoint,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._write = write
        self._share = share
        self._clock = clock
        self._newest = newest
        self._wall = wall
        self._took: dict[str, float] = {}  # table -> how long this process's last checkpoint of it took
        self._cond = threading.Condition()
        self._wanted: dict[str, int] = {}  # table -> the newest version asked for, not yet started
        self._not_before: dict[str, float] = {}  # table -> when its next checkpoint may start
        self._running: tuple[str, int] | None = None
        self._flushing = 0  # wait() callers: pacing is off while one waits
        self._thread: threading.Thread | None = None
        self._pid = -1
        self._closed = False

    def request(self, uri: str, version: int) -> None:
        """Ask for a checkpoint of ``version`` of the table at ``uri``; one asked for earlier
        and not started yet is dropped if older (the newer covers it). Never raises."""
        with self._cond:
            if self._closed:
                return  # exiting: the next commit's process writes the checkpoint
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                # A forked child (Spark's Python workers fork) has no copy of the thread.
                self._wanted, self._not_before, self._running = {}, {}, None
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="lakelog-checkpoint", daemon=True)
                self._thread.start()
            if version > self._wanted.get(uri, -1):
                self._wanted[uri] = version
            self._cond.notify_all()

    def pending(self) -> dict[str, int]:
        """The version waiting to be written per table (not the one being written)."""
        with self._cond:
            return dict(self._wanted)

    def _take(self) -> tuple[str, int] | None:
        """Under the lock: the next checkpoint due (marked running), or None and how long to
        wait for one in ``self._wait_s``."""
        now = self._clock()
        soonest = None
        for uri in self._wanted:
            at = 0.0 if self._flushing else self._not_before.get(uri, 0.0)
            if at <= now:
                self._running = (uri, self._wanted.pop(uri))
                return self._running
            soonest = at if soonest is None else min(soonest, at)
        self._wait_s = None if soonest is None else soonest - now
        return None

    def _run(self) -> None:
        background_priority()
        while True:
            with self._cond:
                while (job := self._take()) is None:
                    if self._closed:
                        return
                    self._cond.wait(self._wait_s)
            uri, version = job
            if self._covered_or_early(uri, version):
                continue
            started = self._clock()
            try:
                (self._write or write_checkpoint)(uri, version)
            except Exception as exc:  # a later checkpoint covers it; readers replay a longer tail meanwhile
                log.warning("checkpoint of %s at version %s failed: %s", uri, version, exc)
            finally:
                finished = self._clock()
                with self._cond:
                    self._running = None
                    self._took[uri] = finished - started
                    self._not_before[uri] = finished + pause_after(finished - started, self._share)
                    self._cond.notify_all()

    def _covered_or_early(self, uri: str, version: int) -> bool:
        """Whether the table's newest checkpoint (any process's) covers ``version`` -- it is
        dropped -- or was written less than a pause ago -- it waits again until the pause ends,
        unless a newer version was asked for meanwhile. Never raises: a table whose newest
        checkpoint cannot be read is checkpointed as asked."""
        try:
            newest = self._newest(uri)
        except Exception as exc:
            log.debug("newest checkpoint of %s unreadable: %s", uri, exc)
            newest = None
        with self._cond:
            if newest is None:
                return False
            at, written = newest
            if at < version:
                took = self._took.get(uri)
                if took is None or self._flushing:
                    return False  # nothing to pace by yet, or a caller waits for it
                pause = pause_after(took, self._share)
                # At most one pause: a store clock ahead of this one never holds it longer.
                wait = min(pause, written + pause - self._wall())
                if wait <= 0:
                    return False
                if version > self._wanted.get(uri, -1):
                    self._wanted[uri] = version
                self._not_before[uri] = max(self._not_before.get(uri, 0.0), self._clock() + wait)
            self._running = None
            self._cond.notify_all()
            return True

    def wait(self, timeout: float = 30.0) -> bool:
        """Until every checkpoint asked for was written, unpaced (tests, benchmarks), for at most
        ``timeout`` seconds; whether they were."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while (self._wanted or self._running) and self._pid == os.getpid():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
                return True
            finally:
                self._flushing -= 1

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Take no more requests, drop those not started, and wait (at most ``timeout``
        seconds) for the delta-rs call writing the one started; whether it finished.

        Registered to run at interpreter exit: a daemon thread still inside delta-rs or
        Arrow when the interpreter finalizes is ended with ``pthread_exit`` when it returns
        to Python, which may abort the process ("terminate called without an active
        exception", exit -6). When the bound is hit a warning names the checkpoint and the
        process exits anyway; the log is intact either way: delta-rs puts the checkpoint and
        then ``_last_checkpoint`` each whole, and a reader that finds neither replays the commits.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            self._closed = True
            self._wanted.clear()
            self._cond.notify_all()
            while self._running is not None and self._pid == os.getpid():
                left = deadline - time.monotonic()
                if left <= 0:
                    uri, version = self._running
                    log.warning(
                        "exiting while the checkpoint of %s at version %s is still being written (waited %.0f s); "
                        "the log is intact, the checkpoint may be missing",
                        uri,
                        version,
                        timeout,
                    )
                    return False
                self._cond.wait(left)
            return True


_checkpoints = Checkpointer()
atexit.register(_checkpoints.close)


def request_checkpoint(uri: str, version: int) -> None:
    """Have this process's checkpoint thread write a checkpoint of ``version`` (or a newer one
    asked for before it starts); never raises (a failed checkpoint is logged)."""
    _checkpoints.request(uri, version)


def wait_for_checkpoints(timeout: float = 30.0) -> bool:
    """Until every checkpoint this process asked for was written (at most ``timeout`` seconds);
    whether they were."""
    return _checkpoints.wait(timeout)
