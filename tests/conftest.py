"""Shared fixtures: one SparkSession for the whole test session, a fresh store per test."""

from __future__ import annotations

import pytest

from engine.session import build_session


@pytest.fixture(scope="session")
def spark():
    session = build_session({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture
def store(spark, tmp_path):
    from engine import LogStore

    return LogStore.open(tmp_path / "store", spark=spark)
