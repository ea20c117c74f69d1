"""delta-rs calls on the log table that survive the listing races of concurrent writers.

delta-kernel lists ``_delta_log`` to find the newest version, and a listing
racing writers can miss a file created meanwhile; it then refuses the
listing ("CRC file version N is newer than log segment version N-1",
"Expected contiguous commit files, but found gap"). Nothing is wrong with
the log: a new listing sees the files. Every delta-rs call that lists the
log (loading a snapshot, VACUUM, log cleanup) goes through
:func:`with_listing_retries`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from lakelog.engine.errors import CorruptLogError, StoreError
from lakelog.engine.object_store import delta_storage_options, python_uri

if TYPE_CHECKING:
    from deltalake import DeltaTable

T = TypeVar("T")
LISTING_ATTEMPTS = 5


def is_transient_listing_error(exc: BaseException) -> bool:
    """Whether ``exc`` is delta-kernel refusing a log listing that raced a writer."""
    text = str(exc)
    return "newer than log segment" in text or "found gap" in text


def with_listing_retries(action: Callable[[], T], attempts: int = LISTING_ATTEMPTS) -> T:
    """``action()``, called again (up to ``attempts`` times in all) while it fails with a
    listing race (:func:`is_transient_listing_error`); any other error, or the last
    transient one, is raised as it came."""
    from deltalake.exceptions import DeltaError

    for attempt in range(attempts):
        try:
            return action()
        except DeltaError as exc:
            if not is_transient_listing_error(exc) or attempt + 1 >= attempts:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable: the last attempt returns or raises")


def open_delta_table(uri: str, version: int | None = None) -> DeltaTable:
    """The log table at ``uri`` (at ``version``, the latest when None) as a delta-rs table.

    Raises StoreError when there is no Delta table at ``uri`` or its log cannot be read,
    CorruptLogError (naming the file) when a commit file is not valid JSON actions (truncated
    or overwritten).
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        return with_listing_retries(
            lambda: DeltaTable(python_uri(uri), version=version, storage_options=delta_storage_options(uri))
        )
    except TableNotFoundError as exc:
        raise StoreError(f"there is no Delta table at {uri}") from exc
    except DeltaError as exc:
        corrupt = _corrupt_commit(uri)
        if corrupt is not None:
            raise corrupt from exc
        raise StoreError(f"the Delta log of {uri} cannot be read: {str(exc).splitlines()[0]}") from exc


def _corrupt_commit(uri: str) -> CorruptLogError | None:
    """The error naming the first commit file from the last checkpoint on that does not decode
    (delta-rs names none: "Json error: Truncated record"), or None when they all do."""
    from lakelog.engine.commit.log_files import LogFiles

    files = LogFiles(uri)
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
