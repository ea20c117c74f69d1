"""Which Delta version of the log table a time-travel read means.

``as_of_version`` names a version; ``as_of_timestamp`` means the newest
version committed at or before that time, as Delta's ``timestampAsOf``
does. Commit times are the ``timestamp`` of each commit's ``commitInfo``
(what ``history`` shows), found by binary search, so they are taken to grow
with the version -- true for writers sharing a clock; Delta's own history
monotonizes them for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lakelog.engine.errors import InvalidOffsetError

CommitTime = Callable[[int], int | None]  # version -> commit time in ms, None if the commit file is gone


def timestamp_ms(value: Any, *, option: str = "as_of_timestamp") -> int:
    """Milliseconds since the epoch from an int (ms), a datetime (naive = UTC) or an ISO-8601 string."""
    if isinstance(value, bool):
        raise InvalidOffsetError(f"{option} must be milliseconds, a datetime or an ISO-8601 string, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidOffsetError(f"{option} must not be negative, got {value}")
        return value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidOffsetError(f"{option} {value!r} is not an ISO-8601 time") from None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return int(aware.timestamp() * 1000)
    raise InvalidOffsetError(f"{option} must be milliseconds, a datetime or an ISO-8601 string, got {value!r}")


def earliest_version(latest: int, commit_time: CommitTime) -> int:
    """The oldest version whose commit file is still in the log (log cleanup removes a prefix)."""
    if commit_time(0) is not None:
        return 0
    lo, hi = 0, latest  # commit lo is gone, commit hi exists
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if commit_time(mid) is None:
            lo = mid
        else:
            hi = mid
    return hi


def version_as_of(
    latest: int,
    commit_time: CommitTime,
    *,
    as_of_version: Any = None,
    as_of_timestamp: Any = None,
    now_ms: int,
) -> int | None:
    """The version a time-travel read pins; None when neither option is given (latest).

    Raises InvalidOffsetError for both options at once, a version outside
    ``0..latest`` or whose commit was cleaned from the log, a time before the
    oldest commit still in the log, or a time in the future.
    """
    if as_of_version is not None and as_of_timestamp is not None:
        raise InvalidOffsetError("give as_of_version or as_of_timestamp, not both")
    if as_of_version is not None:
        if isinstance(as_of_version, bool) or not isinstance(as_of_version, int):
            raise InvalidOffsetError(f"as_of_version must be an int, got {as_of_version!r}")
        if not 0 <= as_of_version <= latest:
            raise InvalidOffsetError(f"as_of_version {as_of_version} is outside the log's versions 0..{latest}")
        first = earliest_version(latest, commit_time)
        if as_of_version < first:
            raise InvalidOffsetError(
                f"as_of_version {as_of_version} was removed by log cleanup; the oldest version left is {first}"
            )
        return as_of_version
    if as_of_timestamp is None:
        return None
    wanted = timestamp_ms(as_of_timestamp)
    if wanted > now_ms:
        raise InvalidOffsetError(f"as_of_timestamp {_iso(wanted)} is in the future")
    first = earliest_version(latest, commit_time)
    first_time = commit_time(first)
    if first_time is None or wanted < first_time:
        raise InvalidOffsetError(
            f"as_of_timestamp {_iso(wanted)} is before the oldest version left in the log "
            f"(version {first}, committed {_iso(first_time) if first_time is not None else 'at an unknown time'})"
        )
    lo, hi = first, latest  # commit lo is at or before the time
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t = commit_time(mid)
        if t is not None and t <= wanted:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
