"""What the framework tests need beside :mod:`benchmarks.java_programs` (the Java programs'
builder and runner, shared with the perf verbs): Kafka Connect workers' settings and REST API."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from benchmarks.java_programs import JavaProgram

# The workers' config, offset and status topics.
INTERNAL_TOPICS = ("connect-configs", "connect-offsets", "connect-status")


def worker_properties(bootstrap: str, port: int) -> str:
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": "lakelog-connect",
        "config.storage.topic": INTERNAL_TOPICS[0],
        "offset.storage.topic": INTERNAL_TOPICS[1],
        "status.storage.topic": INTERNAL_TOPICS[2],
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        "status.storage.partitions": "3",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "offset.flush.interval.ms": "500",
        # A worker that leaves gets its connectors back if it returns within this long (KIP-415);
        # Kafka's 5 minutes would hold them unassigned for the whole test.
        "scheduled.rebalance.max.delay.ms": "2000",
        "heartbeat.interval.ms": "1000",
        "session.timeout.ms": "10000",
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def rest(url: str, method: str = "GET", body: dict | None = None, timeout_s: float = 5.0) -> Any:
    """One REST call. Short: a worker whose herder died keeps accepting connections and never
    answers, and :func:`until` notices a failed worker only between calls (a create that timed
    out but landed is a 409 "already exists" the next time, which :func:`_create` accepts)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        text = response.read().decode()
    return json.loads(text) if text else None


def until(workers: JavaProgram, what: str, probe: Any, timeout_s: float = 90.0) -> Any:
    """``probe()``'s first truthy answer (REST errors count as not yet); fails at once when the
    workers' JVM exited or a worker failed to start."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        if workers.proc.poll() is not None or workers.events("FAILED"):
            raise workers.fail(f"stopped while waiting for {what}")
        try:
            found = probe()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            found, last = None, exc
        if found:
            return found
        time.sleep(0.5)
    raise workers.fail(f"no {what} within {timeout_s:.0f}s (last: {last!r})")
