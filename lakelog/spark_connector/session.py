"""The local SparkSession lakelog builds when none is given.

Settings come from ``lakelog/conf/spark-defaults.conf``; Delta's jars (and,
for ``s3a://`` stores, Hadoop's S3A connector) are resolved through Ivy on
first use and lakelog's LogStores ship in the package
(:mod:`lakelog.jvm.jars`). An S3 endpoint named the AWS SDKs' way
(``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_REGION``) becomes
S3A's ``fs.s3a.endpoint`` unless the configuration names one; S3A reads
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` itself (its default
credential chain), so secrets are not copied into the Spark conf.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from lakelog.conf import conf_path, read_properties
from lakelog.engine.errors import StoreError
from lakelog.engine.storage.object_store import bucket_and_key, configure, is_s3, settings_from_hadoop
from lakelog.jvm import jars as jvm_jars
from lakelog.spark_connector import register

log = logging.getLogger(__name__)

LOCAL_LOG_STORE = "io.lakelog.storage.AtomicLocalLogStore"
# The store's own directory beside the Delta log (leases, Spark's warehouse); Delta ignores "_" names.
SCRATCH_DIR = "_lakelog"
S3_LOG_STORE = "io.lakelog.storage.ConditionalS3LogStore"


def session_jars(configured: str = "", *, s3a: bool = False) -> tuple[list[Path], list[Path]]:
    """(``spark.jars``, S3A class path) of a lakelog-built session: Delta's jars, Spark's spark-avro
    (``from_avro`` of typed reads), protobuf-java (lakelog-jvm.jar's Protobuf decoding) and lakelog-jvm.jar,
    and Hadoop's S3A connector when ``s3a`` asks for it or an earlier run already resolved it.
    Resolves through Ivy on first use (see :mod:`lakelog.jvm.jars`); raises
    :class:`StoreError` when that is impossible."""
    root = jvm_jars.cache_root(configured)
    status = _status_to_stderr
    jars = [
        *jvm_jars.ensure(jvm_jars.delta_jar_set(), root, status=status),
        *jvm_jars.ensure(jvm_jars.spark_avro_jar_set(), root, status=status),
        *jvm_jars.ensure(jvm_jars.protobuf_jar_set(), root, status=status),
        jvm_jars.lakelog_jar(),
    ]
    s3 = jvm_jars.s3a_jar_set()
    s3_jars = jvm_jars.ensure(s3, root, status=status) if s3a else jvm_jars.resolved(s3, root) or []
    return jars, s3_jars


def _status_to_stderr(text: str) -> None:
    print(f"lakelog: {text}", file=sys.stderr, flush=True)


def warehouse_dir(store_uri: str) -> str:
    """``spark.sql.warehouse.dir`` of a session lakelog builds for the store at ``store_uri``:
    ``_lakelog/spark-warehouse`` in the store, the scratch area Delta readers and VACUUM leave
    alone, instead of Spark's default ``./spark-warehouse`` in whatever directory the command ran
    in. lakelog reads and writes tables by path and creates no managed table there."""
    return f"{store_uri.rstrip('/')}/{SCRATCH_DIR}/spark-warehouse"


def session_conf(
    extra: Mapping[str, str] | None = None, jars: str = "", *, s3a: bool = False, store_uri: str | None = None
) -> dict[str, str]:
    """The Spark configuration of a lakelog-built session (defaults, jars, overrides); ``s3a`` adds
    Hadoop's S3A connector (fetched on first use); ``store_uri`` puts Spark's warehouse into that
    store (:func:`warehouse_dir`) unless the overrides name one."""
    spark_jars, s3_jars = session_jars(jars, s3a=s3a)
    values = read_properties("spark-defaults.conf")
    if store_uri is not None:
        values["spark.sql.warehouse.dir"] = warehouse_dir(store_uri)
    values["spark.jars"] = ",".join(str(p) for p in spark_jars)
    # hadoop-aws and the AWS SDK bundle (~650 MiB) go on the JVM class path
    # rather than spark.jars: in local mode spark.jars are copied into each
    # session's work directory, and S3AFileSystem is then visible to Hadoop's
    # FileSystem loader like any built-in file system.
    if s3_jars:
        for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
            values[key] = ":".join([*map(str, s3_jars), *filter(None, [values.get(key)])])
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


def build_session(
    extra: Mapping[str, str] | None = None, jars: str = "", *, s3a: bool = False, store_uri: str | None = None
) -> SparkSession:
    """Get or create the process's SparkSession configured for lakelog (``s3a``: with Hadoop's S3A
    connector, fetched on first use; ``store_uri``: the store it is built for, which keeps Spark's
    warehouse, see :func:`warehouse_dir`).

    Python workers run the interpreter running this code, so UDFs see the
    same installed packages.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    values = session_conf(extra, jars, s3a=s3a, store_uri=store_uri)
    _start_jvm(values)
    builder = SparkSession.builder
    for key, value in values.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()

    register(spark)
    return spark


# Printed by the JVM on every start because Spark's launcher always adds the incubating Vector API
# (org.apache.spark.launcher.JavaModuleOptions); nothing a user can act on.
_JVM_NOTICES = (b"WARNING: Using incubator modules:",)


def _start_jvm(values: Mapping[str, str]) -> None:
    """Start PySpark's JVM (unless this process has one) with ``values`` as spark-submit's settings,
    its stderr forwarded to ``sys.stderr`` line by line minus :data:`_JVM_NOTICES`."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        conf = SparkConf(loadDefaults=False)
        for key, value in values.items():
            conf.set(key, value)
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        threading.Thread(target=_forward_stderr, args=(gateway.proc.stderr,), name="jvm-stderr", daemon=True).start()
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


def _forward_stderr(stream: Any) -> None:
    for line in iter(stream.readline, b""):
        if line.startswith(_JVM_NOTICES):
            continue
        # sys.stderr looked up per line: pytest and Jupyter swap it while the JVM lives.
        with contextlib.suppress(Exception):
            sys.stderr.write(line.decode("utf-8", errors="replace"))
            sys.stderr.flush()


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


def configure_object_store(spark: SparkSession, uri: str) -> None:
    """For an S3 store: check the session can reach S3, and point lakelog's Python-side
    clients at the endpoint and credentials of the session's S3A configuration."""
    if not is_s3(uri):
        return
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(
            "org.apache.hadoop.fs.s3a.S3AFileSystem", False, jvm.Thread.currentThread().getContextClassLoader()
        )
    except Exception as exc:
        raise StoreError(
            f"{uri} needs Hadoop's S3A connector, which this SparkSession lacks: build the session with "
            "lakelog.spark_connector.session.build_session(s3a=True), or put the jars of `lakelog setup --s3` "
            "on spark.driver.extraClassPath and spark.executor.extraClassPath"
        ) from exc
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()

    def get(key: str) -> str | None:
        # Runtime spark.conf.set("spark.hadoop.…") reaches Delta's Hadoop conf too.
        return spark.conf.get(f"spark.hadoop.{key}", None) or hadoop.get(key)

    bucket, _ = bucket_and_key(uri)
    configure(uri, settings_from_hadoop(get, bucket))


def s3_commit_hazard(spark: SparkSession, uri: str) -> str | None:
    """Why Delta commits to the S3 store ``uri`` from this session (a user's own Spark
    writes, SQL OPTIMIZE) are unsafe beside lakelog's, or None."""
    scheme = uri.split("://", 1)[0]
    store_class = s3_log_store(spark, scheme)
    if store_class != S3_LOG_STORE:
        return (
            f"Delta commits to {uri} go through {store_class}, not {S3_LOG_STORE}: a commit from this session "
            "and one of lakelog's (which are S3 conditional puts) can silently overwrite each other. Set "
            f"spark.delta.logStore.{scheme}.impl={S3_LOG_STORE} (and lakelog's lakelog-jvm.jar on spark.jars)"
        )
    bucket, _ = bucket_and_key(uri)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key in (f"fs.s3a.bucket.{bucket}.create.conditional.enabled", "fs.s3a.create.conditional.enabled"):
        value = spark.conf.get(f"spark.hadoop.{key}", None) or hadoop.get(key)
        if value is not None:
            if value.strip().lower() == "false":
                return f"{key}=false: S3A cannot create commit files of {uri} conditionally (If-None-Match)"
            break
    return None


def warn_if_unsafe(spark: SparkSession, uri: str) -> None:
    """Log a warning when Delta commits from ``spark`` to the store ``uri`` could overwrite
    lakelog's (a LogStore that is not lakelog's, S3 without conditional creates)."""
    if uri.startswith("/") and not uses_safe_local_log_store(spark):
        log.warning(
            "spark.delta.logStore.file.impl is not %s: Delta commits to %s from this session (your own writes, "
            "SQL OPTIMIZE) and other processes' may overwrite each other",
            LOCAL_LOG_STORE,
            uri,
        )
    if is_s3(uri):
        hazard = s3_commit_hazard(spark, uri)
        if hazard is not None:
            log.warning("UNSAFE for concurrent writers: %s", hazard)
