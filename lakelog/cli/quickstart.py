"""The README's first command: a whole round trip on a local store, without starting Spark.

Creates (or re-creates) the topic ``quickstart``, produces keyed records,
consumes them back in a consumer group, prints end offsets and the store's
history, and reads the topic's rows with delta-rs, as any Delta reader would.
"""

from __future__ import annotations

from collections.abc import Callable

TOPIC = "quickstart"


def run_quickstart(path: str, out: Callable[[str], None] = print) -> None:
    from lakelog.store import Store

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
