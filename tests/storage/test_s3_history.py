"""The randomized multi-process workload of tests/test_history_workload.py (plain and
transactional producers, a consumer group with one member SIGKILLed), on an S3 store,
checked by tests/history_checker.py. The worker processes find the loopback S3
server through the AWS_* environment they inherit.

Five Spark drivers on one machine take ~6 minutes here (2 cores), so it runs
when asked: ``LAKELOG_TEST_S3_HISTORY=1 .venv/bin/python -m pytest tests/storage/test_s3_history.py``.
The three-driver race of test_s3_concurrency.py runs always."""

from __future__ import annotations

import os

import pytest

from tests.test_history_workload import test_randomized_workload_has_no_anomalies as run_workload

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.s3,
    pytest.mark.skipif(not os.environ.get("LAKELOG_TEST_S3_HISTORY"), reason="set LAKELOG_TEST_S3_HISTORY=1 (~6 min)"),
]


def test_randomized_workload_on_s3_has_no_anomalies(s3_store, tmp_path):
    run_workload(s3_store, tmp_path)
