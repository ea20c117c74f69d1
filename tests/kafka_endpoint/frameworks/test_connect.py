"""Kafka Connect (connect-runtime 4.4) in distributed mode, two workers, against a real Kafka
broker and against ``lakelog serve``: the workers create their config, offset and status topics
(compacted) on the target and join one group; Kafka's file source connector copies a file into a
topic and its file sink copies the topic into another file, every line once; after both workers
restart the connectors' configs and the source's offsets are read back (nothing copied twice)
(issue 31)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from benchmarks.java_programs import CONNECT_WORKERS, JavaProgram, stopped_after
from benchmarks.kafka_reference import free_ports
from tests.kafka_endpoint.frameworks.conftest import Target, against_kafka_and_lakelog
from tests.kafka_endpoint.frameworks.harness import rest, until, worker_properties

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

WORKERS = 2
TOPIC = "connect-lines"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@against_kafka_and_lakelog()
def test_two_distributed_workers_copy_every_line_once_across_a_restart(target: Target, tmp_path: Path) -> None:
    ports = free_ports(WORKERS)
    files = []
    for n, port in enumerate(ports):
        path = tmp_path / f"worker-{n}.properties"
        path.write_text(worker_properties(target.bootstrap, port))
        files.append(str(path))
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line-{i}" for i in range(500)]
    source_file.write_text("".join(f"{line}\n" for line in lines))
    target.create_topic(TOPIC, 1)

    with stopped_after([]) as programs:
        workers = JavaProgram(
            CONNECT_WORKERS,
            tmp_path,
            "connect",
            args=files,
            log_levels={"org.apache.kafka.connect.runtime.distributed": "INFO"},
        )
        programs.append(workers)
        workers.wait_for(lambda w: len(w.events("STARTED")) == WORKERS, 120, "both workers started")
        # Through the second worker: a follower forwards to the leader, so both must have joined.
        connectors = {
            "file-source": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1",
                "file": str(source_file),
                "topic": TOPIC,
            },
            "file-sink": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "file": str(sink_file),
                "topics": TOPIC,
            },
        }
        for name, config in connectors.items():
            until(workers, f"connector {name} created", lambda n=name, c=config: _create(urls[1], n, c))

        def running_on_both_workers() -> bool:
            where = set()
            for name in connectors:
                status = rest(f"{urls[0]}/connectors/{name}/status")
                states = [status["connector"]] + status["tasks"]
                if not status["tasks"] or any(s["state"] != "RUNNING" for s in states):
                    return False
                where |= {s["worker_id"] for s in states}
            return len(where) == WORKERS

        until(workers, "both connectors RUNNING, spread over both workers", running_on_both_workers)
        until(workers, "every line in the sink's file", lambda: len(_lines(sink_file)) >= len(lines))
        assert sorted(_lines(sink_file)) == sorted(lines)

        # Both workers stop (leaving the group) and start again: the connectors come back from
        # the config topic, the source resumes from its offsets in the offset topic.
        for n in range(WORKERS):
            workers.send(f"stop {n}")
            workers.wait_for(lambda w, n=n: [str(n)] in w.events("STOPPED"), 60, f"worker {n} stopped")
        more = [f"line-{i}" for i in range(500, 700)]
        with open(source_file, "a") as out:
            out.write("".join(f"{line}\n" for line in more))
        for n in range(WORKERS):
            workers.send(f"start {n}")
        workers.wait_for(lambda w: len(w.events("STARTED")) == 2 * WORKERS, 120, "both workers started again")
        listed = until(workers, "the connectors listed again", lambda: rest(f"{urls[1]}/connectors"))
        assert sorted(listed) == sorted(connectors)
        until(workers, "every new line in the sink's file", lambda: len(_lines(sink_file)) >= len(lines + more))
        time.sleep(2)  # anything copied twice would arrive now
        assert sorted(_lines(sink_file)) == sorted(lines + more)
        copied = sorted(value.decode() for _, value, _, _ in target.read_all(TOPIC))
        assert copied == sorted(lines + more)


def _create(url: str, name: str, config: dict[str, str]) -> bool:
    try:
        rest(f"{url}/connectors", "POST", {"name": name, "config": config})
    except urllib.error.HTTPError as exc:
        if exc.code == 409 and "already exists" in exc.read().decode():
            return True
        raise
    return True
