"""How far a query is behind the log, from its progress: the Kafka source's three metrics.

Spark's Kafka source reports ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``avgOffsetsBehindLatest`` in its progress ``metrics`` through the JVM
``ReportsSourceMetrics`` interface, which PySpark's Python Data Source API
does not expose (Spark 4.2). The lakelog source reports the log's end offsets
as the progress ``latestOffset`` instead; this computes the same three
figures from a source's progress entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _offsets(value: Any) -> dict[tuple[str, str], int]:
    if value is None:
        return {}
    data = json.loads(value) if isinstance(value, str) else value
    return {(t, p): int(o) for t, ps in data.items() for p, o in ps.items()}


def offsets_behind_latest(source_progress: Mapping[str, Any]) -> dict[str, float]:
    """``{"minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest"}`` for one
    entry of ``query.lastProgress["sources"]`` (empty when the source reported no latest offset)."""
    latest = _offsets(source_progress.get("latestOffset"))
    end = _offsets(source_progress.get("endOffset"))
    if not latest:
        return {}
    behind = [max(0, offset - end.get(tp, 0)) for tp, offset in latest.items()]
    return {
        "minOffsetsBehindLatest": float(min(behind)),
        "maxOffsetsBehindLatest": float(max(behind)),
        "avgOffsetsBehindLatest": sum(behind) / len(behind),
    }
