"""The jars of lakelog-built sessions: Delta's resolved through Ivy into a jars directory once (only the
artifacts Spark lacks), lakelog's own from the package; failures are named and leave nothing half-made.
These run Ivy's JVM (no Spark)."""

from __future__ import annotations

import pytest

from lakelog import jvm
from lakelog.cli import main
from lakelog.engine.errors import StoreError
from lakelog.jvm import jars as jvm_jars


def test_setup_resolves_delta_jars_once_and_keeps_only_what_spark_lacks(tmp_path, capsys, monkeypatch):
    assert main(["setup", "--jars-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    jar_set = jvm_jars.delta_jar_set()
    jars = jvm_jars.resolved(jar_set, tmp_path)
    assert jars is not None and f"{jar_set.name}: {len(jars)} jars" in out
    names = {j.name for j in jars}
    assert any(n.startswith("delta-spark_") for n in names) and any(n.startswith("delta-storage-") for n in names)
    # Spark ships its own Hadoop, Parquet, Scala and logging; a second copy would conflict.
    assert not any(n.startswith(("hadoop-", "parquet-", "scala-library", "log4j-")) for n in names)
    assert not (tmp_path / jvm_jars.s3a_jar_set().name).exists(), "S3A's jars only when asked for"
    # from_avro of typed reads: spark-avro alone (Avro itself ships with PySpark).
    avro = jvm_jars.resolved(jvm_jars.spark_avro_jar_set(), tmp_path)
    assert avro is not None and [j.name for j in avro] == [f"spark-avro_2.13-{jvm_jars.spark_version()}.jar"]
    # lakelog_from_protobuf of typed reads: protobuf-java alone.
    protobuf = jvm_jars.resolved(jvm_jars.protobuf_jar_set(), tmp_path)
    assert protobuf is not None and [j.name for j in protobuf] == [f"protobuf-java-{jvm_jars.PROTOBUF_JAVA}.jar"]

    def no_second_resolution(*args, **kwargs):
        raise AssertionError("resolved again")

    monkeypatch.setattr(jvm_jars, "ivy_retrieve", no_second_resolution)
    assert main(["setup", "--jars-dir", str(tmp_path)]) == 0
    assert jvm_jars.resolved(jar_set, tmp_path) == jars


def test_a_version_maven_central_lacks_is_a_named_error_and_leaves_nothing_usable(tmp_path):
    missing = jvm_jars.JarSet(
        name="nowhere", coordinates=("io.delta:delta-spark_4.2_2.13:0.0.404",), keep=lambda org, artifact: True
    )
    with pytest.raises(StoreError, match=r"could not resolve io\.delta:delta-spark_4\.2_2\.13:0\.0\.404"):
        jvm_jars.ensure(missing, tmp_path)
    assert jvm_jars.resolved(missing, tmp_path) is None
    assert [p.name for p in tmp_path.iterdir()] == [".resolve.lock"]


def test_without_java_resolution_is_a_named_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(StoreError, match="needs Java 17"):
        jvm_jars.ensure(jvm_jars.delta_jar_set(), tmp_path / "jars")
    assert jvm_jars.resolved(jvm_jars.delta_jar_set(), tmp_path / "jars") is None


def test_the_packaged_jar_missing_is_a_named_error(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm, "jar_path", lambda: tmp_path / "lakelog-jvm.jar")
    with pytest.raises(StoreError, match="lakelog's JVM library is missing"):
        jvm_jars.lakelog_jar()


def test_artifact_ids_are_read_from_file_names():
    assert jvm_jars._artifact_id("delta-spark_4.2_2.13-4.4.0.jar") == "delta-spark_4.2_2.13"
    assert jvm_jars._artifact_id("analyticsaccelerator-s3-1.3.1.jar") == "analyticsaccelerator-s3"
    assert jvm_jars._artifact_id("bundle-2.35.4.jar") == "bundle"
