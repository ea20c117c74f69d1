"""How often and how long a commit is attempted again."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from lakelog.engine.errors import CommitConflictError, DeliveryTimeoutError, LakelogError

REPLAN_BACKOFF_MAX_MS = 8


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a conflicting commit is planned again.

    ``retries`` bounds the re-plans after the first attempt and ``timeout_ms``
    (when set) the total time; backoff doubles from ``backoff_ms`` up to
    ``backoff_max_ms`` with 20% jitter, as Kafka's ``retry.backoff.ms`` /
    ``retry.backoff.max.ms``. Rebasing over a winner that changed nothing the
    commit relied on is not a retry: it costs no backoff and no retry, and is
    bounded by ``timeout_ms`` and :attr:`max_rebases`.
    """

    retries: int = 10
    backoff_ms: int = 100
    backoff_max_ms: int = 1000
    timeout_ms: int | None = None
    max_rebases: int = 10_000

    def delay_s(self, retry: int, rng: random.Random) -> float:
        base = min(self.backoff_max_ms, self.backoff_ms * (2 ** max(0, retry - 1)))
        return base * rng.uniform(0.8, 1.2) / 1000.0

    def replan_delay_s(self, retry: int, rng: random.Random) -> float:
        """The wait before planning again after losing a version to a concurrent commit.

        Starts at 1 ms and doubles up to :data:`REPLAN_BACKOFF_MAX_MS`, with
        jitter so that colliding writers spread out. It stays short on
        purpose: a commit takes milliseconds, and a writer that waited longer
        each time it lost would lose ever more often to the writers that did
        not wait (measured: 4 processes on one partition, a backoff growing
        to 1 s put the 99th percentile near 1 s). ``backoff_ms`` (Kafka's
        ``retry.backoff.ms``) is for failed requests, not for losing a race.
        """
        base = min(self.backoff_max_ms, REPLAN_BACKOFF_MAX_MS, min(self.backoff_ms, 1) * 2 ** max(0, retry - 1))
        return base * rng.uniform(0.5, 1.5) / 1000.0

    def exhausted(self, conflicts: int, started: float, now: float) -> bool:
        """Whether, after ``conflicts`` failed attempts, no further attempt may be made."""
        if conflicts > self.retries:
            return True
        return self.timed_out(started, now)

    def timed_out(self, started: float, now: float) -> bool:
        return self.timeout_ms is not None and (now - started) * 1000 >= self.timeout_ms


def retries_exhausted(policy: RetryPolicy, conflicts: int, started: float) -> LakelogError:
    """The error for a commit that may not be attempted again (nothing was committed)."""
    elapsed_ms = int((time.monotonic() - started) * 1000)
    if conflicts <= policy.retries:
        return DeliveryTimeoutError(
            f"commit not done after {elapsed_ms} ms ({conflicts} conflicting attempts); nothing was committed"
        )
    return CommitConflictError(
        f"commit conflicted with concurrent writers {conflicts} times (retries={policy.retries}); "
        "nothing was committed, the call can be repeated",
        attempts=conflicts,
    )
