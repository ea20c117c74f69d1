"""The local SparkSession lakelog builds when none is given.

Settings come from ``conf/spark-defaults.conf``; Delta's jars and lakelog's
LogStore come from ``.jars/`` (filled by ``make setup``, see jvm/build.sh) or
the directory named by ``LAKELOG_JARS_DIR``; Hadoop's S3A connector from its
``s3/`` subdirectory. An S3 endpoint named the AWS SDKs' way
(``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_REGION``) becomes
S3A's ``fs.s3a.endpoint`` unless the configuration names one; S3A reads
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` itself (its default
credential chain), so secrets are not copied into the Spark conf.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from lakelog.conf import conf_path, read_properties
from lakelog.engine.errors import StoreError

LOCAL_LOG_STORE = "io.lakelog.storage.AtomicLocalLogStore"
S3_LOG_STORE = "io.lakelog.storage.ConditionalS3LogStore"


def jars_dir(configured: str = "") -> Path:
    """Where Delta's jars and lakelog-jvm.jar are: ``configured`` (the ``jars.dir``
    setting), else ``LAKELOG_JARS_DIR``, else ``.jars/`` of the checkout (filled by setup)."""
    chosen = configured or os.environ.get("LAKELOG_JARS_DIR")
    if chosen:
        return Path(chosen).expanduser()
    return Path(__file__).resolve().parents[2] / ".jars"


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
    # hadoop-aws and the AWS SDK bundle (~650 MiB) go on the JVM class path
    # rather than spark.jars: in local mode spark.jars are copied into each
    # session's work directory, and S3AFileSystem is then visible to Hadoop's
    # FileSystem loader like any built-in file system.
    s3_jars = sorted(str(p) for p in (directory / "s3").glob("*.jar"))
    if s3_jars:
        for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
            values[key] = ":".join([*s3_jars, *filter(None, [values.get(key)])])
    log4j = f"-Dlog4j2.configurationFile=file:{conf_path('log4j2.properties')}"
    values["spark.driver.extraJavaOptions"] = (log4j + " " + values.get("spark.driver.extraJavaOptions", "")).strip()
    values.update(extra or {})
    values.update(s3a_from_env(values))
    return values


def s3a_from_env(values: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """S3A settings for an endpoint given in the AWS SDKs' environment variables,
    when ``values`` (the Spark conf) name none."""
    env = os.environ if env is None else env
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if not endpoint or values.get("spark.hadoop.fs.s3a.endpoint"):
        return {}
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": region,
        # S3-compatible servers (MinIO, Ceph, moto) rarely serve bucket.host names.
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https://")).lower(),
    }


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
    from lakelog.spark_connector import register

    register(spark)
    return spark


def uses_safe_local_log_store(spark: SparkSession) -> bool:
    """Whether local-path commits from several processes are safe in this session."""
    return spark.conf.get("spark.delta.logStore.file.impl", "") == LOCAL_LOG_STORE


def s3_log_store(spark: SparkSession, scheme: str = "s3a") -> str:
    """The Delta LogStore class this session uses for ``scheme`` (Delta's default if unset).

    Delta reads ``spark.delta.logStore.<scheme>.impl`` (and the older
    ``spark.delta.logStore.class``); with neither, S3 gets
    io.delta.storage.S3SingleDriverLogStore (Delta's DelegatingLogStore).
    """
    for key in (f"spark.delta.logStore.{scheme}.impl", "spark.delta.logStore.class"):
        value = spark.conf.get(key, None) or spark.sparkContext.getConf().get(key, None)
        if value:
            return value
    return "io.delta.storage.S3SingleDriverLogStore"
