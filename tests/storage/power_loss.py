"""A local file system that loses, at a simulated power loss, what was never synced.

What POSIX promises after a crash, and no more (fsync(2); the model of
ALICE, Pillai et al., OSDI 2014): a name created in a directory (a new file, a
``link``, a ``rename`` target, a subdirectory) survives only if the directory
was fsync'ed after it appeared; a file's contents survive only if the file was
fsync'ed. :class:`PowerLoss` watches ``os.fsync`` (whatever file or directory it
is given, by lakelog, pyarrow's callers or anyone else in the process; lakelog's
syncs of several paths at once, native threads calling fsync(2) themselves, are made
through it too), keeps
each directory's listing as of its last sync, and :meth:`PowerLoss.crash` then
removes every name added since and empties every file never synced. What
existed when the watch began counts as synced.

Linux only (it names a synced descriptor through ``/proc/self/fd``).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from lakelog.engine.storage import object_store


def watch_native_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make lakelog's syncs of several paths at once (:mod:`engine.storage.parallel_sync`,
    whose threads call fsync(2) themselves) through ``os.fsync``, as it is then (a watcher's
    replacement): one path after another, each path's errno as the native call gives it."""

    def sync_paths(files: list[str], directories: list[str], meanwhile: Callable[[], None] | None = None) -> list[int]:
        failed: BaseException | None = None
        if meanwhile is not None:  # in flight together natively; before them here
            try:
                meanwhile()
            except BaseException as exc:  # raised after the syncs, as natively
                failed = exc
        errors = []
        for path, flags in [(f, os.O_RDONLY) for f in files] + [(d, os.O_RDONLY | os.O_DIRECTORY) for d in directories]:
            try:
                fd = os.open(path, flags)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                errors.append(0)
            except OSError as exc:
                errors.append(exc.errno or errno.EIO)
        if failed is not None:
            raise failed
        return errors

    monkeypatch.setattr(object_store, "sync_paths", sync_paths)


class PowerLoss:
    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        if not Path("/proc/self/fd").is_dir():
            pytest.skip("needs /proc/self/fd")
        self.root = Path(root).resolve()
        self.listings: dict[Path, set[str]] = {}  # directory -> its names as of its last fsync
        self.synced_inodes: set[tuple[int, int]] = set()
        self.directory_syncs: list[Path] = []
        for directory, names, files in os.walk(self.root):
            self.listings[Path(directory)] = set(names) | set(files)
            for name in files:
                info = os.lstat(os.path.join(directory, name))
                self.synced_inodes.add((info.st_dev, info.st_ino))
        real = os.fsync

        def fsync(fd: int) -> None:
            real(fd)
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                path = Path(os.readlink(f"/proc/self/fd/{fd}"))
                self.listings[path] = set(os.listdir(path))
                self.directory_syncs.append(path)
            else:
                self.synced_inodes.add((info.st_dev, info.st_ino))

        monkeypatch.setattr(os, "fsync", fsync)

        watch_native_syncs(monkeypatch)

    def crash(self) -> list[str]:
        """Apply the power loss under the root; what was lost (paths relative to the root),
        names first, then emptied files."""
        lost: list[str] = []
        self._drop(self.root, lost)
        for directory, _, files in os.walk(self.root):
            for name in files:
                path = Path(directory, name)
                info = os.lstat(path)
                if (info.st_dev, info.st_ino) not in self.synced_inodes and info.st_size:
                    path.write_bytes(b"")
                    lost.append(f"contents of {path.relative_to(self.root)}")
        return lost

    def _drop(self, directory: Path, lost: list[str]) -> None:
        kept = self.listings.get(directory, set())
        for name in sorted(os.listdir(directory)):
            path = directory / name
            if name not in kept:
                lost.append(str(path.relative_to(self.root)))
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            elif path.is_dir() and not path.is_symlink():
                self._drop(path, lost)
