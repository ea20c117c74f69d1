"""Produce responses encoded straight to bytes: the agent answers every Produce request, and
kio's generic writer (a lookup and a type check per field) took ~130 us of the event loop for
a one-partition answer under Kafka's ProducerPerformance, most of an answer's cost.

Only the shape lakelog's own answers have is encoded here -- versions 3 to 9 (what the agent
serves, :data:`kafka_endpoint.produce.VERSIONS`), no log-append time, no record errors, no
throttle time --, byte for byte what kio writes for it (the tests compare the two); anything
else returns None and goes through kio. Field layout from Kafka's ``ProduceResponse.json``:
v3-v8 plain strings and arrays, v9 flexible (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

_PARTITION = struct.Struct(">ihq")  # index, error_code, base_offset
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NO_TIME = _I64.pack(-1)  # log_append_time_ms: none
FIRST_VERSION, LAST_VERSION = 3, 9
_FLEXIBLE = 9


def produce_response_body(version: int, body: Any) -> bytes | None:
    """The body of the kio ``ProduceResponse`` ``body`` of ``version`` as Kafka encodes it, or
    None when it is not of the shape this encodes (kio then writes it)."""
    if not FIRST_VERSION <= version <= LAST_VERSION or body.throttle_time.total_seconds() != 0:
        return None
    flexible = version >= _FLEXIBLE
    out = [_length(len(body.responses), flexible)]
    for topic in body.responses:
        name = topic.name.encode()
        out += (_length(len(name), flexible) if flexible else _I16.pack(len(name)), name)
        out.append(_length(len(topic.partition_responses), flexible))
        for part in topic.partition_responses:
            if part.log_append_time is not None or not isinstance(part.error_code, ErrorCode):
                return None
            out += (_PARTITION.pack(part.index, part.error_code.value, part.base_offset), _NO_TIME)
            if version >= 5:
                out.append(_I64.pack(part.log_start_offset))
            if version >= 8:
                if part.record_errors or part.error_message is not None:
                    return None
                # record_errors: empty; error_message: null.
                out.append(b"\x01\x00\x00" if flexible else b"\x00\x00\x00\x00\xff\xff")
        if flexible:
            out.append(b"\x00")  # the topic's tagged fields
    out.append(_I32.pack(0))  # throttle_time_ms
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


def _length(n: int, flexible: bool) -> bytes:
    """An array's (or, flexible, a string's) length: int32, or the unsigned varint of n + 1."""
    if not flexible:
        return _I32.pack(n)
    n += 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
