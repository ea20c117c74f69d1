"""S3 stores on the loopback S3 server of tests/conftest.py (one bucket, a prefix per test;
``s3_bucket`` and ``s3_uri`` are in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def s3_store(spark, s3_uri):
    from lakelog.store import Store

    return Store.open(s3_uri, spark=spark)
