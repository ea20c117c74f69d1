"""What lakelog records about each of its commits.

Every lakelog commit carries tags in Delta's ``commitInfo`` (machine
readable, read back by ``history``) and, for appends, the same JSON as
``userMetadata`` so that ``DESCRIBE HISTORY`` of the log table shows which
client wrote which offsets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.offsets import OffsetRange

TAG_OPERATION = "lakelog.operation"
TAG_CLIENT = "lakelog.client.id"
TAG_RANGES = "lakelog.ranges"
TAG_TOPIC = "lakelog.topic"
TAG_DETAILS = "lakelog.details"


def append_tags(operation: str, client_id: str, ranges: Mapping[Any, OffsetRange]) -> dict[str, str]:
    """Tags for an append: the offset range each partition received."""
    encoded = [[r.tp.topic, r.tp.partition, r.start, r.end] for r in sorted(ranges.values(), key=lambda r: r.tp)]
    return {
        TAG_OPERATION: operation,
        TAG_CLIENT: client_id,
        TAG_RANGES: json.dumps(encoded, separators=(",", ":")),
    }


def admin_tags(operation: str, client_id: str, topic: str, details: Mapping[str, Any]) -> dict[str, str]:
    return {
        TAG_OPERATION: operation,
        TAG_CLIENT: client_id,
        TAG_TOPIC: topic,
        TAG_DETAILS: json.dumps(dict(details), sort_keys=True, separators=(",", ":")),
    }


def user_metadata(tags: Mapping[str, str]) -> str:
    """The tags as one compact JSON string for Delta's userMetadata."""
    return json.dumps(dict(tags), sort_keys=True, separators=(",", ":"))


def parse_ranges(text: str | None) -> list[tuple[str, int, int, int]]:
    """Decode :data:`TAG_RANGES` into (topic, partition, start, end) tuples."""
    if not text:
        return []
    return [(str(t), int(p), int(s), int(e)) for t, p, s, e in json.loads(text)]
