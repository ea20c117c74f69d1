"""The built wheel works alone: installed with the pip a stock ``venv`` ships (no upgrade) into a new
virtualenv outside the checkout, with a fresh home directory, ``lakelog quickstart`` runs, the shell
tools round-trip records, ``lakelog perf`` says it needs a checkout (the wheel holds no benchmark), and
a SparkSession reads and writes ``format("lakelog")`` with Delta's jars
resolved through Ivy into that home and lakelog's JVM library from inside the wheel; nothing is
written under ``~/.m2``.

pip's download cache is the machine's (PIP_CACHE_DIR), so PySpark is not fetched again; everything
else about the home directory is new."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def run(args, *, env, cwd, timeout=900, stdin=None):
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, input=stdin)
    assert done.returncode == 0, f"{args} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def pip_cache() -> str:
    return subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("wheel")
    wheels = work / "dist"
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)]
    run(build, env=os.environ, cwd=work)
    (wheel,) = wheels.glob("lakelog-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "lakelog/jvm/lakelog-jvm.jar" in names
    # Producer.send's compiled path (record_queue.pyx) is built into the wheel, not left to the user.
    assert [n for n in names if n.startswith("lakelog/engine/produce/record_queue.") and n.endswith(".so")], names
    # So is the agent's record reader (record_columns.pyx).
    assert [n for n in names if n.startswith("lakelog/kafka_endpoint/record_columns.") and n.endswith(".so")], names
    assert {n.split("/")[0] for n in names if not n.startswith("lakelog-")} == {"lakelog"}, "only lakelog/ installs"
    # Benchmarks and the Kafka reference broker are the checkout's (benchmarks/), not a user's.
    assert not [n for n in names if "benchmarks" in n or "kafka_reference" in n or "kafka-reference" in n], names

    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)  # the pip ensurepip bundles, not upgraded
    home = work / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "PATH": f"{env_dir / 'bin'}{os.pathsep}/usr/bin:/bin",
        "PIP_CACHE_DIR": pip_cache(),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "LANG": "C.UTF-8",
    }
    for key in ("JAVA_HOME", "PIP_CERT", "SSL_CERT_FILE", "PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_DEFAULT_TIMEOUT"):
        if key in os.environ:
            env[key] = os.environ[key]
    run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], env=env, cwd=work)
    outside = work / "outside"
    outside.mkdir()
    return env_dir, env, outside, home


def test_quickstart_runs_from_the_wheel_outside_the_checkout(installed):
    env_dir, env, outside, home = installed
    done = run([str(env_dir / "bin" / "lakelog"), "quickstart", "--store", "my-store"], env=env, cwd=outside)
    assert "end offsets: {0: 5, 1: 1, 2: 3}" in done.stdout
    assert "fetched partition 1 back through the Kafka protocol" in done.stdout
    assert (outside / "my-store" / "_delta_log").is_dir()
    assert not (home / ".m2").exists()


def test_shell_tools_round_trip_records(installed):
    env_dir, env, outside, _ = installed
    lakelog = str(env_dir / "bin" / "lakelog")
    run([lakelog, "--store", "tools", "topics", "create", "events", "--partitions", "2"], env=env, cwd=outside)
    run([lakelog, "--store", "tools", "produce", "events"], env=env, cwd=outside, stdin="one\ntwo\nthree\n")
    done = run(
        [lakelog, "--store", "tools", "consume", "events", "--from-beginning", "--max-messages", "3"],
        env=env,
        cwd=outside,
    )
    assert sorted(line.rsplit("\t", 1)[-1] for line in done.stdout.splitlines()) == ["one", "three", "two"]


def test_perf_says_it_needs_a_checkout(installed):
    env_dir, env, outside, _ = installed
    done = subprocess.run(
        [str(env_dir / "bin" / "lakelog"), "perf", "commit", "--sections", "latency"],
        env=env,
        cwd=outside,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "lakelog perf runs from a lakelog checkout" in done.stderr
    assert "Traceback" not in done.stderr


SPARK_ROUND_TRIP = """
import lakelog
store = lakelog.Store.open("spark-store")
store.create_topic("t", partitions=2)
with store.producer() as producer:
    for i in range(10):
        producer.send("t", value=f"v{i}".encode(), key=f"k{i % 3}".encode())
spark = store.spark
spark.createDataFrame([("a", "x"), ("b", "y")], ["key", "value"]).write.format("lakelog").option(
    "path", store.uri).option("topic", "t").mode("append").save()
rows = spark.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load()
print("count", rows.count(), "jars", spark.sparkContext.getConf().get("spark.jars"))
store.close()
"""


def test_spark_reads_and_writes_with_jars_from_ivy_and_the_wheel(installed):
    env_dir, env, outside, home = installed
    done = run([str(env_dir / "bin" / "python"), "-c", SPARK_ROUND_TRIP], env=env, cwd=outside)
    line = next(line for line in done.stdout.splitlines() if line.startswith("count "))
    assert line.split()[1] == "12"
    jars = line.split()[3].split(",")
    assert any(j.startswith(str(home / ".cache" / "lakelog" / "jars")) and "delta-spark_" in j for j in jars)
    assert any(j.startswith(str(env_dir)) and j.endswith("lakelog/jvm/lakelog-jvm.jar") for j in jars)
    assert (home / ".ivy2.5.2" / "cache" / "io.delta").is_dir(), "Delta's jars come through the user's Ivy cache"
    assert not (home / ".m2").exists()
