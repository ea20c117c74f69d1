"""The store's commit history as lakelog describes it.

Each Delta commit's ``commitInfo`` is turned into one row: the version,
when, lakelog's operation name (from its tags; Delta's own operation name
for commits lakelog did not make, such as OPTIMIZE run from SQL), the
client, and the offset ranges an append gave each partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engine.commit_info import TAG_CLIENT, TAG_DETAILS, TAG_OPERATION, TAG_RANGES, TAG_TOPIC, parse_ranges


@dataclass(frozen=True)
class HistoryEntry:
    version: int
    timestamp: datetime | None
    operation: str
    delta_operation: str
    client_id: str | None
    topic: str | None
    ranges: list[tuple[str, int, int, int]] = field(default_factory=list)
    details: str | None = None

    def touches(self, topic: str) -> bool:
        return self.topic == topic or any(r[0] == topic for r in self.ranges)


def history_entry(version: int, lines: Iterable[str]) -> HistoryEntry:
    """Describe one commit from its JSON lines."""
    info: dict = {}
    for line in lines:
        line = line.strip()
        if line.startswith('{"commitInfo"'):
            info = json.loads(line)["commitInfo"]
            break
    tags = info.get("tags") or {}
    delta_op = str(info.get("operation", "UNKNOWN"))
    millis = info.get("inCommitTimestamp") or info.get("timestamp")
    when = datetime.fromtimestamp(millis / 1000, tz=UTC) if millis else None
    ranges = parse_ranges(tags.get(TAG_RANGES))
    if TAG_OPERATION not in tags and info.get("userMetadata"):
        # appends also carry the tags as userMetadata; tolerate commits that only have that
        try:
            tags = json.loads(info["userMetadata"])
            ranges = parse_ranges(tags.get(TAG_RANGES))
        except (ValueError, TypeError, AttributeError):
            tags = {}
    operation = tags.get(TAG_OPERATION) or delta_op.lower().replace(" ", "_")
    return HistoryEntry(
        version=version,
        timestamp=when,
        operation=operation,
        delta_operation=delta_op,
        client_id=tags.get(TAG_CLIENT),
        topic=tags.get(TAG_TOPIC),
        ranges=ranges,
        details=tags.get(TAG_DETAILS),
    )
