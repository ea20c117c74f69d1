"""lakelog.spark_connector.register: which names it gives the Python data source; a second session; the
workers' Python."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

from lakelog.spark_connector import register, worker_python
from lakelog.spark_connector.data_source import LakelogDataSource, LakelogPythonDataSource


class Refused(AnalysisException):
    def __init__(self, condition: str) -> None:
        super().__init__(message=condition)
        self.condition = condition

    def getCondition(self) -> str:
        return self.condition


class FakeSession:
    """Records registrations; ``jvm_lakelog`` stands for lakelog-jvm.jar on spark.jars."""

    def __init__(self, jvm_lakelog: bool, other_error: str | None = None) -> None:
        self.names: list[str] = []
        self.jvm_lakelog = jvm_lakelog
        self.other_error = other_error
        self.dataSource = self

    def register(self, source: type) -> None:
        if source.name() == "lakelog" and self.other_error:
            raise Refused(self.other_error)
        if source.name() == "lakelog" and self.jvm_lakelog:
            raise Refused("DATA_SOURCE_ALREADY_EXISTS")  # DataSourceRegistration.checkDataSourceExists
        self.names.append(source.name())


def test_with_the_jvm_provider_the_python_source_is_only_lakelog_python():
    spark = FakeSession(jvm_lakelog=True)
    register(spark)
    register(spark)  # idempotent
    assert spark.names == [LakelogPythonDataSource.name()] == ["lakelog_python"]


def test_without_the_jar_the_python_source_is_lakelog_itself():
    spark = FakeSession(jvm_lakelog=False)
    register(spark)
    assert spark.names == ["lakelog_python", LakelogDataSource.name()]


def test_any_other_registration_error_is_raised():
    with pytest.raises(AnalysisException):
        register(FakeSession(jvm_lakelog=False, other_error="SOMETHING_ELSE"))


@pytest.mark.spark
def test_a_second_session_gets_format_lakelog_too(spark, store):
    """spark.newSession() shares the SparkContext but not the registered Python data sources."""
    from lakelog.store import Store

    store.create_topic("t", partitions=1)
    with store.producer() as producer:
        producer.send("t", key=b"k", value=b"v")
    other = spark.newSession()
    reopened = Store.open(store.uri, spark=other)  # registers in `other`
    assert reopened.read("t").count() == 1
    frame = other.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load()
    assert [(r.key, r.value) for r in frame.collect()] == [(b"k", b"v")]
    # and the first session still has it
    assert spark.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load().count() == 1


def test_the_workers_python_is_the_drivers_only_when_the_session_names_none(caplog):
    driver = sys.executable
    assert worker_python("python3", None, "local[2]", {}) == driver
    assert worker_python("python3", None, "local-cluster[2,1,1024]", {}) == driver
    # spark.pyspark.python set on a builder: PySpark itself only reads PYSPARK_PYTHON
    assert worker_python("python3", "/opt/py/bin/python", "local[*]", {}) == "/opt/py/bin/python"
    # the user's choice stands
    assert worker_python("/opt/py/bin/python", None, "local[*]", {"PYSPARK_PYTHON": "/opt/py/bin/python"}) is None
    assert worker_python("python3", None, "local[*]", {"PYSPARK_PYTHON": "python3"}) is None
    # executors elsewhere need not have the driver's path: say what to set
    with caplog.at_level(logging.WARNING, logger="lakelog.spark_connector"):
        assert worker_python("python3", None, "spark://h:7077", {}) is None
    assert "set PYSPARK_PYTHON" in caplog.text


USER_SCRIPT = """
import sys
from pyspark.sql import SparkSession
from lakelog.spark_connector import register

store, jars = sys.argv[1], sys.argv[2]
spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.jars", jars)
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.delta.logStore.file.impl", "io.lakelog.storage.AtomicLocalLogStore")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
register(spark)
rows = spark.read.format("lakelog").option("path", store).option("subscribe", "t").load().collect()
print("VALUES", sorted(bytes(r.value).decode() for r in rows))
spark.stop()
"""


@pytest.mark.spark
def test_a_users_own_session_run_without_the_venv_on_path_reads_format_lakelog(spark, store, tmp_path):
    """`.venv/bin/python script.py` with the venv not activated: PySpark's workers would run
    `python3` from PATH, here one that is not the driver's (it exits at once, as a Python without
    lakelog fails); register() has lakelog's data source run with the driver's Python."""
    store.create_topic("t", partitions=1)
    with store.producer() as producer:
        producer.send("t", "a")
        producer.send("t", "b")
    shims = tmp_path / "bin"
    shims.mkdir()
    for name in ("python3", "python"):
        shim = shims / name
        shim.write_text("#!/bin/sh\necho 'not the driver Python: no lakelog here' >&2\nexit 1\n")
        shim.chmod(0o755)
    venv_bin = str(Path(sys.executable).parent)
    path = [str(shims), *(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(path)
    script = tmp_path / "script.py"
    script.write_text(USER_SCRIPT)
    jars = spark.sparkContext.getConf().get("spark.jars")  # Delta's jars and lakelog-jvm.jar
    done = subprocess.run(
        [sys.executable, str(script), store.uri, jars],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "VALUES ['a', 'b']" in done.stdout
