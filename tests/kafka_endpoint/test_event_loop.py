"""serve.event.loop: the agent on uvloop's event loop (the default) or asyncio's, both serving
a real Kafka client; uvloop missing falls back to asyncio's with a warning (an unknown value is
refused as serve.cpu.affinity's is: tests/kafka_endpoint/test_cpu_affinity.py)."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest
import uvloop
from confluent_kafka import Consumer, Producer

from lakelog.kafka_endpoint.event_loop import new_event_loop, run
from tests.kafka_endpoint.conftest import Agent


def test_uvloop_by_name_and_asyncio_by_name():
    for name, kind in (("uvloop", uvloop.Loop), ("asyncio", asyncio.BaseEventLoop)):
        loop = new_event_loop({"serve.event.loop": name})
        try:
            assert isinstance(loop, kind)
            assert isinstance(loop, uvloop.Loop) == (name == "uvloop")
        finally:
            loop.close()


def test_without_uvloop_the_agent_gets_asyncios_loop_and_a_warning(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: importing it raises ImportError
    with caplog.at_level(logging.WARNING, logger="lakelog.kafka_endpoint.event_loop"):
        loop = new_event_loop({"serve.event.loop": "uvloop"})
    try:
        assert not isinstance(loop, uvloop.Loop) and isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()
    assert "uvloop cannot be imported" in caplog.text


@pytest.mark.parametrize("name", ["uvloop", "asyncio"])
def test_run_returns_what_the_coroutine_returns_and_raises_what_it_raises(name):
    async def answer() -> tuple[bool, int]:
        await asyncio.sleep(0)
        return isinstance(asyncio.get_running_loop(), uvloop.Loop), 42

    assert run(answer(), {"serve.event.loop": name}) == (name == "uvloop", 42)

    async def fail() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        run(fail(), {"serve.event.loop": name})


def _maps_uvloop(pid: int) -> bool:
    return "uvloop/loop." in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize("name", ["default", "uvloop", "asyncio"])
def test_the_agent_serves_a_kafka_client_on_the_loop_the_setting_names(plain_store, tmp_path, name):
    plain_store.create_topic("t", partitions=2)
    conf = None
    if name != "default":
        conf = tmp_path / "lakelog.conf"
        conf.write_text(f"serve.event.loop {name}\n")
    agent = Agent(Path(plain_store.uri.removeprefix("file://")), conf=conf)
    try:
        producer = Producer({"bootstrap.servers": agent.bootstrap, "linger.ms": 1})
        sent = {f"v{i}".encode() for i in range(300)}
        for i, value in enumerate(sorted(sent)):
            producer.produce("t", value, partition=i % 2)
        assert producer.flush(60) == 0
        consumer = Consumer(
            {"bootstrap.servers": agent.bootstrap, "group.id": f"g-{name}", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["t"])
        got: set[bytes] = set()
        for _ in range(60):
            for message in consumer.consume(500, timeout=1):
                assert message.error() is None, message.error()
                got.add(message.value())
            if got >= sent:
                break
        consumer.close()
        assert got == sent
        if Path(f"/proc/{agent.proc.pid}/maps").exists():
            assert _maps_uvloop(agent.proc.pid) == (name != "asyncio")
    finally:
        assert agent.stop() == 0
