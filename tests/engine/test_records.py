from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakelog.engine.errors import InvalidRecordError
from lakelog.engine.records import record_size, to_bytes, to_headers, to_timestamp_ms


def test_keys_and_values_accept_bytes_like_and_text():
    assert to_bytes(b"a", "value") == b"a"
    assert to_bytes(bytearray(b"b"), "value") == b"b"
    assert to_bytes(memoryview(b"c"), "value") == b"c"
    assert to_bytes("é", "value") == "é".encode()
    assert to_bytes(None, "value") is None
    with pytest.raises(InvalidRecordError, match="record key must be bytes, str or None, got int"):
        to_bytes(5, "key")


def test_headers_as_pairs_or_mapping():
    assert to_headers([("a", b"1"), ("a", None)]) == [("a", b"1"), ("a", None)]
    assert to_headers({"b": "2"}) == [("b", b"2")]
    with pytest.raises(InvalidRecordError, match="header key must be str"):
        to_headers([(1, b"x")])
    with pytest.raises(InvalidRecordError, match="pairs or a mapping"):
        to_headers(["abc"])


def test_timestamps():
    assert to_timestamp_ms(5) == 5
    assert to_timestamp_ms(datetime(2020, 1, 1, tzinfo=UTC)) == 1577836800000
    assert to_timestamp_ms(None) > 1577836800000
    with pytest.raises(InvalidRecordError, match=r"must lie in \[0, "):
        to_timestamp_ms(-1)
    with pytest.raises(InvalidRecordError, match="milliseconds"):
        to_timestamp_ms(1.5)


def test_record_size_counts_key_value_and_headers():
    assert record_size(b"ab", b"cde", [("é", b"12"), ("k", None)]) == 2 + 3 + 2 + 2 + 1
    assert record_size(None, None, None) == 0
