"""Records as the producer accepts them and RecordMetadata as it acknowledges them."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakelog.engine.errors import InvalidOffsetError, InvalidRecordError

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class RecordMetadata:
    """Where an acknowledged record is: its partition, offset and timestamp (ms).

    Returned by the producer future once the record's commit has landed;
    the record is then readable at exactly this offset, forever (until
    retention or compaction removes it).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


def to_bytes(value: Any, field: str) -> bytes | None:
    """Accept bytes-like values and str (UTF-8); None stays None."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise InvalidRecordError(f"record {field} must be bytes, str or None, got {type(value).__name__}")


def to_headers(headers: Any) -> Headers | None:
    """Accept a list of (key, value) pairs or a mapping; keys are str, values bytes-like/str/None."""
    if headers is None:
        return None
    items: Iterable[Any] = headers.items() if isinstance(headers, Mapping) else headers
    result: Headers = []
    try:
        for pair in items:
            key, value = pair
            if not isinstance(key, str):
                raise InvalidRecordError(f"header key must be str, got {type(key).__name__}")
            result.append((key, to_bytes(value, f"header {key!r} value")))
    except (TypeError, ValueError) as exc:
        raise InvalidRecordError(f"headers must be (key, value) pairs or a mapping: {exc}") from exc
    return result


# The latest instant the log table's timestamp column holds so that every Delta reader reads it
# back: Spark's TimestampType ends at 9999-12-31T23:59:59.999999Z (larger microseconds overflow).
MAX_TIMESTAMP_MS = 253_402_300_799_999


def _timestamp_range_error(what: str) -> InvalidRecordError:
    return InvalidRecordError(
        f"{what}: a timestamp must lie in [0, {MAX_TIMESTAMP_MS}] ms (1970-01-01 to 9999-12-31 UTC), "
        "the range the log table holds; nothing was written"
    )


def check_lookup_timestamp(timestamp: Any, what: str) -> int:
    """``timestamp`` (ms) to find records by, as Kafka's offsetsForTimes: an int in
    [0, MAX_TIMESTAMP_MS], the range every record's timestamp lies in; else InvalidOffsetError
    naming ``what``, the value and that range (a later time could never find a record, and
    usually means micro- or nanoseconds were given for milliseconds)."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise InvalidOffsetError(f"{what} must be an int (ms since the epoch), got {timestamp!r}")
    if not 0 <= timestamp <= MAX_TIMESTAMP_MS:
        raise InvalidOffsetError(
            f"{what} {timestamp} is outside 0..{MAX_TIMESTAMP_MS} ms (1970-01-01 to 9999-12-31 UTC), "
            "the range record timestamps lie in"
        )
    return timestamp


def to_timestamp_ms(timestamp: Any) -> int:
    """Milliseconds since the epoch; None means now (CreateTime set by the producer).

    Raises InvalidRecordError for anything but an int or a datetime, and for
    instants outside [0, MAX_TIMESTAMP_MS] (before 1970 or after 9999).
    """
    if timestamp is None:
        return int(time.time() * 1000)
    if isinstance(timestamp, datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=UTC)
        ms = int(timestamp.timestamp() * 1000)
    elif isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise InvalidRecordError(f"timestamp must be milliseconds (int) or a datetime, got {type(timestamp).__name__}")
    else:
        ms = timestamp
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        raise _timestamp_range_error(f"timestamp {timestamp!r}")
    return ms


def check_timestamps_ms(column: Any) -> None:
    """Raise InvalidRecordError unless every non-null entry of an int64 Arrow column lies in
    [0, MAX_TIMESTAMP_MS]."""
    if not len(column) or column.null_count == len(column):
        return
    # Imported here: these checks are every CLI module's imports, and ``lakelog --help`` or a
    # command refused for its arguments need no pyarrow (a quarter of a second to import).
    import pyarrow.compute as pc

    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low < 0 or high > MAX_TIMESTAMP_MS:
        raise _timestamp_range_error(f"timestamps from {low} to {high}")


def record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """Bytes a record counts against ``max.message.bytes``: key, value, header keys and values."""
    size = (len(key) if key else 0) + (len(value) if value else 0)
    for hkey, hvalue in headers or ():
        size += len(hkey.encode("utf-8")) + (len(hvalue) if hvalue else 0)
    return size
