"""An agent (``lakelog serve``) in a process of its own, on a free loopback port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Agent:
    """``lakelog serve`` over ``store`` on ``port`` (0: a free one); its log (stderr) goes to
    ``log`` when given (an agent that lives long and logs much must not fill a pipe nobody reads);
    ``serve_args``: more ``lakelog serve`` arguments."""

    def __init__(
        self,
        store: Path,
        port: int = 0,
        log: Path | None = None,
        listen: list[str] | None = None,
        conf: Path | None = None,
        metrics_listen: str | None = None,
        serve_args: tuple[str, ...] = (),
    ) -> None:
        """``listen``: listeners in Kafka's syntax instead of PLAINTEXT on ``port``; their bound
        addresses are :attr:`listeners` (protocol -> ``host:port``). ``conf``: a settings file.
        ``metrics_listen``: where to serve Prometheus metrics (:attr:`metrics`: their URL)."""
        self.store = store
        self.log = log
        stderr = subprocess.PIPE if log is None else open(log, "w")  # noqa: SIM115 -- the child's
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lakelog.cli",
                "--store",
                str(store),
                *(["--conf", str(conf)] if conf is not None else []),
                "serve",
                *[arg for spec in listen or [f"127.0.0.1:{port}"] for arg in ("--listen", spec)],
                *(["--metrics-listen", metrics_listen] if metrics_listen is not None else []),
                *serve_args,
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        if log is not None:
            stderr.close()  # the child has its own copy
        self.listeners: dict[str, str] = {}
        for _ in listen or [None]:
            line = self.proc.stdout.readline()
            found = re.search(r"on (127\.0\.0\.1):(\d+)(?: \((\w+)\))? ", line)
            if found is None:
                self.proc.kill()
                said = self.proc.stderr.read() if log is None else log.read_text()
                raise AssertionError(f"the agent did not start: {line!r} {said}")
            self.listeners[found.group(3) or "PLAINTEXT"] = f"{found.group(1)}:{found.group(2)}"
        self.bootstrap = next(iter(self.listeners.values()))
        self.metrics = None
        if metrics_listen is not None:
            self.metrics = re.search(r"(http://\S+)", self.proc.stdout.readline()).group(1)
        self.port = int(self.bootstrap.rsplit(":", 1)[1])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture
def agent(plain_store):
    plain_store.create_topic("t", partitions=2)
    started = Agent(Path(plain_store.uri.removeprefix("file://")))
    yield started
    started.stop()


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
