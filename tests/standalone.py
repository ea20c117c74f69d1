"""A Spark standalone cluster on loopback, started from the installed PySpark.

One master and one worker, each a ``spark-class`` JVM process (Spark's
"Starting a Cluster Manually": ``spark-class org.apache.spark.deploy.master.Master``
/ ``...worker.Worker spark://host:port``), with every port chosen free and
the web UIs off. Executors run Python workers with this venv's interpreter,
so they import lakelog as the driver does. Used by tests/test_cluster.py and
by ``python -m tests.standalone`` (prints the master URL and waits).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyspark

from benchmarks.kafka_reference import free_ports

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    return free_ports(1)[0]


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    handle = log.open("wb")
    return subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=handle, stderr=subprocess.STDOUT, env=env
    )


def _wait_for(condition, what: str, processes: list[subprocess.Popen], logs: list[Path], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        for p, log in zip(processes, logs, strict=True):
            if p.poll() is not None:
                raise RuntimeError(f"{what}: a cluster process exited with {p.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)
    tails = "\n".join(log.read_text()[-2000:] for log in logs)
    raise TimeoutError(f"{what} within {timeout_s} s\n{tails}")


@contextmanager
def standalone_cluster(
    cores: int = 2, memory: str = "2g", timeout_s: float = 120, base_env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Start a master and a worker; yield the master URL (``spark://127.0.0.1:port``); stop both.

    The processes (and so the executors) get ``base_env`` (default: this process's environment).
    """
    work = Path(tempfile.mkdtemp(prefix="lakelog-standalone-"))
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {
        **(os.environ if base_env is None else base_env),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_MASTER_OPTS": "-Dspark.ui.enabled=false",
        "SPARK_WORKER_OPTS": "-Dspark.ui.enabled=false",
    }
    logs = [work / "master.log", work / "worker.log"]
    master = _spawn(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(free_port()),
        ],
        logs[0],
        env,
    )
    processes = [master]
    try:
        _wait_for(
            lambda: "I have been elected leader" in logs[0].read_text(), "master start", processes, logs[:1], timeout_s
        )
        worker = _spawn(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(work / "worker"),
            ],
            logs[1],
            env,
        )
        processes.append(worker)
        _wait_for(
            lambda: "Successfully registered with master" in logs[1].read_text(),
            "worker registration",
            processes,
            logs,
            timeout_s,
        )
        yield url
    finally:
        for p in reversed(processes):
            p.terminate()
        for p in processes:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    with standalone_cluster() as master_url:
        print(master_url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
