"""Compile lakelog's JVM library (jvm/src) into lakelog/jvm/lakelog-jvm.jar, the jar the package ships.

Run by ``make setup`` in a checkout and by the build backend (jvm/build_backend.py) when a wheel is built
and the jar is missing or older than its sources. Needs ``javac`` (JDK 17) and PySpark importable (its
jars are the compile class path); Delta's LogStore API (delta-storage), hadoop-aws and protobuf-java
come from Maven Central through Ivy, without their dependencies. Nothing is written under ``~/.m2``.

Usage: python jvm/build_jar.py [--if-stale]
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "jvm" / "src" / "main"
JAR = ROOT / "lakelog" / "jvm" / "lakelog-jvm.jar"


def inputs() -> list[Path]:
    return sorted(p for p in SOURCES.rglob("*") if p.is_file())


def stale() -> bool:
    """Whether the jar is missing or older than a source file."""
    if not JAR.exists():
        return True
    built = JAR.stat().st_mtime
    return any(p.stat().st_mtime > built for p in [*inputs(), Path(__file__)])


def pinned(distribution: str) -> str:
    """The version pyproject.toml pins ``distribution`` to (``name==version``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for requirement in project["dependencies"]:
        match = re.fullmatch(rf"{re.escape(distribution)}\s*==\s*([\w.]+)", requirement.strip())
        if match:
            return match.group(1)
    raise SystemExit(f"pyproject.toml pins no {distribution}==<version>")


def jvm_jars() -> types.ModuleType:
    """lakelog.jvm.jars without running lakelog's package __init__ files, which import the
    engine's dependencies (a wheel's build environment has only PySpark)."""
    for name in ("lakelog", "lakelog.engine"):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(ROOT.joinpath(*name.split(".")))]
            sys.modules[name] = package
    return importlib.import_module("lakelog.jvm.jars")


def build() -> Path:
    jars = jvm_jars()
    javac = jars.java_tool("javac")
    if javac is None:
        raise SystemExit("building lakelog's JVM library needs javac (a JDK 17) on PATH or in JAVA_HOME")
    coordinates = (
        f"io.delta:delta-storage:{pinned('delta-spark')}",
        f"org.apache.hadoop:hadoop-aws:{jars.hadoop_version()}",
        *jars.protobuf_jar_set().coordinates,
    )
    with tempfile.TemporaryDirectory(prefix="lakelog-jvm-build-") as tmp:
        work = Path(tmp)
        (work / "deps").mkdir()
        (work / "classes").mkdir()
        jars.ivy_retrieve(coordinates, work / "deps", transitive=False)
        classpath = os.pathsep.join([str(jars.pyspark_home() / "jars" / "*"), str(work / "deps" / "*")])
        sources = [str(p) for p in (SOURCES / "java").rglob("*.java")]
        command = [javac, "-nowarn", "--release", "17", "-d", str(work / "classes"), "-cp", classpath, *sources]
        subprocess.run(command, check=True)
        shutil.copytree(SOURCES / "resources", work / "classes", dirs_exist_ok=True)
        JAR.parent.mkdir(parents=True, exist_ok=True)
        partial = JAR.with_suffix(".jar.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            manifest = "Manifest-Version: 1.0\r\nCreated-By: lakelog jvm/build_jar.py\r\n\r\n"
            jar.writestr("META-INF/MANIFEST.MF", manifest)
            for path in sorted((work / "classes").rglob("*")):
                if path.is_file():
                    jar.write(path, path.relative_to(work / "classes").as_posix())
        partial.replace(JAR)
    return JAR


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--if-stale", action="store_true", help="do nothing when the jar is newer than its sources")
    args = parser.parse_args()
    if args.if_stale and not stale():
        return
    print(f"built {build()}")


if __name__ == "__main__":
    main()
