"""The jars a lakelog-built SparkSession puts on its class path, and where they come from.

- Delta Lake's jars (``io.delta:delta-spark_<spark>_<scala>:<delta-spark's version>`` and what it needs
  beyond Spark) are resolved the way Spark resolves ``spark.jars.packages``: through Apache Ivy (the
  ``ivy`` jar PySpark ships) from Maven Central into the user's Ivy cache (``~/.ivy2.5.2/cache``, Spark
  4's default, so ``--packages`` runs share it), then copied into a lakelog cache directory
  (``$XDG_CACHE_HOME/lakelog/jars``, default ``~/.cache/lakelog/jars``) or the ``jars.dir`` setting. Only
  artifacts Spark does not ship already are kept (Delta's and Unity Catalog's), as Delta's own
  ``configure_spark_with_delta_pip`` would get them, without a second, conflicting Hadoop or Parquet.
- Hadoop's S3A connector (``hadoop-aws`` of PySpark's Hadoop version and the AWS SDK bundle, ~650 MiB)
  only when an ``s3a://`` store is opened.
- Spark's ``spark-avro`` module of PySpark's version (``from_avro`` for typed reads,
  :func:`spark_avro_jar_set`), resolved the same way, and ``protobuf-java``, which lakelog-jvm.jar's
  Protobuf decoding of typed reads calls (:func:`protobuf_jar_set`).
- lakelog's own small JVM library (LogStores, the partitioner UDF, the ``format("lakelog")`` provider)
  ships inside the package as ``lakelog/jvm/lakelog-jvm.jar``.

Resolution happens once per version set; a directory is used only when its ``.complete`` marker exists,
so an interrupted download is redone rather than half-used. Nothing is written under ``~/.m2``.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

from lakelog import jvm
from lakelog.engine.errors import StoreError

SCALA_BINARY = "2.13"
COMPLETE = ".complete"


@dataclass(frozen=True)
class JarSet:
    """Maven coordinates to resolve and which resolved artifacts to keep (Spark ships the rest)."""

    name: str
    coordinates: tuple[str, ...]
    keep: Callable[[str, str], bool]
    transitive: bool = True


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_version() -> str:
    return importlib.metadata.version("pyspark")


def hadoop_version() -> str:
    """The Hadoop version PySpark's jars are (hadoop-aws must match it exactly)."""
    found = sorted((pyspark_home() / "jars").glob("hadoop-client-api-*.jar"))
    if not found:
        raise StoreError(f"PySpark's Hadoop jars are missing from {pyspark_home() / 'jars'}")
    return found[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def delta_jar_set() -> JarSet:
    """Delta Lake's jars for the installed PySpark and delta-spark (their Python package's version)."""
    spark_binary = ".".join(spark_version().split(".")[:2])
    delta = importlib.metadata.version("delta-spark")
    return JarSet(
        name=f"delta-{delta}_spark-{spark_binary}",
        coordinates=(f"io.delta:delta-spark_{spark_binary}_{SCALA_BINARY}:{delta}",),
        keep=lambda org, _artifact: org in ("io.delta", "io.unitycatalog"),
    )


def spark_avro_jar_set() -> JarSet:
    """Spark's own ``spark-avro`` module for the installed PySpark (``from_avro``, the decoder of typed
    reads of Avro topics). An external module of Spark, on Maven Central as
    ``org.apache.spark:spark-avro_<scala>`` with PySpark's version; Avro itself ships with PySpark,
    so only the module's jar is kept."""
    spark = spark_version()
    return JarSet(
        name=f"spark-avro-{spark}",
        coordinates=(f"org.apache.spark:spark-avro_{SCALA_BINARY}:{spark}",),
        keep=lambda org, artifact: org == "org.apache.spark" and artifact.startswith("spark-avro"),
        transitive=False,
    )


# protobuf-java of the same protobuf release (36.2) as the Python runtime lakelog is tested with
# (protobuf 7.36.2). Spark and Delta put no protobuf-java of their own on the class path (Spark's
# is shaded into org.sparkproject), so this one conflicts with none.
PROTOBUF_JAVA = "4.36.2"


def protobuf_jar_set() -> JarSet:
    """``com.google.protobuf:protobuf-java`` (no dependencies): the DynamicMessage and descriptors
    lakelog-jvm.jar's ``lakelog_from_protobuf`` decodes Protobuf topics with (spark-protobuf, Spark's
    own decoder, is not on the Maven repository lakelog resolves from)."""
    return JarSet(
        name=f"protobuf-java-{PROTOBUF_JAVA}",
        coordinates=(f"com.google.protobuf:protobuf-java:{PROTOBUF_JAVA}",),
        keep=lambda org, artifact: org == "com.google.protobuf" and artifact == "protobuf-java",
        transitive=False,
    )


def s3a_jar_set() -> JarSet:
    """Hadoop's S3A connector for PySpark's Hadoop, with the AWS SDK v2 bundle it calls."""
    hadoop = hadoop_version()
    return JarSet(
        name=f"s3a-hadoop-{hadoop}",
        coordinates=(f"org.apache.hadoop:hadoop-aws:{hadoop}",),
        # wildfly-openssl is optional (fs.s3a.ssl.channel.mode); Hadoop itself is PySpark's.
        keep=lambda _org, artifact: artifact in ("hadoop-aws", "bundle", "analyticsaccelerator-s3"),
    )


def s3a_compile_jar_set() -> JarSet:
    """hadoop-aws alone: what compiling lakelog's S3 LogStore needs (not the 650 MiB SDK bundle)."""
    hadoop = hadoop_version()
    return JarSet(
        name=f"s3a-compile-hadoop-{hadoop}",
        coordinates=(f"org.apache.hadoop:hadoop-aws:{hadoop}",),
        keep=lambda _org, artifact: artifact == "hadoop-aws",
        transitive=False,
    )


def cache_root(configured: str = "") -> Path:
    """Where resolved jar sets live: ``configured`` (``jars.dir``), ``LAKELOG_JARS_DIR``, else
    ``$XDG_CACHE_HOME/lakelog/jars`` (``~/.cache/lakelog/jars``)."""
    chosen = configured or os.environ.get("LAKELOG_JARS_DIR")
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lakelog" / "jars"


def ivy_cache() -> Path:
    """Spark 4's default Ivy cache (``spark.jars.ivy`` unset), shared with ``--packages`` runs."""
    return Path(os.environ.get("LAKELOG_IVY_CACHE") or Path.home() / ".ivy2.5.2" / "cache").expanduser()


def resolved(jar_set: JarSet, root: Path) -> list[Path] | None:
    """The jars of ``jar_set`` under ``root`` if a finished resolution left them there."""
    directory = root / jar_set.name
    if not (directory / COMPLETE).exists():
        return None
    return sorted(directory.glob("*.jar"))


def ensure(jar_set: JarSet, root: Path, *, status: Callable[[str], None] | None = None) -> list[Path]:
    """The jars of ``jar_set``, resolved through Ivy into ``root/<name>`` on first use.

    Safe with several processes (an exclusive lock in ``root``; the first one resolves, the others
    reuse). Raises :class:`StoreError` naming the coordinates when resolution fails
    (no network, no Java, an unknown version); nothing half-resolved is left to be used."""
    done = resolved(jar_set, root)
    if done is not None:
        return done
    root.mkdir(parents=True, exist_ok=True)
    # One lock for every set: Ivy's cache is not safe for concurrent resolutions (they share its
    # resolved-module files).
    with open(root / ".resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = resolved(jar_set, root)
        if done is not None:
            return done
        if status is not None:
            status(f"resolving {', '.join(jar_set.coordinates)} from Maven Central through Ivy (once)")
        directory = root / jar_set.name
        shutil.rmtree(directory, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{jar_set.name}.", dir=root))
        try:
            for org, artifact, path in ivy_retrieve(jar_set.coordinates, staging, transitive=jar_set.transitive):
                if jar_set.keep(org, artifact):
                    path.rename(staging / path.name.split("+", 1)[1])
                else:
                    path.unlink()
            if not any(staging.glob("*.jar")):
                raise StoreError(f"resolving {', '.join(jar_set.coordinates)} through Ivy gave none of its jars")
            (staging / COMPLETE).touch()
            staging.rename(directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    done = resolved(jar_set, root)
    assert done is not None
    return done


def ivy_retrieve(coordinates: Iterable[str], dest: Path, *, transitive: bool) -> list[tuple[str, str, Path]]:
    """Run Ivy (PySpark's jar) to resolve ``coordinates`` and copy their jars into ``dest`` as
    ``<org>+<artifact>-<revision>[-<classifier>].jar``; returns (org, artifact, path) per jar."""
    ivy_jars = sorted((pyspark_home() / "jars").glob("ivy-*.jar"))
    java = java_tool("java")
    if not ivy_jars or java is None:
        raise StoreError(
            "resolving Delta Lake's jars needs Java 17 on PATH (or JAVA_HOME) and PySpark's Ivy jar"
            f" ({pyspark_home() / 'jars'}/ivy-*.jar)"
        )
    deps = []
    for coordinate in coordinates:
        org, name, rev = coordinate.split(":")
        deps.append(
            f"<dependency org={quoteattr(org)} name={quoteattr(name)} rev={quoteattr(rev)}"
            f' transitive="{str(transitive).lower()}" conf="default->default"/>'
        )
    ivy_file = dest / "ivy.xml"
    ivy_file.write_text(
        '<ivy-module version="2.0"><info organisation="lakelog" module="lakelog-jars"/>'
        f"<dependencies>{''.join(deps)}</dependencies></ivy-module>",
        encoding="utf-8",
    )
    pattern = str(dest / "[organisation]+[artifact]-[revision](-[classifier]).[ext]")
    command = [java, "-cp", str(ivy_jars[-1]), "org.apache.ivy.Main", "-ivy", str(ivy_file), "-confs", "default"]
    command += ["-cache", str(ivy_cache()), "-retrieve", pattern, "-types", "jar", "-m2compatible"]
    ran = subprocess.run(command, capture_output=True, text=True)
    ivy_file.unlink()
    if ran.returncode != 0 or "unresolved dependency" in ran.stdout or "UNRESOLVED" in ran.stdout:
        detail = [line.strip() for line in (ran.stdout + ran.stderr).splitlines() if "::" in line or "ERROR" in line]
        raise StoreError(
            f"could not resolve {', '.join(coordinates)} through Ivy from Maven Central: "
            + ("; ".join(detail[-6:]) or f"ivy exited with {ran.returncode}")
        )
    found = []
    for path in sorted(dest.glob("*+*.jar")):
        org, rest = path.name.split("+", 1)
        found.append((org, _artifact_id(rest), path))
    return found


def _artifact_id(file_name: str) -> str:
    """The artifact id of ``<artifact>-<revision>[-<classifier>].jar`` (revisions start with a digit)."""
    parts = file_name.removesuffix(".jar").split("-")
    first_version = next((i for i, part in enumerate(parts) if i and part[:1].isdigit()), len(parts))
    return "-".join(parts[:first_version])


def java_tool(name: str) -> str | None:
    """Path of a JDK tool (``java``, ``javac``): ``$JAVA_HOME/bin`` first, then PATH; None if absent."""
    home = os.environ.get("JAVA_HOME")
    places = [str(Path(home) / "bin") if home else None, os.environ.get("PATH")]
    return shutil.which(name, path=os.pathsep.join(filter(None, places)))


def lakelog_jar() -> Path:
    """lakelog's JVM library inside the installed package (built from jvm/src when the wheel is built,
    or by ``make setup`` in a checkout). Raises :class:`StoreError` if it is missing."""
    path = jvm.jar_path()
    if not path.exists():
        raise StoreError(
            f"lakelog's JVM library is missing ({path}): in a checkout run `make setup` "
            "(or `python jvm/build_jar.py`); a wheel ships it built"
        )
    return path
