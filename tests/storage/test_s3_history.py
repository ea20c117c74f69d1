"""The randomized multi-process workload of tests/test_history_workload.py (plain and
transactional producers, a consumer group with one member SIGKILLed), on an S3 store,
checked by tests/history_checker.py. The worker processes find the loopback S3
server through the AWS_* environment they inherit."""

from __future__ import annotations

import pytest

from tests.test_history_workload import test_randomized_workload_has_no_anomalies as run_workload

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.s3]


def test_randomized_workload_on_s3_has_no_anomalies(s3_store, tmp_path):
    run_workload(s3_store, tmp_path)
