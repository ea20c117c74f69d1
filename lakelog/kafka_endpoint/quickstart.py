"""The quickstart's last step: the same topic through the Kafka protocol.

Starts ``lakelog serve`` in this process on a free loopback port, sends one
record with a Kafka client (aiokafka) and fetches the partition back with
it: Kafka clients and lakelog's own see one log with the same offsets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


class _Agent:
    """``lakelog serve`` on a thread of its own (its event loop), until stop()."""

    def __init__(self, store: Any) -> None:
        from lakelog.kafka_endpoint.endpoint import Endpoint
        from lakelog.kafka_endpoint.server import Server

        self.loop = asyncio.new_event_loop()
        self.server = Server(lambda port: Endpoint(store, "127.0.0.1", port), "127.0.0.1", 0)
        self.loop.run_until_complete(self.server.start())
        self.thread = threading.Thread(target=self.loop.run_forever, name="lakelog-quickstart-serve", daemon=True)
        self.thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(60)
        self.loop.close()


async def _round_trip(bootstrap: str, topic: str, out: Callable[[str], None]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="quickstart-kafka")
    await producer.start()
    try:
        sent = await producer.send_and_wait(topic, b"order 9 for frank (via Kafka)", key=b"frank")
    finally:
        await producer.stop()
    out(f"a Kafka client (aiokafka) sent a record: acknowledged at partition {sent.partition} offset {sent.offset}")
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_id="quickstart-kafka")
    await consumer.start()
    try:
        tp = TopicPartition(topic, sent.partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        fetched = []
        while not fetched or fetched[-1].offset < sent.offset:
            batch = await consumer.getmany(tp, timeout_ms=5000)
            if not batch:
                break
            fetched += batch[tp]
    finally:
        await consumer.stop()
    out(f"and fetched partition {sent.partition} back through the Kafka protocol:")
    for m in fetched:
        out(f"  {m.partition}  {m.offset}  {m.key.decode():<6} {m.value.decode()}")


def run_kafka_quickstart(store: Any, topic: str, out: Callable[[str], None] = print) -> None:
    agent = _Agent(store)
    out(f"lakelog serve: Kafka protocol on {agent.bootstrap} (`lakelog --store ... serve` runs it on its own)")
    try:
        asyncio.run(_round_trip(agent.bootstrap, topic, out))
    finally:
        agent.stop()
