"""Everything Spark: ``format("lakelog")`` (batch and streaming source and sink), the session
lakelog builds, DataFrame reads and ``write(df)``.

* :mod:`spark_connector.data_source` -- PySpark's Python Data Source ``lakelog``;
  :mod:`spark_connector.options` parses its options, :mod:`spark_connector.source` /
  :mod:`spark_connector.source_plan` read (offsets planned purely, records by pyarrow in the
  workers), :mod:`spark_connector.sink` commits micro-batches through the commit core;
* :mod:`spark_connector.query_offsets` -- a streaming query's ``groupId``: its end offsets
  committed to the consumer group after each batch;
* :mod:`spark_connector.session` -- the SparkSession lakelog builds (Delta's and lakelog's
  jars, S3A) and the checks of a session's storage settings;
* :mod:`spark_connector.frames` -- ``Store.read``: topics as DataFrames of Spark's Kafka
  source schema, pinned to one Delta version;
* :mod:`spark_connector.dataframe_write` -- ``Store.write(df)``: offsets assigned inside
  Spark, files written by Delta's writer, committed by the commit core.

Only :mod:`lakelog.store` (at a DataFrame call) and Spark's workers import this package; the
engine never does. Register once per SparkSession (sessions lakelog builds are registered
already)::

    from lakelog.spark_connector import register
    register(spark)
    spark.readStream.format("lakelog").option("path", store).option("subscribe", "orders").load()
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from lakelog.spark_connector.data_source import PYTHON_SOURCE_NAME, LakelogDataSource, LakelogPythonDataSource

__all__ = ["PYTHON_SOURCE_NAME", "LakelogDataSource", "register"]

_registered: weakref.WeakSet[SparkSession] = weakref.WeakSet()
log = logging.getLogger("lakelog.spark_connector")

# PySpark's worker Python when neither PYSPARK_PYTHON nor spark.pyspark.python says (SparkContext.pythonExec).
PYSPARK_DEFAULT_PYTHON = "python3"


def register(spark: SparkSession) -> None:
    """Make ``format("lakelog")`` available in ``spark`` (idempotent).

    With lakelog-jvm.jar on ``spark.jars`` (every session lakelog builds),
    its JVM provider ``io.lakelog.spark.LakelogProvider`` owns the name
    ``lakelog`` and delegates to this Python data source, registered as
    ``lakelog_python``; it adds the Kafka source's metrics to the streaming
    progress. Spark refuses a Python source under a name a JVM provider
    serves (DATA_SOURCE_ALREADY_EXISTS), which is how the jar is detected.
    Without the jar the Python source is ``lakelog`` itself (no metrics).

    The data source runs in Spark's Python workers with the Python the
    session names (``PYSPARK_PYTHON`` when the SparkContext started, else
    ``spark.pyspark.python``); when it names none, PySpark would start
    ``python3`` from PATH, which need not have lakelog (a script run as
    ``.venv/bin/python script.py`` without the venv activated). Then, on a
    local master, lakelog's source runs with this driver's Python
    (``sys.executable``); on a cluster a warning says to set PYSPARK_PYTHON.
    """
    if spark in _registered:
        return
    with _active(spark), _worker_python(spark):
        spark.dataSource.register(LakelogPythonDataSource)
        try:
            spark.dataSource.register(LakelogDataSource)
        except AnalysisException as error:
            if error.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
                raise
    _registered.add(spark)


def worker_python(python_exec: str, configured: str | None, master: str, environ: Mapping[str, str]) -> str | None:
    """The Python lakelog's data source should run in workers with, when it is not ``python_exec``
    (the SparkContext's): ``spark.pyspark.python`` (``configured``) if PySpark ignored it, else on
    a local master this driver's. None: keep ``python_exec``."""
    if environ.get("PYSPARK_PYTHON") or python_exec != PYSPARK_DEFAULT_PYTHON:
        return None  # the user chose the workers' Python
    if configured:
        return configured  # set on the builder: only spark-submit turns it into PYSPARK_PYTHON
    if master.startswith("local"):
        return sys.executable
    log.warning(
        "Spark's Python workers will run %r from each executor's PATH (neither PYSPARK_PYTHON nor "
        'spark.pyspark.python is set); if that Python lacks lakelog, format("lakelog") fails with '
        "ModuleNotFoundError: set PYSPARK_PYTHON to a Python with lakelog installed before the SparkContext starts",
        python_exec,
    )
    return None


@contextlib.contextmanager
def _worker_python(spark: Any) -> Iterator[None]:
    """Register with the workers' Python of :func:`worker_python` (the data source's Python
    function takes ``SparkContext.pythonExec`` when registered); other Python functions of the
    session keep theirs."""
    context = getattr(spark, "_sc", None)
    if context is None or getattr(spark, "_jsparkSession", None) is None:  # Spark Connect, tests' stand-ins
        yield
        return
    configured = context.getConf().get("spark.pyspark.python", None)
    chosen = worker_python(context.pythonExec, configured, context.master, os.environ)
    if chosen is None:
        yield
        return
    previous = context.pythonExec
    context.pythonExec = chosen
    log.debug('format("lakelog") runs in Python workers with %s', chosen)
    try:
        yield
    finally:
        context.pythonExec = previous


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
