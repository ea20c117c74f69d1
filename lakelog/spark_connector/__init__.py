"""Spark's ``format("lakelog")``: Structured Streaming and batch source and sink.

Register once per SparkSession (sessions lakelog builds are registered
already)::

    from lakelog.spark_connector import register
    register(spark)
    spark.readStream.format("lakelog").option("path", store).option("subscribe", "orders").load()
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from lakelog.spark_connector.data_source import PYTHON_SOURCE_NAME, LakelogDataSource, LakelogPythonDataSource

__all__ = ["PYTHON_SOURCE_NAME", "LakelogDataSource", "register"]

_registered: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def register(spark: SparkSession) -> None:
    """Make ``format("lakelog")`` available in ``spark`` (idempotent).

    With lakelog-jvm.jar on ``spark.jars`` (every session lakelog builds),
    its JVM provider ``io.lakelog.spark.LakelogProvider`` owns the name
    ``lakelog`` and delegates to this Python data source, registered as
    ``lakelog_python``; it adds the Kafka source's metrics to the streaming
    progress. Spark refuses a Python source under a name a JVM provider
    serves (DATA_SOURCE_ALREADY_EXISTS), which is how the jar is detected.
    Without the jar the Python source is ``lakelog`` itself (no metrics).
    """
    if spark in _registered:
        return
    with _active(spark):
        spark.dataSource.register(LakelogPythonDataSource)
        try:
            spark.dataSource.register(LakelogDataSource)
        except AnalysisException as error:
            if error.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
                raise
    _registered.add(spark)


@contextlib.contextmanager
def _active(spark: Any) -> Iterator[None]:
    """Make ``spark`` the JVM's active session while registering.

    DataSourceRegistration.checkDataSourceExists looks the name up with
    DataSource.lookupDataSource, which consults the *active* session's Python
    data sources, not the registering session's. From a second session
    (``spark.newSession()``) the first session's ``lakelog_python`` would be
    found and the registration refused as DATA_SOURCE_ALREADY_EXISTS.
    """
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # not a classic session (tests' stand-ins)
        yield
        return
    sessions = spark._jvm.org.apache.spark.sql.SparkSession
    previous = sessions.getActiveSession()
    sessions.setActiveSession(jsession)
    try:
        yield
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()
