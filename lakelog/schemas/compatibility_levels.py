"""Confluent's compatibility levels over a format's reader/writer check (pure).

BACKWARD: the new schema reads data of the latest live version; FORWARD: the
latest reads the new one's data; FULL: both. The ``_TRANSITIVE`` levels check
every live version instead of the latest; NONE checks nothing
(Confluent's ``CompatibilityLevel`` and ``CompatibilityChecker``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lakelog.schemas.registry_errors import InvalidCompatibilityLevelError

LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_LEVEL = "BACKWARD"

S = TypeVar("S")


def check_level(level: Any) -> str:
    """``level`` upper-cased if Confluent defines it; else InvalidCompatibilityLevelError (42203)."""
    if isinstance(level, str) and level.upper() in LEVELS:
        return level.upper()
    raise InvalidCompatibilityLevelError(
        f"Invalid compatibility level {level!r}. Valid values are: {', '.join(LEVELS)}"
    )


def incompatibilities(
    level: str, new: S, previous: Sequence[S], reader_problems: Callable[[S, S], list[str]]
) -> list[str]:
    """Why ``new`` may not follow ``previous`` (live versions, oldest first) under ``level``;
    empty if it may. ``reader_problems(reader, writer)`` is the format's check."""
    level = check_level(level)
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    problems: list[str] = []
    # Newest first, as Confluent reports the first version it breaks with.
    for old in reversed(against):
        if backward:
            problems.extend(f"reader (new) vs writer (old): {p}" for p in reader_problems(new, old))
        if forward:
            problems.extend(f"reader (old) vs writer (new): {p}" for p in reader_problems(old, new))
    return problems
