"""Which version a time-travel read pins: plain functions, no Spark."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakelog.engine.admin.time_travel import earliest_version, timestamp_ms, version_as_of
from lakelog.engine.errors import InvalidOffsetError

# versions 0..6 committed at 100, 200, ..., 700 ms; versions 0 and 1 removed by log cleanup
TIMES = {v: 100 * (v + 1) for v in range(7)}
CLEANED = {v: (t if v >= 2 else None) for v, t in TIMES.items()}


def at(times, **kwargs):
    return version_as_of(max(times), times.get, now_ms=10_000, **kwargs)


def test_a_time_pins_the_newest_version_committed_at_or_before_it():
    assert at(TIMES, as_of_timestamp=100) == 0
    assert at(TIMES, as_of_timestamp=199) == 0
    assert at(TIMES, as_of_timestamp=200) == 1
    assert at(TIMES, as_of_timestamp=650) == 5
    assert at(TIMES, as_of_timestamp=9_999) == 6  # after the last commit, not in the future: latest
    assert at(TIMES, as_of_timestamp=datetime.fromtimestamp(0.45, tz=UTC)) == 3
    assert at(TIMES, as_of_timestamp="1970-01-01T00:00:00.3") == 2  # naive ISO-8601 is UTC
    assert at(TIMES) is None


def test_a_version_is_taken_as_it_is_when_the_log_still_has_it():
    assert at(TIMES, as_of_version=0) == 0
    assert at(CLEANED, as_of_version=2) == 2


@pytest.mark.parametrize(
    ("times", "kwargs", "message"),
    [
        (TIMES, {"as_of_version": 7}, "outside the log's versions 0..6"),
        (TIMES, {"as_of_version": -1}, "outside the log's versions"),
        (TIMES, {"as_of_version": "3"}, "must be an int"),
        (TIMES, {"as_of_version": True}, "must be an int"),
        (CLEANED, {"as_of_version": 1}, "removed by log cleanup; the oldest version left is 2"),
        (TIMES, {"as_of_timestamp": 99}, "before the oldest version left in the log (version 0"),
        (CLEANED, {"as_of_timestamp": 250}, "(version 2"),
        (TIMES, {"as_of_timestamp": 10_001}, "in the future"),
        (TIMES, {"as_of_timestamp": "yesterday"}, "is not an ISO-8601 time"),
        (TIMES, {"as_of_timestamp": -5}, "must not be negative"),
        (TIMES, {"as_of_timestamp": 1.5}, "must be milliseconds"),
        (TIMES, {"as_of_version": 1, "as_of_timestamp": 100}, "not both"),
    ],
)
def test_bad_or_unreachable_points_in_time_are_named(times, kwargs, message):
    with pytest.raises(InvalidOffsetError, match=r"as_of|not both") as caught:
        at(times, **kwargs)
    assert message in str(caught.value)


def test_earliest_version_finds_the_first_commit_left_after_cleanup():
    for first in range(0, 9):
        times = {v: (None if v < first else v) for v in range(10)}
        assert earliest_version(9, times.get) == first


def test_timestamps_accept_aware_datetimes_in_any_zone():
    from datetime import timedelta, timezone

    plus2 = timezone(timedelta(hours=2))
    assert timestamp_ms(datetime(1970, 1, 1, 2, 0, 1, tzinfo=plus2)) == 1000
