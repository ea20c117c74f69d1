"""delta-rs calls on the log table that survive concurrent writers and a lost checkpoint.

Listing races. delta-kernel lists ``_delta_log`` to find the newest version,
and a listing racing writers can miss a file created meanwhile (a local
``readdir`` is not a snapshot: POSIX only promises to return the entries that
exist for its whole duration); it then refuses the listing ("CRC file version
N is newer than log segment version N-1", "Expected contiguous commit files,
but found gap"). Nothing is wrong with the log: a new listing sees the files.
Every delta-rs call that lists the log (loading a snapshot, VACUUM, log
cleanup) goes through :func:`with_listing_retries`, which tries again for as
long as the caller's timeout allows (``delivery.timeout.ms`` for a send,
``default.api.timeout.ms`` otherwise) and then raises the retriable
LogListingRaceError. A fault that is no race -- a commit file really missing,
a checksum of a version that has no commit -- is seen the same by the log's
own listing for longer than a race can last, and is named as a
CorruptLogError instead.

A lost checkpoint. ``_last_checkpoint`` is only a hint (Delta protocol,
"Last Checkpoint File"); when the checkpoint it names is gone, delta-kernel
still refuses the log ("Had a _last_checkpoint hint but didn't find any
checkpoints"). :func:`load_delta_table` then loads the version before it --
delta-kernel ignores a hint past the version asked for and lists from an
earlier checkpoint or version 0 -- and replays the JSON commits from there,
logging one warning per table and checkpoint; ``lakelog check --repair``
removes the stale hint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from lakelog.engine.commit.log_files import HINT, LogFiles, checkpoint_name
from lakelog.engine.errors import CorruptLogError, LogListingRaceError, StoreError, one_line
from lakelog.engine.storage.object_store import delta_storage_options, python_uri

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

T = TypeVar("T")
# Kafka's default.api.timeout.ms: the bound of a call that names no timeout of its own.
DEFAULT_TIMEOUT_MS = 60_000
# Waits between listings: from 10 ms, doubling, at most 200 ms.
_FIRST_WAIT_S, _MAX_WAIT_S = 0.01, 0.2
# A race lasts as long as one listing; a fault the log's own listings show this long is not one.
LASTING_S = 1.0
# Faults of a listing that make delta-kernel refuse the log the way a race does.
_RACE_LOOKALIKES = ("missing_commit", "orphan_checksum")
MISSING_CHECKPOINT = "_last_checkpoint hint but didn't find any checkpoints"


def is_transient_listing_error(exc: BaseException) -> bool:
    """Whether ``exc`` is delta-kernel refusing a log listing that raced a writer."""
    text = str(exc)
    return "newer than log segment" in text or "found gap" in text


def is_missing_checkpoint_error(exc: BaseException) -> bool:
    """Whether ``exc`` is delta-kernel refusing a log whose ``_last_checkpoint`` names a
    checkpoint that is gone."""
    return MISSING_CHECKPOINT in str(exc)


def with_listing_retries(action: Callable[[], T], timeout_ms: int | None = None, *, uri: str | None = None) -> T:
    """``action()``, called again while it fails with a listing race
    (:func:`is_transient_listing_error`), for up to ``timeout_ms`` (default
    :data:`DEFAULT_TIMEOUT_MS`); any other error is raised as it came.

    Raises LogListingRaceError (retriable) when the time ran out. With ``uri``, the
    log's own listing is consulted after each race: a missing commit file or a
    checksum without its commit that it keeps showing for :data:`LASTING_S` is a
    CorruptLogError naming the file, not a race.
    """
    from deltalake.exceptions import DeltaError

    limit_ms = DEFAULT_TIMEOUT_MS if timeout_ms is None else max(0, timeout_ms)
    started = time.monotonic()
    deadline = started + limit_ms / 1000
    wait = _FIRST_WAIT_S
    first_seen: dict[str, float] = {}
    races = 0
    while True:
        try:
            return action()
        except DeltaError as exc:
            if not is_transient_listing_error(exc):
                raise
            races += 1
            now = time.monotonic()
            if uri is not None:
                lasting = _lasting_fault(uri, first_seen, now)
                if lasting is not None:
                    raise lasting from exc
            if now >= deadline:
                raise LogListingRaceError(
                    f"listing the Delta log kept racing concurrent writers for {int((now - started) * 1000)} ms "
                    f"({races} listings; the last: {one_line(str(exc), 200)}); nothing is wrong with the log, "
                    "try again"
                ) from exc
            time.sleep(min(wait, max(0.0, deadline - now)))
            wait = min(_MAX_WAIT_S, wait * 2)


def _lasting_fault(uri: str, first_seen: dict[str, float], now: float) -> CorruptLogError | None:
    """The error for a fault the log's own listing has shown since at least :data:`LASTING_S`
    ago (``first_seen`` remembers when each was first seen), else None."""
    files = LogFiles(uri)
    try:
        faults = [p for p in files.problems() if p.kind in _RACE_LOOKALIKES]
    except OSError:
        return None
    current = {p.name for p in faults}
    for name in list(first_seen):
        if name not in current:
            del first_seen[name]
    for fault in faults:
        since = first_seen.setdefault(fault.name, now)
        if now - since >= LASTING_S:
            return CorruptLogError(f"{files.log_dir}/{fault.name}: {fault.detail} (run `lakelog check`)")
    return None


# Loads again after delta-rs failed to parse a commit that lakelog's own decoder then read whole.
_UNPARSED_RETRIES = 2


@dataclass(frozen=True)
class LoadedTable:
    """A delta-rs table, and the first version whose commit delta-rs may have replayed as JSON
    (earlier ones are covered by the checkpoint it started from)."""

    table: DeltaTable
    replayed_from: int


def open_delta_table(uri: str, version: int | None = None, *, timeout_ms: int | None = None) -> DeltaTable:
    """The log table at ``uri`` (at ``version``, the latest when None) as a delta-rs table;
    :func:`load_delta_table`, which says what it raises."""
    return load_delta_table(uri, version, timeout_ms=timeout_ms).table


def load_delta_table(uri: str, version: int | None = None, *, timeout_ms: int | None = None) -> LoadedTable:
    """The log table at ``uri`` (at ``version``, the latest when None), loaded by delta-rs.

    Listing races are retried within ``timeout_ms`` (:func:`with_listing_retries`); a
    ``_last_checkpoint`` naming a missing checkpoint is ignored (the JSON log is read
    instead, with one warning). Raises StoreError when there is no Delta table at ``uri``
    or its log cannot be read, CorruptLogError (naming the file) when a commit file is not
    valid JSON actions or the log is damaged past what a lost checkpoint explains,
    LogListingRaceError when listings kept racing writers until ``timeout_ms``.
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    files = LogFiles(uri)

    def load(at: int | None) -> DeltaTable:
        return DeltaTable(python_uri(uri), version=at, storage_options=delta_storage_options(uri))

    for attempt in range(_UNPARSED_RETRIES + 1):
        try:
            try:
                table = with_listing_retries(lambda: load(version), timeout_ms, uri=uri)
            except DeltaError as exc:
                if not is_missing_checkpoint_error(exc):
                    raise
                return _load_past_missing_checkpoint(files, version, timeout_ms, load, exc)
            return LoadedTable(table, _replayed_from(files.last_checkpoint(), table))
        except TableNotFoundError as exc:
            raise StoreError(f"there is no Delta table at {uri}") from exc
        except DeltaError as exc:
            corrupt = corrupt_commit(files)
            if corrupt is not None:
                raise corrupt from exc
            if "Json error" in str(exc) and attempt < _UNPARSED_RETRIES:
                # A commit delta-rs could not parse decodes now: it was damaged and mended
                # between the two reads (or a file system served a partial read). Read again.
                time.sleep(0.05)
                continue
            raise StoreError(f"the Delta log of {uri} cannot be read: {str(exc).splitlines()[0]}") from exc
    raise AssertionError("unreachable")


def _replayed_from(hint: int | None, table: DeltaTable) -> int:
    loaded = table.version()
    if hint is None:
        return 0
    if hint <= loaded:
        return hint + 1
    # An older version than the newest checkpoint: delta-kernel started from the newest
    # checkpoint at or below it, about one checkpoint interval back.
    try:
        interval = max(1, int(table.metadata().configuration.get("delta.checkpointInterval", 10)))
    except ValueError:
        interval = 10
    return max(0, loaded - interval + 1)


_warned: set[tuple[str, int]] = set()
_warned_lock = threading.Lock()


def _load_past_missing_checkpoint(
    files: LogFiles,
    version: int | None,
    timeout_ms: int | None,
    load: Callable[[int | None], DeltaTable],
    cause: BaseException,
) -> LoadedTable:
    from deltalake.exceptions import DeltaError

    hint = files.last_checkpoint()
    if hint is None or hint < 1:
        raise cause
    missing = f"{files.log_dir}/{checkpoint_name(hint)}"
    try:
        # Without the checkpoint the JSON log must reach back to an older checkpoint or to
        # version 0: delta-kernel would otherwise replay what is left (measured: it loads a
        # log whose first commits log cleanup removed, and the files they added are lost).
        gaps = [p for p in files.problems() if p.kind == "missing_commit"]
    except OSError:
        gaps = []
    if gaps:
        raise CorruptLogError(
            f"{missing} is missing (named by {HINT}) and the log cannot be read without it: "
            f"{files.log_dir}/{gaps[0].detail}"
        ) from cause
    try:
        # delta-kernel ignores a hint past the version asked for: it lists from an earlier
        # checkpoint (or version 0) up to it; from there the JSON commits carry it forward.
        table = with_listing_retries(lambda: load(hint - 1), timeout_ms, uri=files.uri)
        if version is None:
            with_listing_retries(table.update_incremental, timeout_ms, uri=files.uri)
        else:
            with_listing_retries(lambda: table.load_as_version(version), timeout_ms, uri=files.uri)
        listing = files.listing()
    except (DeltaError, OSError) as exc:
        raise CorruptLogError(
            f"{missing} is missing (named by {HINT}) and the log cannot be read without it: {one_line(str(exc), 300)}"
        ) from exc
    with _warned_lock:
        first = (files.uri, hint) not in _warned
        _warned.add((files.uri, hint))
    if first:
        log.warning(
            "%s (named by %s) is missing: reading the JSON log instead; `lakelog check --repair` removes the hint",
            missing,
            HINT,
        )
    earlier = [v for v in listing.checkpoints if v < hint]
    return LoadedTable(table, max(earlier) + 1 if earlier else 0)


def corrupt_commit(files: LogFiles) -> CorruptLogError | None:
    """The error naming the first commit file from the last checkpoint on that does not decode
    (delta-rs names none: "Json error: Truncated record"), or None when they all do."""
    checkpoint = files.last_checkpoint()
    version = 0 if checkpoint is None else checkpoint + 1
    try:
        while files.read_commit(version) is not None:
            version += 1
        return None
    except CorruptLogError as exc:
        return exc
    except OSError:
        return None
