"""The README's first command: a whole round trip on a local store, without starting Spark.

Creates (or re-creates) the topic ``quickstart``, produces keyed records,
consumes them back in a consumer group, prints end offsets and the store's
history, and reads the topic's rows with delta-rs, as any Delta reader would.
Its last step (:func:`run_kafka_quickstart`) starts ``lakelog serve`` in this
process on a free loopback port, sends one record with a Kafka client
(aiokafka) and fetches the partition back with it: Kafka clients and
lakelog's own see one log with the same offsets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from lakelog.kafka_endpoint import event_loop
from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.listeners import Listener
from lakelog.kafka_endpoint.server import Server
from lakelog.store import Store

TOPIC = "quickstart"


def run_quickstart(path: str, out: Callable[[str], None] = print) -> None:
    store = Store.open(path)
    out(f"store: {store.uri}")
    if TOPIC in store.list_topics():
        store.delete_topic(TOPIC)
    store.create_topic(TOPIC, partitions=3, config={"retention.ms": 7 * 24 * 3600 * 1000})
    out(f"created topic {TOPIC!r} with 3 partitions")

    users = ["alice", "bob", "carol", "alice", "dave", "bob", "alice", "erin", "carol"]
    with store.producer(**{"client.id": "quickstart", "linger.ms": 20}) as producer:
        futures = [producer.send(TOPIC, value=f"order {i} for {user}", key=user) for i, user in enumerate(users)]
        producer.flush()
        for future in futures:
            md = future.get()
            out(f"acknowledged: partition {md.partition} offset {md.offset}")

    out("consumed by group 'quickstart-readers', per partition in offset order:")
    consumer = store.consumer("quickstart-readers", auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.subscribe([TOPIC])
    records = []
    while len(records) < len(users):
        batch = consumer.poll(timeout_ms=5000)
        if not batch:
            break
        records += batch
    consumer.commit()
    consumer.close()
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out(f"  {r.partition}  {r.offset}  {r.key.decode():<6} {r.value.decode()}")
    out(f"end offsets: {store.end_offsets(TOPIC)}")
    out("history:")
    for entry in store.history_entries(TOPIC):
        ranges = ", ".join(f"{t}-{p}:{s}..{e - 1}" for t, p, s, e in entry.ranges)
        out(f"  v{entry.version}  {entry.operation:<13} {entry.client_id or '':<12} {ranges}")

    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    # delta-rs' own SQL engine: DeltaTable.to_pyarrow_table() scans through a pyarrow dataset
    # whose threads can abort the interpreter at exit (delta-io/delta-rs#2184, apache/arrow#34314).
    counted = (
        QueryBuilder()
        .register("log", DeltaTable(store.uri))
        .execute(f"SELECT count(*) AS n FROM log WHERE topic = '{TOPIC}'")
    )
    rows = pa.table(counted.read_all()).column("n")[0].as_py()
    out(f"the same topic read as a plain Delta table (delta-rs): {rows} rows")
    store.close()


class _Agent:
    """``lakelog serve`` on a thread of its own (its event loop), until stop()."""

    def __init__(self, store: Store) -> None:
        self.loop = event_loop.new_event_loop(store.settings.serve)
        self.server = Server(lambda port: Endpoint(store, "127.0.0.1", port), [Listener("PLAINTEXT", "127.0.0.1", 0)])
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


def run_kafka_quickstart(store: Store, topic: str, out: Callable[[str], None] = print) -> None:
    agent = _Agent(store)
    out(f"lakelog serve: Kafka protocol on {agent.bootstrap} (`lakelog --store ... serve` runs it on its own)")
    try:
        asyncio.run(_round_trip(agent.bootstrap, topic, out))
    finally:
        agent.stop()
