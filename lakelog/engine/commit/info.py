"""What lakelog records about each of its commits: Delta's ``commitInfo``.

Every lakelog commit carries tags in ``commitInfo`` (machine readable, read
back by ``history``) and the same JSON as ``userMetadata`` so that
``DESCRIBE HISTORY`` of the log table shows which client wrote which
offsets. :func:`commit_info` is the one place a ``commitInfo`` is built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lakelog.engine.commit.actions import CommitInfo
from lakelog.engine.offsets import OffsetRange
from lakelog.engine.storage.unique_ids import new_uuid

ENGINE_INFO = "lakelog/0.1 commit-core"

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


def lakelog_tags(info: Mapping[str, Any]) -> dict[str, str]:
    """The lakelog tags of a commit's ``commitInfo`` values (empty for a commit lakelog did
    not make). Appends also carry them as userMetadata; commits that only have that count."""
    tags = info.get("tags") or {}
    if TAG_OPERATION not in tags and info.get("userMetadata"):
        try:
            parsed = json.loads(info["userMetadata"])
        except (ValueError, TypeError):
            return {}
        return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}
    return dict(tags)


def parse_ranges(text: str | None) -> list[tuple[str, int, int, int]]:
    """Decode :data:`TAG_RANGES` into (topic, partition, start, end) tuples."""
    if not text:
        return []
    return [(str(t), int(p), int(s), int(e)) for t, p, s, e in json.loads(text)]


def commit_info(
    operation: str,
    read_version: int,
    *,
    now_ms: int,
    tags: Mapping[str, str],
    parameters: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    blind_append: bool = False,
    isolation_level: str = "Serializable",
    txn_id: str | None = None,
) -> CommitInfo:
    """The ``commitInfo`` of a commit made at ``read_version + 1``.

    ``operation`` is Delta's operation name (WRITE, SET TBLPROPERTIES,
    OPTIMIZE, ...), so ``DESCRIBE HISTORY`` reads naturally; ``txnId`` is
    unique per commit attempt and is how the core recognizes its own commit
    after a lost response.
    """
    values: dict[str, Any] = {
        "timestamp": now_ms,
        "operation": operation,
        "operationParameters": dict(parameters or {}),
        "readVersion": read_version,
        "isolationLevel": isolation_level,
        "isBlindAppend": blind_append,
        "operationMetrics": {k: str(v) for k, v in (metrics or {}).items()},
    }
    if tags:
        values["userMetadata"] = user_metadata(tags)
        values["tags"] = dict(tags)
    values["engineInfo"] = ENGINE_INFO
    values["txnId"] = txn_id or str(new_uuid())
    return CommitInfo(values)
