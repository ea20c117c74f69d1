"""The ``_delta_log`` directory of one table: the only place commit and checksum files are
read and written.

The storage seam of the commit core (delta-rs' ``LogStore::write_commit_entry``
plays this part there): reading one commit file, creating one with
put-if-absent (:func:`engine.storage.object_store.put_if_absent`: ``link(2)`` of a
complete file not yet named locally, ``If-None-Match: *`` on S3), the per-version
``.crc`` checksum, checkpoints lakelog makes itself and the ``_last_checkpoint``
hint. Local paths are read
with plain file calls (a probe for the next commit costs one failed
``open``); S3 through fsspec/s3fs.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from lakelog.engine.commit.actions import Commit, CorruptCommitError, decode_commit
from lakelog.engine.errors import CorruptLogError
from lakelog.engine.storage.object_store import filesystem, is_s3, put_if_absent, replace_local_file

log = logging.getLogger(__name__)


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checksum_name(version: int) -> str:
    return f"{version:020d}.crc"


def checksum_file(checksum: Mapping[str, Any]) -> bytes:
    """A ``.crc`` file's content: the checksum as one line of JSON (what
    :meth:`LogFiles.read_checksum` reads back). Raises TypeError/ValueError for a value JSON
    cannot hold."""
    return (json.dumps(checksum, separators=(",", ":")) + "\n").encode()


def checkpoint_name(version: int) -> str:
    """The name of a classic single-file checkpoint (the kind delta-rs writes here)."""
    return f"{version:020d}.checkpoint.parquet"


HINT = "_last_checkpoint"
# Commit files, checksums and every checkpoint layout of the Delta protocol (classic, multi-part
# <v>.checkpoint.<part>.<parts>.parquet, V2 <v>.checkpoint.<uuid>.json|parquet).
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKSUM = re.compile(r"^(\d{20})\.crc$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]+)?\.(parquet|json)$")


@dataclass(frozen=True)
class LogListing:
    """What one listing of ``_delta_log`` found: versions of commit files, checkpoints and
    checksums (with each checksum's size)."""

    commits: frozenset[int] = frozenset()
    checkpoints: frozenset[int] = frozenset()
    checksums: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: Iterable[tuple[str, int]]) -> LogListing:
        """From (file name, size) pairs; names that are not the log's are ignored."""
        commits, checkpoints, checksums = set(), set(), {}
        for name, size in entries:
            if found := _COMMIT.match(name):
                commits.add(int(found.group(1)))
            elif found := _CHECKSUM.match(name):
                checksums[int(found.group(1))] = size
            elif found := _CHECKPOINT.match(name):
                checkpoints.add(int(found.group(1)))
        return cls(frozenset(commits), frozenset(checkpoints), checksums)


@dataclass(frozen=True)
class LogProblem:
    """A fault of the log a listing shows: ``kind`` (missing_commit, missing_checkpoint,
    orphan_checksum, corrupt_checksum), the file ``name`` in ``_delta_log`` it concerns."""

    kind: str
    name: str
    detail: str


def listing_problems(listing: LogListing, hint_version: int | None) -> list[LogProblem]:
    """The faults of the log in ``listing`` (pure); ``hint_version`` is the version
    ``_last_checkpoint`` names, if it is readable.

    * ``missing_commit``: a version between the newest checkpoint (or version 0 when
      there is none) and the newest commit has no commit file: no reader can replay past
      it. Log cleanup only removes commits a checkpoint covers, and put-if-absent only
      creates version V+1 after V exists, so in a complete listing this never happens.
    * ``missing_checkpoint``: ``_last_checkpoint`` names a checkpoint that is not there.
    * ``orphan_checksum``: a ``.crc`` for a version past the newest commit (a checksum is
      written after its commit, so its commit was lost); delta-kernel refuses such a log.
    * ``corrupt_checksum``: an empty ``.crc``.
    """
    problems = []
    newest = max(listing.commits, default=-1)
    covered = [v for v in listing.checkpoints if v <= newest]
    first = max(covered) + 1 if covered else 0
    missing = [v for v in range(first, newest + 1) if v not in listing.commits]
    for version in missing:
        problems.append(
            LogProblem(
                "missing_commit",
                commit_name(version),
                f"{commit_name(version)} is missing: commits after it cannot be replayed"
                + ("" if covered else " (no checkpoint covers it)"),
            )
        )
    if hint_version is not None and hint_version not in listing.checkpoints:
        problems.append(
            LogProblem(
                "missing_checkpoint",
                checkpoint_name(hint_version),
                f"{HINT} names the checkpoint of version {hint_version}, which is missing",
            )
        )
    for version, size in sorted(listing.checksums.items()):
        if version > newest:
            problems.append(
                LogProblem(
                    "orphan_checksum",
                    checksum_name(version),
                    f"{checksum_name(version)} is a checksum of version {version}, which has no commit file",
                )
            )
        elif size == 0:
            name = checksum_name(version)
            problems.append(LogProblem("corrupt_checksum", name, f"{name} is empty"))
    return problems


def _present(column: pa.ChunkedArray) -> list[Any]:
    """The non-null values of a checkpoint's action column (each row holds one action)."""
    import pyarrow.compute as pc

    return pc.filter(column, pc.is_valid(column)).to_pylist()


def metadata_and_protocol_of(checkpoint: pa.Table) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The ``metaData`` and ``protocol`` actions of a checkpoint's ``metaData`` and ``protocol``
    columns, as JSON bodies (None for one it lacks)."""
    metadata = next(iter(_present(checkpoint.column("metaData"))), None)
    protocol = next(iter(_present(checkpoint.column("protocol"))), None)
    if metadata is not None:
        # Parquet maps come back as (key, value) pairs; the JSON action holds objects.
        metadata = {**metadata, "configuration": dict(metadata.get("configuration") or ())}
        if metadata.get("format"):
            metadata["format"] = {**metadata["format"], "options": dict(metadata["format"].get("options") or ())}
        metadata = {k: v for k, v in metadata.items() if v is not None}
    if protocol is not None:
        protocol = {k: v for k, v in protocol.items() if v is not None}
    return metadata, protocol


def contents_of(checkpoint: pa.Table) -> tuple[set[str], dict[str, int]]:
    """The live file paths (decoded) and txn versions of a checkpoint read with at least its
    ``add.path`` and ``txn`` columns."""
    adds = checkpoint.column("add")
    # flatten() keeps an add's null (a row holding another action) in its path.
    path_column = adds.flatten()[[f.name for f in adds.type].index("path")]
    return {unquote(p) for p in path_column.to_pylist() if p is not None}, txns_of(checkpoint)


def txns_of(checkpoint: pa.Table) -> dict[str, int]:
    """The application transaction versions of a checkpoint's ``txn`` column."""
    return {app_id: version for app_id, (version, _) in txn_entries(checkpoint).items()}


def txn_entries(checkpoint: pa.Table) -> dict[str, tuple[int, int | None]]:
    """Each application transaction of a checkpoint's ``txn`` column: its version and
    ``lastUpdated`` (ms, None when not written)."""
    return {t["appId"]: (int(t["version"]), t.get("lastUpdated")) for t in _present(checkpoint.column("txn"))}


def _field_paths(fields: Iterable[pa.Field], prefix: str = "") -> Iterator[str]:
    """The dotted paths of ``fields`` and of their struct fields at any depth (``add``,
    ``add.stats_parsed``, ``add.stats_parsed.numRecords``): what Parquet reads take as columns."""
    for f in fields:
        yield f"{prefix}{f.name}"
        if pa.types.is_struct(f.type):
            yield from _field_paths(f.type, f"{prefix}{f.name}.")


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

    @property
    def local(self) -> bool:
        """Whether the table is on a local file system (not S3 or another fsspec store)."""
        return self._local

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
        complete, synced file not named before; an S3 PUT is atomic), so there is
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
            data = self._read(HINT)
            return None if data is None else int(json.loads(data)["version"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def last_checkpoint_written(self) -> tuple[int, float] | None:
        """The version ``_last_checkpoint`` names and when that file was written (seconds since
        the epoch, the store's clock), or None (no checkpoint yet, or unreadable)."""
        version = self.last_checkpoint()
        if version is None:
            return None
        try:
            if self._local:
                return version, os.stat(os.path.join(self.log_dir, HINT)).st_mtime
            assert self._fs is not None
            return version, self._fs.modified(f"{self._root}/{HINT}").timestamp()
        except (OSError, ValueError, NotImplementedError):
            return None

    def checkpoint_hint(self) -> dict[str, Any] | None:
        """``_last_checkpoint`` as written (``version``, ``size``, ``parts``, ...; Delta protocol,
        "Last Checkpoint File"), or None when absent or unreadable."""
        try:
            data = self._read(HINT)
            hint = None if data is None else json.loads(data)
        except (OSError, ValueError):
            return None
        return hint if isinstance(hint, dict) and isinstance(hint.get("version"), int) else None

    def read_checkpoint(self, version: int, columns: list[str] | None) -> pa.Table:
        """``columns`` (top-level actions, or their fields at any depth such as ``add.path``
        and ``add.stats_parsed.numRecords``; None: all) of the classic single-file checkpoint of
        ``version``; those it lacks are left out (``stats_parsed`` is optional). Raises OSError
        (FileNotFoundError when there is none), pyarrow.ArrowException or ValueError when it
        cannot be read."""
        # ParquetFile, not pq.read_table (its pyarrow.dataset imports pandas).
        import pyarrow.parquet as pq

        def read(source: Any, *, mapped: bool = False) -> pa.Table:
            with pq.ParquetFile(source, memory_map=mapped) as parquet:
                present = set(_field_paths(parquet.schema_arrow))
                # One thread: in a fresh process Arrow's pool is not started yet, and starting
                # it cost more than it saved on a checkpoint of 20,000 files (~16 ms against ~10).
                wanted = None if columns is None else [c for c in columns if c in present]
                return parquet.read(columns=wanted, use_threads=False)

        name = checkpoint_name(version)
        if self._local:
            # Mapped: an uncompressed column is decoded straight from the page cache, not copied
            # into fresh buffers first (~1.3 of ~7.5 ms in a new process at 20,000 files). A
            # checkpoint is written whole under a temporary name and renamed (delta-rs, which
            # writes lakelog's: `<name>#1`, then rename(2), seen with strace; Delta Spark's
            # atomic CheckpointFileManager), never truncated in place, so the mapping cannot
            # lose its pages; the columns read are copies, so none keeps the file mapped.
            return read(os.path.join(self.log_dir, name), mapped=True)
        assert self._fs is not None
        with self._fs.open(f"{self._root}/{name}", "rb") as handle:
            return read(handle)

    def checkpoint_actions(self, version: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The ``metaData`` and ``protocol`` actions the classic checkpoint of ``version`` holds,
        as JSON bodies; (None, None) when there is no such checkpoint or it cannot be read."""
        try:
            table = self.read_checkpoint(version, ["metaData", "protocol"])
        except (OSError, ValueError, pa.ArrowException) as exc:  # absent, or not a checkpoint of this layout
            log.debug("checkpoint %s unreadable: %s", checkpoint_name(version), exc)
            return None, None
        return metadata_and_protocol_of(table)

    def checkpoint_contents(self, version: int) -> tuple[set[str], dict[str, int]]:
        """The live file paths (decoded) and txn versions the classic checkpoint of ``version``
        holds. Raises OSError when it cannot be read."""
        # Only the add actions' paths: their statistics (a JSON string per file) are most of a
        # checkpoint's bytes.
        return contents_of(self.read_checkpoint(version, ["add.path", "txn"]))

    def app_ids(self, version: int, prefix: str) -> set[str]:
        """The Delta application transaction ids starting with ``prefix`` that version
        ``version`` holds: those of the newest classic checkpoint at or below it and those the
        commits after it set. A snapshot looks an id up but cannot list them (neither delta-rs
        nor Delta's DeltaLog has a listing), so listing reads the log. An id whose retention
        expired may still be listed: its version (-1 then) says. Raises OSError,
        CorruptLogError for a damaged commit."""
        listing = self.listing()
        base = max((v for v in listing.checkpoints if v <= version), default=-1)
        found: set[str] = set()
        if base >= 0:
            try:
                found |= {a for a in self.checkpoint_contents(base)[1] if a.startswith(prefix)}
            except (OSError, ValueError):
                base = -1  # not a classic checkpoint (or gone): replay every commit kept
        first = base + 1 if base >= 0 else min(listing.commits, default=0)
        for v in range(first, version + 1):
            commit = self.read_commit(v)
            if commit is not None:
                found |= {a for a in commit.txns if a.startswith(prefix)}
        return found

    def listing(self) -> LogListing:
        """One listing of ``_delta_log`` (a LIST on S3). Raises OSError."""
        if self._local:
            try:
                with os.scandir(self.log_dir) as entries:
                    found = [(e.name, e.stat().st_size) for e in entries if e.is_file()]
            except FileNotFoundError:
                found = []
            return LogListing.of(found)
        assert self._fs is not None
        try:
            listed = self._fs.ls(self._root, detail=True, refresh=True)
        except FileNotFoundError:
            listed = []
        return LogListing.of(
            (str(e["name"]).rsplit("/", 1)[-1], int(e.get("size") or 0)) for e in listed if e.get("type") != "directory"
        )

    def problems(self) -> list[LogProblem]:
        """The faults a listing of the log shows now (:func:`listing_problems`). Raises OSError."""
        return listing_problems(self.listing(), self.last_checkpoint())

    def remove(self, name: str) -> bool:
        """Delete the file ``name`` of ``_delta_log`` (a repair: only files that can be derived
        again or are only hints); False if it was not there. Raises OSError."""
        if name.endswith(".json") and _COMMIT.match(name):
            raise ValueError(f"a commit file is never removed by a repair: {name}")
        try:
            if self._local:
                os.unlink(os.path.join(self.log_dir, name))
            else:
                assert self._fs is not None
                self._fs.rm(f"{self._root}/{name}")
        except FileNotFoundError:
            return False
        return True

    # -- writing ---------------------------------------------------------------

    def put_commit(
        self,
        version: int,
        data: bytes,
        with_files: Sequence[str] = (),
        linked: Callable[[], None] | None = None,
        while_syncing: Callable[[], None] | None = None,
    ) -> bool:
        """Create commit ``version`` holding ``data`` unless it exists; False if it does.

        When it returns True the commit is durable: locally the file was synced
        before it was linked into place and ``_delta_log/`` after (a power loss
        cannot take the version back and hand it out again); on S3 the PUT was
        acknowledged. Raises OSError when nothing was created (no temporary file
        is left), CommitStateUnknownError when the file may have been created
        (S3: the response was lost and the object is not there yet),
        CommitNotDurableError when it was created but could not be synced.
        ``with_files``: local data files the commit adds that were written unsynced; they
        are synced (with their directories) together with the commit file, before it appears.
        ``linked``: called locally once the file appeared, before ``_delta_log/`` is synced.
        ``while_syncing``: called once, while the disk syncs the file (see :func:`put_if_absent`).
        """
        return put_if_absent(
            self.log_dir, commit_name(version), data, with_files=with_files, linked=linked, while_syncing=while_syncing
        )

    def write_checkpoint(self, version: int, table: pa.Table) -> int:
        """Write ``table`` as the classic single-file checkpoint of ``version`` (a local store),
        replacing one there: under a temporary name, then renamed, so a reader maps the old file
        or the new one whole (:meth:`read_checkpoint` relies on it), as delta-rs and Delta Spark
        write theirs. Not synced: a checkpoint is derived from the commits, and a reader that
        cannot use it replays them. Returns its size in bytes. Raises OSError (no temporary file
        is left), ValueError when the store is not local."""
        import pyarrow.parquet as pq

        if not self._local:
            raise ValueError(f"{self.uri}: lakelog writes checkpoints itself only on a local store")
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        body = sink.getvalue()
        replace_local_file(self.log_dir, checkpoint_name(version), memoryview(body))
        return body.size

    def write_checkpoint_hint(self, version: int, size: int, size_in_bytes: int, num_add_files: int) -> bool:
        """Point ``_last_checkpoint`` at the classic checkpoint of ``version`` (``size`` rows,
        ``size_in_bytes``, ``num_add_files`` adds: the fields delta-rs writes; Delta protocol,
        "Last Checkpoint File") unless it already names a newer one (then False: never moved
        back). Written whole, as :meth:`write_checkpoint` writes; a local store. Raises
        OSError, ValueError when the store is not local."""
        if not self._local:
            raise ValueError(f"{self.uri}: lakelog writes {HINT} itself only on a local store")
        newest = self.last_checkpoint()
        if newest is not None and newest >= version:
            return False
        hint = {"version": version, "size": size, "sizeInBytes": size_in_bytes, "numOfAddFiles": num_add_files}
        replace_local_file(self.log_dir, HINT, json.dumps(hint).encode())
        return True

    def write_checksum(self, version: int, data: bytes) -> bool:
        """Create ``version``'s ``.crc`` holding ``data`` (:func:`checksum_file`); never raises
        (a checksum only saves readers work)."""
        try:
            return put_if_absent(self.log_dir, checksum_name(version), data, durable=False)
        except Exception as exc:
            log.warning("could not write %s/%s: %s", self.log_dir, checksum_name(version), exc)
            return False
