"""The soak (tests/soak.py) in small: the randomized multi-process workload under SIGKILLs, checked Jepsen-style.

Plain producers, a transactional producer that aborts some transactions, a consumer group of two, a
``write(df)`` writer and a streaming query (each its own JVM) and maintenance run as real processes while
random ones are SIGKILLed and restarted and the newest commit file is now and then emptied or truncated
(then put back); every operation is recorded and tests/history_checker.py must find no anomaly in the
history against the final table. ``make soak`` runs the same driver as long as you like.
``LAKELOG_TEST_HISTORY_OPERATIONS`` / ``LAKELOG_TEST_HISTORY_KILLS`` size this run.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.history_checker import check
from tests.soak import SoakConfig, SoakResult, run_soak

pytestmark = [pytest.mark.slow]

OPERATIONS = int(os.environ.get("LAKELOG_TEST_HISTORY_OPERATIONS", "3000"))
KILLS = int(os.environ.get("LAKELOG_TEST_HISTORY_KILLS", "4"))


def test_randomized_workload_under_kills_has_no_anomalies(tmp_path):
    config = SoakConfig(
        operations=OPERATIONS,
        kills=KILLS,
        kill_interval_s=2.0,
        damage_interval_s=3.0,
        max_minutes=6,
        workdir=tmp_path,
    )
    result = run_soak(config, progress=lambda text: None)
    assert result.ok, "\n".join(result.lines())
    assert sum(result.operations.values()) >= OPERATIONS and sum(result.kills.values()) >= KILLS
    # Every role acknowledged something: the run exercised all of them, not only the fast producers.
    assert all(result.operations[kind] > 0 for kind in ("sends", "txn_commits", "polls", "offset_commits"))
    assert all(result.operations[kind] > 0 for kind in ("txn_aborts", "writes", "maintenance_runs"))
    assert result.report is not None and result.report.stats["final_log"] > 0
    assert sum(result.damages.values()) > 0  # the log was damaged under the writers, and nothing went wrong


def test_an_unexpected_error_fails_the_soak_unless_its_operation_is_allowed():
    def result(allowed: frozenset[str], errors: Counter) -> bool:
        soak = SoakResult(SoakConfig(allow_unexpected_errors=allowed), "store", "range", errors=errors)
        soak.report = check([], [])
        soak.error_examples = dict.fromkeys(errors, "w.0: message")
        assert "verdict" in soak.lines()[-1]
        return soak.ok

    unexpected = Counter({("maintain", "DeltaError", True): 2})
    assert result(frozenset(), Counter({("write", "CommitConflictError", False): 3}))  # a LakelogError is an outcome
    assert not result(frozenset(), unexpected)
    assert result(frozenset({"maintain"}), unexpected)
    assert not result(frozenset({"consume"}), unexpected)
