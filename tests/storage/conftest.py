"""S3 stores on the loopback S3 server of tests/conftest.py (one bucket, a prefix per test)."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="session")
def s3_bucket(s3_server) -> str:
    return s3_server.create_bucket("lakelog-tests")


@pytest.fixture
def s3_uri(s3_bucket) -> str:
    """A fresh, empty location for a store."""
    return f"s3a://{s3_bucket}/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def s3_store(spark, s3_uri):
    from engine import LogStore

    return LogStore.open(s3_uri, spark=spark)
