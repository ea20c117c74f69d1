"""The soak of tests/soak.py in small on an S3 store: producers, a transactional producer with
aborts, a consumer group, ``write(df)`` and maintenance as real processes under SIGKILLs, the
history checked by tests/history_checker.py. The driver starts its own loopback S3 server and the
workers find it through the AWS_* environment they inherit.

Spark drivers against moto on 2 cores take several minutes, so it runs when asked:
``LAKELOG_TEST_S3_HISTORY=1 .venv/bin/python -m pytest tests/storage/test_s3_history.py``
(``make soak SOAK_S3=1`` runs it as long as you like). The three-driver race of
test_s3_concurrency.py runs always."""

from __future__ import annotations

import os

import pytest

from tests.soak import SoakConfig, run_soak

pytestmark = [
    pytest.mark.slow,
    pytest.mark.s3,
    pytest.mark.skipif(not os.environ.get("LAKELOG_TEST_S3_HISTORY"), reason="set LAKELOG_TEST_S3_HISTORY=1 (~8 min)"),
]


def test_randomized_workload_on_s3_has_no_anomalies(tmp_path):
    config = SoakConfig(operations=2_000, kills=3, s3=True, max_minutes=15, workdir=tmp_path)
    result = run_soak(config, progress=lambda text: None)
    assert result.ok, "\n".join(result.lines())
    assert sum(result.kills.values()) >= 3
    assert result.report is not None and result.report.stats["final_log"] > 0
