"""serve.cpu.affinity: the agent's threads on one CPU (kafka_endpoint.cpu_affinity), or left to
the operating system."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from lakelog.kafka_endpoint.cpu_affinity import chosen_cpu, running_on, yield_on_wake
from tests.kafka_endpoint.conftest import Agent


def test_the_cpu_chosen_is_the_one_running_on_when_allowed_else_the_lowest_allowed():
    assert chosen_cpu({0, 1, 2, 3}, 2) == 2
    assert chosen_cpu({4, 6}, 1) == 4  # running on a CPU no longer allowed
    assert chosen_cpu({4, 6}, None) == 4  # unknown
    assert chosen_cpu({3}, 3) is None  # one CPU allowed: nothing to choose
    assert chosen_cpu(set(), None) is None


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_the_cpu_running_on_is_read_from_proc_and_is_one_this_thread_may_use():
    cpu = running_on()
    assert isinstance(cpu, int) and cpu in os.sched_getaffinity(0)


def _threads_cpus(pid: int) -> dict[str, str]:
    """Each thread of ``pid`` (name and id) -> its Cpus_allowed_list, as /proc shows it."""
    found = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except FileNotFoundError:
            continue  # ended meanwhile
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        found[f"{fields['Name'].strip()}/{task}"] = fields["Cpus_allowed_list"].strip()
    return found


def _batch_threads(pid: int) -> set[int]:
    """The threads of ``pid`` whose scheduling policy is SCHED_BATCH."""
    found = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            if os.sched_getscheduler(int(task)) == os.SCHED_BATCH:
                found.add(int(task))
        except ProcessLookupError:
            continue  # ended meanwhile
    return found


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(200):
        producer.produce("t", f"v{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0


def _allowed_list(cpus: set[int]) -> str:
    """Linux's Cpus_allowed_list of ``cpus`` (ranges of consecutive CPUs as a-b)."""
    ordered, runs = sorted(cpus), []
    for cpu in ordered:
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux only")
def test_a_thread_that_yields_on_wake_is_sched_batch_and_so_are_the_threads_it_starts():
    seen: dict[str, int] = {}

    def child() -> None:
        seen["child"] = os.sched_getscheduler(0)

    def yielding() -> None:
        yield_on_wake()
        seen["self"] = os.sched_getscheduler(0)
        started = threading.Thread(target=child)
        started.start()
        started.join()

    thread = threading.Thread(target=yielding)
    thread.start()
    thread.join()
    assert seen == {"self": os.SCHED_BATCH, "child": os.SCHED_BATCH}
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the thread that started it is as it was


needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="pinning to one CPU needs a process that may use two",
)


@needs_two_cpus
def test_by_default_every_thread_of_the_agent_runs_on_one_cpu(plain_store):
    plain_store.create_topic("t", partitions=2)
    agent = Agent(Path(plain_store.uri.removeprefix("file://")))
    try:
        _produce(agent.bootstrap)  # commit, group, sync and checkpoint threads are running now
        threads = _threads_cpus(agent.proc.pid)
        assert len(threads) >= 4, threads
        assert len(set(threads.values())) == 1, threads  # one CPU for all, those started later too
        (cpu,) = set(threads.values())
        assert cpu.isdigit() and int(cpu) in os.sched_getaffinity(0), threads
        # The group thread yields on wake (and what it starts, such as a pool of pyarrow's); the
        # event loop does not.
        batch = _batch_threads(agent.proc.pid)
        assert batch and agent.proc.pid not in batch, (batch, threads)
        assert os.sched_getscheduler(agent.proc.pid) == os.SCHED_OTHER
    finally:
        assert agent.stop() == 0


@needs_two_cpus
def test_serve_cpu_affinity_all_leaves_the_agents_threads_where_the_system_places_them(plain_store, tmp_path):
    plain_store.create_topic("t", partitions=2)
    conf = tmp_path / "lakelog.conf"
    conf.write_text("serve.cpu.affinity all\n")
    agent = Agent(Path(plain_store.uri.removeprefix("file://")), conf=conf)
    try:
        _produce(agent.bootstrap)
        threads = _threads_cpus(agent.proc.pid)
        assert set(threads.values()) == {_allowed_list(os.sched_getaffinity(0))}, threads
        assert _batch_threads(agent.proc.pid) == set(), threads  # every thread left as it starts
    finally:
        assert agent.stop() == 0


@pytest.mark.parametrize(("key", "value"), [("serve.cpu.affinity", "two"), ("serve.event.loop", "trio")])
def test_an_unknown_serve_choice_is_refused_by_name_before_serving(plain_store, tmp_path, key, value):
    conf = tmp_path / "lakelog.conf"
    conf.write_text(f"{key} {value}\n")
    with pytest.raises(AssertionError, match=rf"invalid value '{value}' for config '{key}': must be one of"):
        Agent(Path(plain_store.uri.removeprefix("file://")), conf=conf)
