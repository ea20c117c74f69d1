"""Kafka Streams 4.4 (word count with a repartition topic and a state store with its changelog)
against a real Kafka broker and against ``lakelog serve``: the counts are exact, under
at_least_once and under exactly_once_v2 with a second instance joining mid-run and one
instance SIGKILLed and restarted (issue 31)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks.java_programs import WORD_COUNT, HarnessError, JavaProgram, stopped_after
from tests.kafka_endpoint.frameworks.conftest import Target, against_kafka_and_lakelog

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

PARTITIONS = 4
# Both subtopologies (split, count) have PARTITIONS tasks.
TASKS = 2 * PARTITIONS
VOCABULARY = [f"w{i:02d}" for i in range(40)]


def _lines(count: int, seed: int) -> list[str]:
    chosen = random.Random(seed)
    return [" ".join(chosen.choice(VOCABULARY) for _ in range(5)) for _ in range(count)]


def _expected(lines: Sequence[str]) -> dict[str, int]:
    return dict(Counter(word for line in lines for word in line.split()))


def _topics(target: Target, name: str) -> tuple[str, str]:
    source, sink = f"{name}-lines", f"{name}-counts"
    target.create_topic(source, PARTITIONS)
    target.create_topic(sink, PARTITIONS)
    return source, sink


def _word_count(
    target: Target,
    workdir: Path,
    app: str,
    name: str,
    source: str,
    sink: str,
    guarantee: str,
    log: str | None = None,
) -> JavaProgram:
    """An instance ``name`` (its state directory ``workdir/<name>-state``), logging to ``log``
    (default ``name``)."""
    return JavaProgram(
        WORD_COUNT,
        workdir,
        log or name,
        {
            "bootstrap.servers": target.bootstrap,
            "application.id": app,
            "input": source,
            "output": sink,
            "processing.guarantee": guarantee,
            "state.dir": str(workdir / f"{name}-state"),
            "commit.interval.ms": "200",
            "replication.factor": "1",
            # A SIGKILLed instance leaves the group within seconds, not Kafka's 45 s default.
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
        },
        log_levels={"org.apache.kafka.streams": "INFO", "org.apache.kafka.clients.consumer": "INFO"},
    )


def _latest_tasks(app: JavaProgram) -> set[str]:
    found = app.events("TASKS")
    return set(found[-1][0].split(",")) if found and found[-1] else set()


def _wait_for_counts(
    target: Target, sink: str, expected: dict[str, int], apps: Sequence[JavaProgram], timeout_s: float = 120.0
) -> None:
    """Read the output (read_committed) until the latest count of every word is the expected one;
    fail at once when an application reported a fatal error or exited."""
    import time

    deadline = time.monotonic() + timeout_s
    latest: dict[str, int] = {}
    while time.monotonic() < deadline:
        for app in apps:
            if app.events("FATAL") or app.proc.poll() is not None:
                raise app.fail("stopped while the counts were awaited")
        latest = {
            key.decode(): int.from_bytes(value, "big")
            for key, value, _, _ in target.read_all(sink, read_committed=True)
        }
        if latest == expected:
            return
        time.sleep(1.0)
    wrong = {w: (latest.get(w), n) for w, n in expected.items() if latest.get(w) != n}
    raise HarnessError(f"the counts (got, expected) differ for {len(wrong)} words within {timeout_s:.0f}s: {wrong}")


@against_kafka_and_lakelog()
def test_word_count_is_exact_at_least_once(target: Target, tmp_path: Path) -> None:
    source, sink = _topics(target, "alo")
    lines = _lines(2000, seed=1)
    target.produce(source, [line.encode() for line in lines])
    with stopped_after([]) as apps:
        app = _word_count(target, tmp_path, "wordcount-alo", "alo", source, sink, "at_least_once")
        apps.append(app)
        app.wait_for(lambda a: _latest_tasks(a) == set(_all_tasks()), 90, "RUNNING with every task")
        _wait_for_counts(target, sink, _expected(lines), [app])


def _all_tasks() -> list[str]:
    return [f"{sub}_{p}" for sub in (0, 1) for p in range(PARTITIONS)]


@against_kafka_and_lakelog()
def test_word_count_is_exact_with_exactly_once_v2_through_a_join_and_a_sigkill(target: Target, tmp_path: Path) -> None:
    source, sink = _topics(target, "eos")
    lines = _lines(3000, seed=2)
    parts = [lines[:1000], lines[1000:2000], lines[2000:]]
    app_id = "wordcount-eos"
    with stopped_after([]) as apps:
        first = _word_count(target, tmp_path, app_id, "eos-a", source, sink, "exactly_once_v2")
        apps.append(first)
        target.produce(source, [line.encode() for line in parts[0]])
        first.wait_for(lambda a: _latest_tasks(a) == set(_all_tasks()), 90, "RUNNING with every task")
        _wait_for_counts(target, sink, _expected(parts[0]), [first])

        # A second instance joins mid-run: the tasks are shared between the two.
        second = _word_count(target, tmp_path, app_id, "eos-b", source, sink, "exactly_once_v2")
        apps.append(second)
        second.wait_for(lambda a: len(_latest_tasks(a)) > 0, 90, "tasks of its own")
        first.wait_for(lambda a: 0 < len(_latest_tasks(a)) < TASKS, 60, "tasks moved to the second instance")
        target.produce(source, [line.encode() for line in parts[1]])
        _wait_for_counts(target, sink, _expected(parts[0] + parts[1]), [first, second])

        # The first instance is SIGKILLed (its open transaction is aborted when it comes back
        # with the same state directory, hence the same transactional ids) and restarted.
        first.kill()
        target.produce(source, [line.encode() for line in parts[2][:500]])
        first = _word_count(target, tmp_path, app_id, "eos-a", source, sink, "exactly_once_v2", log="eos-a-again")
        apps.append(first)
        first.wait_for(lambda a: len(_latest_tasks(a)) > 0, 120, "tasks after the restart")
        target.produce(source, [line.encode() for line in parts[2][500:]])
        _wait_for_counts(target, sink, _expected(lines), [first, second])
