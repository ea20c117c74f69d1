"""The ``_delta_log`` directory of one table: the only place commit and checksum files are
read and written.

The storage seam of the commit core (delta-rs' ``LogStore::write_commit_entry``
plays this part there): reading one commit file, creating one with
put-if-absent (:func:`engine.object_store.put_if_absent`: ``link(2)`` of a
complete temporary file locally, ``If-None-Match: *`` on S3), the per-version
``.crc`` checksum, and the ``_last_checkpoint`` hint. Local paths are read
with plain file calls (a probe for the next commit costs one failed
``open``); S3 through fsspec/s3fs.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from lakelog.engine.commit.actions import Commit, CorruptCommitError, decode_commit
from lakelog.engine.errors import CorruptLogError
from lakelog.engine.object_store import filesystem, is_s3, put_if_absent

log = logging.getLogger(__name__)


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checksum_name(version: int) -> str:
    return f"{version:020d}.crc"


class LogFiles:
    """Reads and creates the files of one table's Delta log. Thread-safe."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.log_dir = f"{uri.rstrip('/')}/_delta_log"
        self._local = not is_s3(uri) and "://" not in uri
        self._fs = None
        if not self._local:
            fs, root = filesystem(uri)
            self._fs = fs
            self._root = f"{root}/_delta_log"

    # -- reading ---------------------------------------------------------------

    def _read(self, name: str) -> bytes | None:
        if self._local:
            try:
                with open(os.path.join(self.log_dir, name), "rb") as handle:
                    return handle.read()
            except FileNotFoundError:
                return None
        assert self._fs is not None
        try:
            with self._fs.open(f"{self._root}/{name}", "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def read_commit_bytes(self, version: int) -> bytes | None:
        """The bytes of commit ``version``, or None if there is no such file (not yet written,
        or removed by log cleanup)."""
        return self._read(commit_name(version))

    def read_commit(self, version: int) -> Commit | None:
        """Commit ``version`` decoded, or None if it does not exist.

        Raises CorruptLogError when the file is not a valid commit (truncated
        or overwritten by something other than a Delta writer).

        A truncated newest commit is corruption, not a writer still in flight:
        a commit appears whole or not at all (:func:`put_if_absent` links a
        complete, synced temporary file; an S3 PUT is atomic), so there is
        nothing to wait for. delta-rs ("Json error: Truncated record") and
        Delta Spark (a JSON parse failure) refuse such a log the same way.
        """
        data = self.read_commit_bytes(version)
        if data is None:
            return None
        try:
            return decode_commit(data)
        except CorruptCommitError as exc:
            raise CorruptLogError(f"{self.log_dir}/{commit_name(version)} is corrupt: {exc}") from exc

    def exists(self, version: int) -> bool:
        if self._local:
            return os.path.exists(os.path.join(self.log_dir, commit_name(version)))
        assert self._fs is not None
        return self._fs.exists(f"{self._root}/{commit_name(version)}")

    def modified_ms(self, version: int) -> int | None:
        """When the commit file was written (ms), or None if it is gone."""
        try:
            if self._local:
                return int(os.stat(os.path.join(self.log_dir, commit_name(version))).st_mtime * 1000)
            assert self._fs is not None
            return int(self._fs.modified(f"{self._root}/{commit_name(version)}").timestamp() * 1000)
        except FileNotFoundError:
            return None

    def read_checksum(self, version: int) -> dict[str, Any] | None:
        """The ``.crc`` of ``version``, or None if absent or unreadable."""
        try:
            data = self._read(checksum_name(version))
            return None if data is None else json.loads(data.decode().strip())
        except (OSError, ValueError) as exc:
            log.debug("checksum of version %s unreadable: %s", version, exc)
            return None

    def last_checkpoint(self) -> int | None:
        """The version ``_last_checkpoint`` names, or None (no checkpoint yet, or unreadable)."""
        try:
            data = self._read("_last_checkpoint")
            return None if data is None else int(json.loads(data)["version"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # -- writing ---------------------------------------------------------------

    def put_commit(self, version: int, data: bytes) -> bool:
        """Create commit ``version`` holding ``data`` unless it exists; False if it does.

        When it returns True the commit is durable: locally the file was synced
        before it was linked into place and ``_delta_log/`` after (a power loss
        cannot take the version back and hand it out again); on S3 the PUT was
        acknowledged. Raises OSError when nothing was created (no temporary file
        is left), CommitStateUnknownError when the file may have been created
        (S3: the response was lost and the object is not there yet),
        CommitNotDurableError when it was created but could not be synced.
        """
        return put_if_absent(self.log_dir, commit_name(version), data)

    def write_checksum(self, version: int, checksum: dict[str, Any]) -> bool:
        """Create ``version``'s ``.crc``; never raises (a checksum only saves readers work)."""
        try:
            data = (json.dumps(checksum, separators=(",", ":")) + "\n").encode()
            return put_if_absent(self.log_dir, checksum_name(version), data, durable=False)
        except Exception as exc:
            log.warning("could not write %s/%s: %s", self.log_dir, checksum_name(version), exc)
            return False
