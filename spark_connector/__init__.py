"""Spark's ``format("lakelog")``: Structured Streaming and batch source and sink.

Register once per SparkSession (sessions lakelog builds are registered
already)::

    from spark_connector import register
    register(spark)
    spark.readStream.format("lakelog").option("path", store).option("subscribe", "orders").load()
"""

from __future__ import annotations

import weakref

from pyspark.sql import SparkSession

from spark_connector.data_source import LakelogDataSource

__all__ = ["LakelogDataSource", "register"]

_registered: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def register(spark: SparkSession) -> None:
    """Make ``format("lakelog")`` available in ``spark`` (idempotent)."""
    if spark not in _registered:
        spark.dataSource.register(LakelogDataSource)
        _registered.add(spark)
