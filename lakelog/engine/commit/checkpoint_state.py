"""The newest table state from the checkpoint ``_last_checkpoint`` names, read by lakelog.

A Delta reader "can locate a recent checkpoint by looking at the
``_delta_log/_last_checkpoint`` file" instead of listing the log, "prohibitively
expensive" at 10,000+ files (Delta protocol, "Last Checkpoint File"). delta-rs lists
the whole ``_delta_log`` on every load of a local table (measured at 20,000 versions:
~150 ms of a ~250 ms load, against ~65 ms for the same checkpoint in a directory of 14
files). Here the checkpoint is read with only the columns a table state needs (the add
actions' path, size, modification time and their typed statistics and partition values,
``stats_parsed`` and ``partitionValues_parsed``, which a table with
``delta.checkpoint.writeStatsAsStruct`` has; txn; metaData and protocol only when the
``.crc`` of the checkpoint's version does not hold them), and the commits
after the checkpoint are read one by one by the follower
(:meth:`engine.commit.follower.TableLog.latest`: a failed ``open`` ends them), so that
opening a store costs what its live files cost, not the length of its log.

On a local store the checkpoint's rows are usually not decoded at all: the state snapshot
lakelog writes beside each checkpoint it writes (engine.commit.state_snapshot: the same
columns, flat, as memory-mapped Arrow IPC) is used when it was made from that checkpoint
file and the version's ``.crc`` agrees with it (metadata and protocol then come from the
``.crc``); otherwise the checkpoint is read as follows.

Only what this reader fully understands is read this way: a classic single-file
checkpoint (no ``parts``) of a table that needs no reader feature (minReaderVersion 1:
no deletion vectors, no column mapping) with typed statistics and partition values, and
whose ``delta.setTransactionRetentionDuration`` is absent or an interval it parses.
Anything else -- no hint, a hint naming a missing or unreadable checkpoint, a checkpoint
without typed statistics (a store created before lakelog set the property) --
returns None, and the caller loads
the table with delta-rs as before (:func:`engine.commit.follower.load_state`), which also
names what is wrong.

Application transactions expire: a snapshot ignores one whose ``lastUpdated`` is older than
``delta.setTransactionRetentionDuration`` (Delta protocol, "Transaction Identifiers";
delta-kernel's ``calculate_transaction_expiration_timestamp``). An entry updated well
within the retention (:data:`_MARGIN_MS`) is answered from the checkpoint; one near or past
its expiry, or without ``lastUpdated``, is asked of delta-rs (a snapshot loaded once, the
first time one is asked), so that both readers agree on every id.

A young table has no checkpoint yet (``delta.checkpointInterval`` commits make the first):
:func:`state_from_commits` replays its few commits from version 0 instead, with the same
checks, so that opening a new store does not import and load delta-rs (a twentieth of a
second of a short-lived client's start). A log this reader does not fully understand, longer
than :data:`_REPLAY_LIMIT` commits, or with any fault a listing shows goes to delta-rs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.commit.actions import AddFile, Metadata, Protocol, RemoveFile, Txn
from lakelog.engine.commit.checksum import checksum_disagreement
from lakelog.engine.commit.delta_table import load_delta_table
from lakelog.engine.commit.file_runs import FileColumns, combined
from lakelog.engine.commit.log_files import (
    LogFiles,
    checkpoint_name,
    checksum_name,
    listing_problems,
    metadata_and_protocol_of,
    txn_entries,
)
from lakelog.engine.commit.state import AppVersions, TableState
from lakelog.engine.commit.state_snapshot import child, file_columns, flat_columns, read_snapshot, write_snapshot

log = logging.getLogger(__name__)

STATE_COLUMNS = [
    "add.path",
    "add.size",
    "add.modificationTime",
    # Of the typed statistics only what a state keeps (not nullCount, tightBounds).
    "add.stats_parsed.numRecords",
    "add.stats_parsed.minValues",
    "add.stats_parsed.maxValues",
    "add.partitionValues_parsed",
    "txn",
]
_METADATA_COLUMNS = ["metaData", "protocol"]


def state_from_checkpoint(files: LogFiles) -> TableState | None:
    """The state at the version of the checkpoint ``_last_checkpoint`` names, read with the
    columns a state needs and no listing of the log; None when that checkpoint is not one
    this reader reads (see the module's notes: the caller loads the table with delta-rs).
    Never raises for a damaged checkpoint or hint: delta-rs' load names those."""
    hint = files.checkpoint_hint()
    if hint is None or hint.get("parts") not in (None, 1) or hint.get("v2Checkpoint") is not None:
        return None
    version = hint["version"]
    try:
        checksum = files.read_checksum(version)
        described = _described_by(checksum)
        if described is not None and (snapshot := _snapshot(files, version)) is not None:
            # The checkpoint's own rows, mapped (engine.commit.state_snapshot), when the .crc
            # agrees with them as it must with the checkpoint's; else the checkpoint is read.
            flat, txns = snapshot
            size = pc.sum(flat.column("size")).as_py() or 0
            if _disagreement(checksum, flat.num_rows, size, *described) is None:
                return _state(files, version, described, file_columns(flat), txns, checksum)
        checkpoint = files.read_checkpoint(version, STATE_COLUMNS + ([] if described else _METADATA_COLUMNS))
        # Rows holding another action stay (a null add): their partition values are null, so no
        # partition takes them (FileColumns.by_partition), and filtering them out would copy
        # every live file's path.
        adds = combined(checkpoint.column("add"))
        num_files = len(adds) - adds.null_count
        size = pc.sum(child(adds, "size")).as_py() or 0
        if described is not None and not _agrees(files, version, checksum, num_files, size, *described):
            described = checksum = None  # a checksum that disagrees describes nothing
        if described is None:
            described = _described_by_checkpoint(files, version, checkpoint)
            if described is None:
                return None
            if checksum is not None and not _agrees(files, version, checksum, num_files, size, *described):
                checksum = None
        flat = flat_columns(adds)
        if flat is None:
            return None
        return _state(files, version, described, file_columns(flat), txn_entries(checkpoint), checksum)
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        log.debug("%s: checkpoint %s not read by lakelog (%s); loading with delta-rs", files.uri, version, exc)
        return None


def _state(
    files: LogFiles,
    version: int,
    described: tuple[Metadata, Protocol],
    columns: FileColumns,
    txns: dict[str, tuple[int, int | None]],
    checksum: dict[str, Any] | None,
) -> TableState | None:
    metadata, protocol = described
    readable, retention_ms = _understood(metadata, protocol)
    if not readable:
        return None
    apps = AppVersions(_AppLookup(files.uri, version, txns, retention_ms))
    return TableState.from_columns(version, protocol, metadata, columns, apps, checksum)


def write_state_snapshot(files: LogFiles, version: int, checkpoint: pa.Table) -> None:
    """Replace the table's state snapshot (engine.commit.state_snapshot) with one of the
    checkpoint of ``version``, made from ``checkpoint``, its :data:`STATE_COLUMNS` as read;
    nothing for a store on S3 or a checkpoint this reader does not read (no typed
    statistics). Raises OSError, pyarrow.ArrowException."""
    if not files.local:
        return
    adds = combined(checkpoint.column("add"))
    flat = flat_columns(adds)
    if flat is not None:
        path = os.path.join(files.log_dir, checkpoint_name(version))
        write_snapshot(files.log_dir, version, flat.filter(pc.is_valid(adds)), txn_entries(checkpoint), path)


def _snapshot(files: LogFiles, version: int) -> tuple[pa.RecordBatch, dict[str, tuple[int, int | None]]] | None:
    if not files.local:
        return None
    return read_snapshot(files.log_dir, version, os.path.join(files.log_dir, checkpoint_name(version)))


# The longest log without a checkpoint replayed from version 0 here (the table's own
# delta.checkpointInterval is 50); a longer one is loaded by delta-rs.
_REPLAY_LIMIT = 100


def state_from_commits(files: LogFiles) -> TableState | None:
    """The state at the newest commit of a table without a checkpoint, replayed from its
    commit files from version 0 (Delta protocol, "Action Reconciliation": the newest file
    action for each logical file, the latest protocol, metaData and txn per appId win; a
    reader-version-1 table has no deletion vectors, so a file is its decoded path).

    None when this reader leaves the table to delta-rs: a checkpoint or ``_last_checkpoint``
    is there, the log is empty or longer than :data:`_REPLAY_LIMIT` commits, a listing shows
    any fault of the log (a missing commit, an orphan or empty ``.crc``), a commit went
    missing since the listing, or the table needs what :func:`state_from_checkpoint` does not
    read. Raises CorruptLogError naming a commit file
    that is empty, not UTF-8 or not Delta actions (as loading the table does); OSError when
    the log cannot be listed."""
    listing = files.listing()
    newest = max(listing.commits, default=-1)
    if listing.checkpoints or files.checkpoint_hint() is not None or not 0 <= newest < _REPLAY_LIMIT:
        return None
    if listing_problems(listing, None):
        return None
    live: dict[str, AddFile] = {}
    txns: dict[str, tuple[int, int | None]] = {}
    metadata: Metadata | None = None
    protocol: Protocol | None = None
    for version in range(newest + 1):
        commit = files.read_commit(version)
        if commit is None:
            return None  # gone since the listing: delta-rs' load names what happened
        metadata = commit.metadata or metadata
        protocol = commit.protocol or protocol
        for action in commit.actions:
            if isinstance(action, AddFile):
                live[unquote(action.path)] = action
            elif isinstance(action, RemoveFile):
                live.pop(unquote(action.path), None)
            elif isinstance(action, Txn):
                txns[action.app_id] = (action.version, action.last_updated)
    if metadata is None or protocol is None:
        return None
    readable, retention_ms = _understood(metadata, protocol)
    if not readable:
        return None
    adds = list(live.values())
    checksum = _agreeing_checksum(files, newest, len(adds), sum(a.size for a in adds), metadata, protocol)
    # As a snapshot lists them: every live file is data (dataChange belongs to the commit).
    stats = [replace(a.file_stats(), data_change=True) for a in adds if a.tp is not None]
    apps = AppVersions(_AppLookup(files.uri, newest, txns, retention_ms))
    return TableState.build(newest, protocol, metadata, stats, apps, checksum)


def _understood(metadata: Metadata, protocol: Protocol) -> tuple[bool, int | None]:
    """Whether this reader reads the table as delta-rs would (no reader feature; a transaction
    retention absent or one it parses), and that retention in ms."""
    retention = metadata.configuration.get(_RETENTION)
    retention_ms = None if retention is None else interval_ms(retention)
    return protocol.min_reader_version == 1 and (retention is None or retention_ms is not None), retention_ms


def _described_by(checksum: dict[str, Any] | None) -> tuple[Metadata, Protocol] | None:
    """The metadata and protocol a version's ``.crc`` holds, or None when it holds no
    readable pair. A checksum carries the version's ``metaData`` and ``protocol`` actions, so
    the checkpoint's two widest columns need not be decoded (Delta's kernel reads them from the
    ``.crc`` the same way: delta-io/delta#4077); the caller still checks the checksum's file
    count and bytes against the checkpoint's files before it keeps them."""
    if checksum is None:
        return None
    metadata, protocol = checksum.get("metadata"), checksum.get("protocol")
    if not isinstance(metadata, dict) or not isinstance(protocol, dict):
        return None
    shapes = {"id": str, "schemaString": str, "partitionColumns": list, "configuration": dict}
    if not all(isinstance(metadata.get(key), shape) for key, shape in shapes.items()):
        return None  # not what a checkpoint's metaData column would give: read that instead
    try:
        return Metadata.from_json(metadata), Protocol.from_json(protocol)
    except (KeyError, TypeError, ValueError):
        return None


def _described_by_checkpoint(files: LogFiles, version: int, checkpoint: pa.Table) -> tuple[Metadata, Protocol] | None:
    """The metadata and protocol of the checkpoint of ``version`` (its columns read now when
    what was read of it, ``checkpoint``, lacks them), or None when it has no such pair."""
    if "metaData" not in checkpoint.column_names:
        checkpoint = files.read_checkpoint(version, _METADATA_COLUMNS)
    metadata_body, protocol_body = metadata_and_protocol_of(checkpoint)
    if metadata_body is None or protocol_body is None:
        return None
    return Metadata.from_json(metadata_body), Protocol.from_json(protocol_body)


def _agreeing_checksum(
    files: LogFiles, version: int, num_files: int, size: int, metadata: Metadata, protocol: Protocol
) -> dict[str, Any] | None:
    """The ``.crc`` of ``version`` if it agrees with the state read (file count, size, metadata,
    protocol); one that disagrees is logged and not used."""
    checksum = files.read_checksum(version)
    if checksum is None or not _agrees(files, version, checksum, num_files, size, metadata, protocol):
        return None
    return checksum


def _agrees(
    files: LogFiles,
    version: int,
    checksum: dict[str, Any],
    num_files: int,
    size: int,
    metadata: Metadata,
    protocol: Protocol,
) -> bool:
    """Whether ``checksum`` agrees with the state read; one that does not is logged."""
    disagreement = _disagreement(checksum, num_files, size, metadata, protocol)
    if disagreement is not None:
        name = checksum_name(version)
        log.warning("%s/%s disagrees with the log (%s): not used", files.log_dir, name, disagreement)
        return False
    return True


def _disagreement(
    checksum: dict[str, Any], num_files: int, size: int, metadata: Metadata, protocol: Protocol
) -> str | None:
    return checksum_disagreement(
        checksum,
        num_files=num_files,
        table_size_bytes=size,
        metadata=metadata.to_json()["metaData"],
        protocol=protocol.to_json()["protocol"],
    )


_RETENTION = "delta.setTransactionRetentionDuration"
# An app transaction updated more recently than this before its expiry is certainly live.
_MARGIN_MS = 60 * 60 * 1000
_UNIT_MS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}


def interval_ms(text: str) -> int | None:
    """A Delta interval property (``interval 7 days``, ``2 hours 30 minutes``) in ms; None
    when it is not one this parser reads (units below a millisecond, months, years)."""
    words = text.strip().lower().split()
    if words[:1] == ["interval"]:
        words = words[1:]
    if not words or len(words) % 2:
        return None
    total = 0
    for number, unit in zip(words[::2], words[1::2], strict=True):
        ms = _UNIT_MS.get(unit[:-1] if unit.endswith("s") else unit)
        if ms is None or not number.isdigit():
            return None
        total += int(number) * ms
    return total


class _AppLookup:
    """The version of an app id in the checkpoint, as delta-rs' snapshot of it answers."""

    def __init__(
        self, uri: str, version: int, txns: dict[str, tuple[int, int | None]], retention_ms: int | None
    ) -> None:
        self._uri, self._version, self._txns, self._retention_ms = uri, version, txns, retention_ms
        self._table: Any = None
        self._lock = threading.Lock()

    def __call__(self, app_id: str) -> int:
        found = self._txns.get(app_id)
        if found is None:
            return -1
        version, updated = found
        if self._retention_ms is None:
            return version
        if updated is not None and updated > time.time() * 1000 - self._retention_ms + _MARGIN_MS:
            return version
        with self._lock:  # near or past its expiry: as delta-rs decides
            if self._table is None:
                self._table = load_delta_table(self._uri, self._version).table
            answer = self._table.transaction_version(app_id)
        return -1 if answer is None else int(answer)
