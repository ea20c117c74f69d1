"""The local SparkSession lakelog builds when none is given.

Settings come from ``conf/spark-defaults.conf``; Delta's jars and lakelog's
LogStore come from ``.jars/`` (filled by ``make setup``, see jvm/build.sh) or
the directory named by ``LAKELOG_JARS_DIR``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from conf import conf_path, read_properties
from engine.errors import StoreError

LOCAL_LOG_STORE = "io.lakelog.storage.AtomicLocalLogStore"


def jars_dir(configured: str = "") -> Path:
    """Where Delta's jars and lakelog-jvm.jar are: ``configured`` (the ``jars.dir``
    setting), else ``LAKELOG_JARS_DIR``, else ``.jars/`` of the checkout (filled by setup)."""
    chosen = configured or os.environ.get("LAKELOG_JARS_DIR")
    if chosen:
        return Path(chosen).expanduser()
    return Path(__file__).resolve().parent.parent / ".jars"


def session_conf(extra: Mapping[str, str] | None = None, jars: str = "") -> dict[str, str]:
    """The Spark configuration of a lakelog-built session (defaults, jars, overrides)."""
    directory = jars_dir(jars)
    jars = sorted(str(p) for p in directory.glob("*.jar"))
    if not (directory / ".complete").exists() or not jars:
        raise StoreError(
            f"Delta Lake's jars are missing from {directory}: run `make setup` in the lakelog checkout "
            "(or set jars.dir / LAKELOG_JARS_DIR to a directory holding them)"
        )
    values = read_properties("spark-defaults.conf")
    values["spark.jars"] = ",".join(jars)
    log4j = f"-Dlog4j2.configurationFile=file:{conf_path('log4j2.properties')}"
    values["spark.driver.extraJavaOptions"] = (log4j + " " + values.get("spark.driver.extraJavaOptions", "")).strip()
    values.update(extra or {})
    return values


def build_session(extra: Mapping[str, str] | None = None, jars: str = "") -> SparkSession:
    """Get or create the process's SparkSession configured for lakelog.

    Python workers run the interpreter running this code, so UDFs see the
    same installed packages.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    for key, value in session_conf(extra, jars).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    from spark_connector import register

    register(spark)
    return spark


def uses_safe_local_log_store(spark: SparkSession) -> bool:
    """Whether local-path commits from several processes are safe in this session."""
    return spark.conf.get("spark.delta.logStore.file.impl", "") == LOCAL_LOG_STORE
