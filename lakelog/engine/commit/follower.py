"""A table's Delta log as one process follows it: the latest :class:`TableState`, kept
current by reading only the commits it has not seen.

The first state comes from delta-rs (the newest checkpoint and the commits
after it, as any Delta reader reconstructs a snapshot). From then on,
:meth:`TableLog.latest` tries to read commit ``V+1`` and applies it,
repeating until the next commit does not exist yet: when nothing changed
that is one failed ``open`` (one GET on S3), whatever the length of the log,
so polls and commits cost the same at 100 or 20,000 versions. A process's
own commits and the winners its commits read are applied without reading
them again (:meth:`TableLog.advance`).

Log cleanup only removes commits older than a checkpoint; a state that fell
that far behind is rebuilt from the newest checkpoint.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.arrow_columns import array, table_from_stream
from lakelog.engine.commit.actions import Commit, Metadata, Protocol
from lakelog.engine.commit.checkpoint_state import state_from_checkpoint, state_from_commits
from lakelog.engine.commit.checksum import checksum_disagreement
from lakelog.engine.commit.delta_table import corrupt_commit, load_delta_table
from lakelog.engine.commit.features import check_readable
from lakelog.engine.commit.file_runs import FileColumns, IntColumn, RowColumn, combined, encoded_topics
from lakelog.engine.commit.log_files import LogFiles, checksum_file, checksum_name, commit_name
from lakelog.engine.commit.markers import Reservation
from lakelog.engine.commit.reservations import expired
from lakelog.engine.commit.state import AppVersions, TableState
from lakelog.engine.errors import CorruptLogError, StoreError
from lakelog.engine.storage.object_store import delta_storage_options, filesystem, is_s3, python_uri

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

# Loads again after delta-rs' files disagreed with the commits lakelog decoded.
_DIVERGED_RETRIES = 2
# Replaying more commits than this in one go is slower than loading the newest checkpoint.
_REPLAY_BEFORE_RELOAD = 500
# How often an idle follower checks that log cleanup did not remove its next commit.
_IDLE_CHECK_S = 60.0
# How often latest() looks for offset reservations whose writer stopped renewing them.
_SWEEP_INTERVAL_S = 1.0


def normalize_uri(path: str) -> str:
    """An absolute local path; ``s3a://`` for any S3 scheme (Spark reaches S3 through
    Hadoop's S3A); other URIs unchanged."""
    parsed = urlparse(str(path))
    if parsed.scheme in ("", "file"):
        local = parsed.path if parsed.scheme == "file" else str(path)
        return os.path.abspath(os.path.expanduser(local))
    if is_s3(str(path)):
        return "s3a://" + str(path).split("://", 1)[1].rstrip("/")
    return str(path)


def is_delta_table(uri: str) -> bool:
    """Whether ``uri`` holds a Delta table: its first commit or a checkpoint hint is there
    (two reads of named files), else as delta-rs decides (it lists ``_delta_log``, whose
    length a long log makes slow: the first commits may be gone after log cleanup)."""
    files = LogFiles(uri)
    if files.exists(0) or files.checkpoint_hint() is not None:
        return True
    from deltalake import DeltaTable  # only here: importing delta-rs is a short-lived client's start

    return DeltaTable.is_deltatable(python_uri(uri), storage_options=delta_storage_options(uri))


def load_state(uri: str, files: LogFiles, version: int | None = None, *, timeout_ms: int | None = None) -> TableState:
    """The table at ``version`` (the latest when None), reconstructed by delta-rs.

    The commit files delta-rs replayed after its checkpoint are decoded again here: delta-rs
    reads an empty commit file as a commit of nothing, which would hide the records it held
    and hand their offsets out again. The version's ``.crc`` is used only when it agrees with
    the snapshot (file count, size, metadata, protocol); one that disagrees is logged and
    ignored, so nothing is derived from it. Raises StoreError when there is no Delta table at
    ``uri`` or its log cannot be read, CorruptLogError naming a commit file that is empty,
    not UTF-8 or not Delta actions (or a log damaged beyond a lost checkpoint),
    LogListingRaceError when listing the log kept racing writers for ``timeout_ms``
    (:func:`engine.commit.delta_table.load_delta_table`).
    """
    snapshot = _Snapshot.load(uri, files, version, timeout_ms)
    table, loaded, metadata, protocol = snapshot.table, snapshot.version, snapshot.metadata, snapshot.protocol
    checksum = files.read_checksum(loaded)
    if checksum is not None:
        disagreement = snapshot.disagreement(checksum)
        if disagreement is not None:
            name = checksum_name(loaded)
            log.warning("%s/%s disagrees with the log (%s): not used", files.log_dir, name, disagreement)
            checksum = None
    if checksum and checksum.get("metadata") and checksum.get("protocol"):
        if not snapshot.from_log:
            # It agrees, and holds the actions exactly as written (delta-rs rebuilds the schema string).
            metadata = Metadata.from_json(checksum["metadata"])
            protocol = Protocol.from_json(checksum["protocol"])
    else:
        checksum = None
    lock = threading.Lock()

    def base_app_version(app_id: str) -> int:
        # Only ids the replayed commits did not set get here (they are in the overlay): their
        # versions come from the checkpoint. delta-rs reads the log again for each lookup, so
        # a commit damaged since the load fails it -- named, never answered from what is left.
        from deltalake.exceptions import DeltaError

        with lock:
            try:
                found = table.transaction_version(app_id)
            except DeltaError as exc:
                raise corrupt_commit(files) or StoreError(
                    f"the Delta log of {uri} cannot be read: {str(exc).splitlines()[0]}"
                ) from exc
        return -1 if found is None else int(found)

    apps = AppVersions(base_app_version, snapshot.replayed_txns)
    return TableState.from_columns(loaded, protocol, metadata, file_columns(snapshot.adds), apps, checksum)


@dataclass(frozen=True)
class CheckpointBasis:
    """What a checkpoint of a version must hold, from a snapshot checked against the commits:
    its live files (decoded paths) and the txn versions set since the checkpoint below it;
    ``table`` is delta-rs' table at that version (to write the checkpoint from)."""

    version: int
    paths: frozenset[str]
    txns: Mapping[str, int]
    table: DeltaTable = field(compare=False, repr=False)


def checkpoint_basis(uri: str, version: int) -> CheckpointBasis:
    """:class:`CheckpointBasis` of ``version``; raises what :func:`load_state` raises."""
    snapshot = _Snapshot.load(uri, LogFiles(uri), version, None)
    paths = frozenset(unquote(p) for p in add_action_column(snapshot.adds, "path"))
    return CheckpointBasis(snapshot.version, paths, snapshot.replayed_txns, snapshot.table)


def checksum_problem(uri: str, version: int, checksum: Mapping[str, Any]) -> str | None:
    """How ``checksum`` (the ``.crc`` of ``version``) disagrees with the log at ``version``
    (:func:`engine.commit.checksum.checksum_disagreement`), or None when it agrees. Raises
    what :func:`load_state` raises."""
    return _Snapshot.load(uri, LogFiles(uri), version, None).disagreement(checksum)


@dataclass(frozen=True)
class _Snapshot:
    """A version as delta-rs loaded it, with protocol and metadata from the log itself."""

    table: DeltaTable
    version: int
    adds: pa.Table
    metadata: Metadata
    protocol: Protocol
    from_log: bool  # protocol and metadata came from commits or a checkpoint, not from delta-rs
    # The commits delta-rs replayed, as lakelog decoded them (None: gone since).
    replayed: Mapping[int, Commit | None]

    @property
    def replayed_txns(self) -> dict[str, int]:
        """The txn versions the replayed commits set (the newest of each)."""
        txns: dict[str, int] = {}
        for v in sorted(self.replayed):
            commit = self.replayed[v]
            if commit is not None:
                txns.update(commit.txns)
        return txns

    @classmethod
    def load(cls, uri: str, files: LogFiles, version: int | None, timeout_ms: int | None) -> _Snapshot:
        for attempt in range(_DIVERGED_RETRIES + 1):
            snapshot = cls._load(uri, files, version, timeout_ms)
            diverged = snapshot.diverged()
            if diverged is None:
                return snapshot
            if attempt < _DIVERGED_RETRIES:
                # A commit changed between delta-rs' read and lakelog's (it was damaged, then
                # mended): what delta-rs built from it cannot be trusted. Read again.
                log.warning(
                    "%s: delta-rs and the log disagree on version %s (%s); reading again", uri, version, diverged
                )
                time.sleep(0.05)
        raise CorruptLogError(f"the Delta log of {uri} reads differently each time: {diverged}")

    def diverged(self) -> str | None:
        """How delta-rs' live files disagree with what the commits it replayed (as lakelog
        decoded them) added and removed, or None."""
        fate: dict[str, bool] = {}
        for v in sorted(self.replayed):
            commit = self.replayed[v]
            if commit is None:
                continue
            fate.update({unquote(a.path): True for a in commit.adds})
            fate.update({unquote(r.path): False for r in commit.removes})
        if not fate:
            return None
        live = _decoded_paths_among(self.adds, set(fate))
        for path, alive in fate.items():
            if alive != (path in live):
                return f"{path} is {'missing from' if alive else 'still in'} its files"
        return None

    @classmethod
    def _load(cls, uri: str, files: LogFiles, version: int | None, timeout_ms: int | None) -> _Snapshot:
        loaded_table = load_delta_table(uri, version, timeout_ms=timeout_ms)
        table = loaded_table.table
        loaded = table.version()
        # delta-rs reads an empty commit file as a commit of nothing: decode what it replayed.
        replayed = {v: files.read_commit(v) for v in range(loaded_table.replayed_from, loaded + 1)}
        if any(commit is None for commit in replayed.values()):
            # Gone since delta-rs read it (log cleanup, below a checkpoint), or never there:
            # the listing tells which.
            gaps = [p for p in files.problems() if p.kind == "missing_commit" and p.name <= commit_name(loaded)]
            if gaps:
                raise CorruptLogError(f"{files.log_dir}/{gaps[0].detail}")
        # delta-kernel takes protocol and metadata from the newest .crc at or below the version
        # when there is one: they come from the log itself here (the commits replayed, else the
        # checkpoint below them), so that a damaged checksum can neither hide topics nor pass.
        metadata, protocol = _logged_metadata_and_protocol(files, replayed, loaded_table.replayed_from)
        from_log = metadata is not None and protocol is not None
        if metadata is None or protocol is None:
            from_delta_rs = _metadata_and_protocol(table)
            metadata, protocol = metadata or from_delta_rs[0], protocol or from_delta_rs[1]
        adds = table_from_stream(table.get_add_actions(flatten=True))
        return cls(table, loaded, adds, metadata, protocol, from_log, replayed)

    def disagreement(self, checksum: Mapping[str, Any]) -> str | None:
        return checksum_disagreement(
            checksum,
            num_files=self.adds.num_rows,
            table_size_bytes=sum(size or 0 for size in add_action_column(self.adds, "size_bytes")),
            metadata=self.metadata.to_json()["metaData"],
            protocol=self.protocol.to_json()["protocol"],
        )


def _logged_metadata_and_protocol(
    files: LogFiles, replayed: Mapping[int, Commit | None], first: int
) -> tuple[Metadata | None, Protocol | None]:
    """The newest ``metaData`` and ``protocol`` actions of the log itself: from the commits
    delta-rs replayed (``replayed``, from version ``first``), else from the checkpoint below
    them; None for what neither holds."""
    metadata = protocol = None
    for version in sorted(replayed, reverse=True):
        commit = replayed[version]
        if commit is not None:
            metadata = metadata or commit.metadata
            protocol = protocol or commit.protocol
    if (metadata is None or protocol is None) and first > 0:
        meta_body, protocol_body = files.checkpoint_actions(first - 1)
        if metadata is None and meta_body is not None:
            metadata = Metadata.from_json(meta_body)
        if protocol is None and protocol_body is not None:
            protocol = Protocol.from_json(protocol_body)
    return metadata, protocol


def _metadata_and_protocol(table: DeltaTable) -> tuple[Metadata, Protocol]:
    meta = table.metadata()
    metadata = Metadata(
        meta.id,
        table.schema().to_json(),
        tuple(meta.partition_columns),
        dict(meta.configuration),
        meta.created_time,
        meta.name,
        meta.description,
    )
    p = table.protocol()
    protocol = Protocol(
        p.min_reader_version,
        p.min_writer_version,
        None if p.reader_features is None else tuple(p.reader_features),
        None if p.writer_features is None else tuple(p.writer_features),
    )
    return metadata, protocol


def file_columns(actions: pa.Table) -> FileColumns:
    """delta-rs' flattened add actions as :class:`FileColumns`: grouped and ordered as NumPy
    arrays, paths, sizes and times read only for the files built."""
    n = actions.num_rows

    def column(name: str) -> pa.ChunkedArray | None:
        return actions.column(name) if name in actions.column_names else None

    def times(name: str) -> RowColumn:
        found = column(name)
        if found is None or not pa.types.is_timestamp(found.type):
            return RowColumn(found)
        # As add_action_column gives them: int milliseconds.
        times, per = _MS_SCALE[found.type.unit]
        return RowColumn(found.cast(pa.int64()), lambda v: v * times // per)

    names, ids = encoded_topics(column("partition.topic"), n)
    return FileColumns(
        RowColumn(column("path")),
        names,
        ids,
        IntColumn.of_arrow(column("partition.partition"), n),
        IntColumn.of_arrow(column("num_records"), n),
        IntColumn.of_arrow(column("min.offset"), n),
        IntColumn.of_arrow(column("max.offset"), n),
        {
            "size": RowColumn(column("size_bytes")),
            "modification_time": times("modification_time"),
            "min_timestamp_ms": times("min.timestamp"),
            "max_timestamp_ms": times("max.timestamp"),
        },
    )


def _decoded_paths_among(actions: pa.Table, wanted: set[str]) -> set[str]:
    """Those of the decoded paths ``wanted`` that delta-rs' add actions hold: only the paths
    equal to one of them or percent-encoded are read out of Arrow (the table's other files,
    all of a long log's, are not)."""
    column = combined(actions.column("path"))
    candidates = pc.or_(pc.is_in(column, value_set=array(sorted(wanted), pa.string())), pc.match_substring(column, "%"))
    return {unquote(p) for p in pc.filter(column, candidates).to_pylist()} & wanted


def add_action_column(actions: pa.Table, name: str) -> list:
    """One column of delta-rs' flattened add actions as a list; all None when the table lacks it
    (no file has that statistic or partition value)."""
    if name not in actions.column_names:
        return [None] * actions.num_rows
    column = actions.column(name)
    if pa.types.is_timestamp(column.type):
        # As int milliseconds: a zoned timestamp's to_pylist() asks pyarrow's pandas shim
        # (and so imports pandas) for every value.
        times, per = _MS_SCALE[column.type.unit]
        return [None if v is None else v * times // per for v in column.cast(pa.int64()).to_pylist()]
    return column.to_pylist()


# A timestamp unit's values in milliseconds: value * times // per.
_MS_SCALE = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1_000), "ns": (1, 1_000_000)}


class PreparedState(NamedTuple):
    """A commit's state derived before it landed (:meth:`TableLog.prepare`): from ``base``,
    ``state`` and its ``.crc`` file's content (None without a checksum)."""

    base: TableState
    state: TableState
    checksum_file: bytes | None


class TableLog:
    """One table's log as this process sees it: the latest state, history, time travel.

    Thread-safe; share one per table and process (a Store holds one).
    """

    def __init__(self, uri: str) -> None:
        self.uri = normalize_uri(uri)
        self.files = LogFiles(self.uri)
        self._lock = threading.Lock()
        # Notified whenever the state this process knows moves to a newer version (its own
        # commits through advance(), others' found by latest()): what waiting readers wait on.
        self._newer = threading.Condition(self._lock)
        self._state: TableState | None = None
        self._checked = time.monotonic()
        self._expiry_handler: Callable[[list[Reservation]], None] | None = None
        self._swept = 0.0
        self._sweeping = threading.Lock()

    def on_expired_reservations(self, handler: Callable[[list[Reservation]], None] | None) -> None:
        """Have :meth:`latest` hand ``handler`` the pending offset reservations whose deadline
        passed (their writer stopped renewing them), at most once per second; the handler
        aborts them (Kafka's coordinator aborts timed-out transactions the same way). Its
        errors are logged, never raised to the reader. None stops the sweeping."""
        self._expiry_handler = handler

    # -- the latest state -----------------------------------------------------

    def latest(self, *, timeout_ms: int | None = None) -> TableState:
        """The state after the newest commit (reads the commits this process has not seen).

        Raises CorruptLogError naming a commit file that is empty, not UTF-8 or not Delta
        actions; LogListingRaceError when a snapshot had to be loaded and listing the log
        kept racing writers for ``timeout_ms`` (default: Kafka's default.api.timeout.ms);
        StoreError when the log cannot be read.
        """
        with self._lock:
            state = self._state or self._newest(timeout_ms)
            state = self._follow(state, timeout_ms)
            self._set_state(state)
        check_readable(state.protocol)
        self._sweep(state)
        return state

    def _sweep(self, state: TableState) -> None:
        handler = self._expiry_handler
        now = time.monotonic()
        if handler is None or now - self._swept < _SWEEP_INTERVAL_S:
            return
        if not self._sweeping.acquire(blocking=False):
            return  # the handler's own commits read the log too
        try:
            self._swept = now
            found = expired(state, int(time.time() * 1000))
            if found:
                handler(found)
        except Exception as exc:
            log.warning("%s: could not abort expired offset reservations: %s", self.uri, exc)
        finally:
            self._sweeping.release()

    def current(self) -> TableState:
        """The newest state this process knows, without looking for new commits."""
        with self._lock:
            state = self._state
            if state is None:
                state = self._follow(self._newest())
                self._set_state(state)
            return state

    def known(self) -> TableState | None:
        """The newest state this process knows; None before it read one. Never reads the log."""
        with self._lock:
            return self._state

    def prepare(self, version: int, commit: Commit) -> PreparedState | None:
        """The state ``commit`` would lead to as version ``version``, derived now from the
        state this process knows (None when that is not the version before, or deriving
        fails), for :meth:`advance` to take once the commit landed: a committer derives it
        while the disk syncs the commit file rather than between the commit landing and its
        acknowledgements. Changes nothing; never raises."""
        with self._lock:
            base = self._state
        if base is None or base.version != version - 1:
            return None
        try:
            after = base.apply(version, commit)
            return PreparedState(base, after, None if after.checksum is None else checksum_file(after.checksum))
        except Exception as exc:  # advance derives it again and raises what is wrong
            log.debug("%s: could not derive version %s ahead: %s", self.uri, version, exc)
            return None

    def advance(self, version: int, commit: Commit, prepared: PreparedState | None = None) -> TableState | None:
        """Apply ``commit`` (version ``version``, already in hand) if it is the next one;
        the state at ``version`` if this process knows it, else None. ``prepared``
        (:meth:`prepare` of the same commit) is taken when it was derived from the state known
        now."""
        with self._lock:
            state = self._state
            if state is None:
                return None
            if state.version == version - 1:
                if prepared is not None and prepared.base is state:
                    state = prepared.state
                else:
                    state = state.apply(version, commit)
                self._set_state(state)
            return state if state.version == version else None

    def _set_state(self, state: TableState) -> None:
        # Called holding _lock.
        newer = self._state is None or state.version > self._state.version
        self._state = state
        if newer:
            self._newer.notify_all()

    def wait_past(self, version: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until the state this process knows is newer than ``version``;
        whether it is. Woken at once by a commit of this process (:meth:`advance`) or one another
        process made that :meth:`latest` read; it never reads the log itself (see
        :meth:`has_commit` for a look at other processes' commits)."""
        with self._newer:
            return self._newer.wait_for(
                lambda: self._state is not None and self._state.version > version, max(0.0, timeout_s)
            )

    def has_commit(self, version: int) -> bool:
        """Whether commit ``version`` exists: one stat of its file (a HEAD on object storage),
        no read or decode, so that a reader waiting for commits of other processes can look often."""
        return self.files.exists(version)

    def _newest(self, timeout_ms: int | None = None) -> TableState:
        """A state to follow the log from: the newest checkpoint's, read without listing the log,
        or a young table's few commits replayed (:mod:`engine.commit.checkpoint_state`), else
        delta-rs' snapshot of the latest version."""
        return (
            state_from_checkpoint(self.files)
            or state_from_commits(self.files)
            or load_state(self.uri, self.files, timeout_ms=timeout_ms)
        )

    def _follow(self, state: TableState, timeout_ms: int | None = None) -> TableState:
        replayed = 0
        while True:
            commit = self.files.read_commit(state.version + 1)
            if commit is None:
                break
            state = state.apply(state.version + 1, commit)
            replayed += 1
            if replayed == _REPLAY_BEFORE_RELOAD:
                checkpoint = self.files.last_checkpoint()
                if checkpoint is not None and checkpoint > state.version:
                    return self._follow(self._newest(timeout_ms), timeout_ms)
        now = time.monotonic()
        if replayed:
            self._checked = now
        elif now - self._checked > _IDLE_CHECK_S:
            self._checked = now
            checkpoint = self.files.last_checkpoint()
            if checkpoint is not None and checkpoint > state.version:
                # Log cleanup removed commits this state never read: start from the checkpoint.
                log.info("%s: version %s is gone from the log, reloading", self.uri, state.version + 1)
                return self._follow(self._newest(timeout_ms), timeout_ms)
        return state

    def latest_version(self) -> int:
        return self.latest().version

    # -- other versions ----------------------------------------------------------

    def at(self, version: int | None = None) -> TableState:
        """The state at ``version`` (the latest when None). Raises StoreError when the
        log no longer reaches back that far."""
        if version is None:
            return self.latest()
        known = self.current()
        if known.version == version:
            return known
        return load_state(self.uri, self.files, version)

    def snapshot(self, version: int | None = None) -> TableState:
        """Alias of :meth:`at`: the table's live files and properties at a version."""
        return self.at(version)

    def read_commit(self, version: int) -> Commit | None:
        """Commit ``version``, or None if its file is gone (log cleanup) or not yet written."""
        return self.files.read_commit(version)

    def commit_time(self, version: int) -> int | None:
        """When commit ``version`` was made (ms; its commitInfo timestamp, else the file's
        modification time), or None if its file is gone."""
        commit = self.read_commit(version)
        if commit is None:
            return None
        if commit.commit_info is not None and commit.commit_info.timestamp is not None:
            return commit.commit_info.timestamp
        return self.files.modified_ms(version)

    def missing_files(self, paths: list[str]) -> list[str]:
        """Those of the table-relative data file ``paths`` that no longer exist (VACUUM)."""
        fs, root = filesystem(self.uri)
        return [p for p in paths if not fs.exists(f"{root.rstrip('/')}/{unquote(p)}")]
