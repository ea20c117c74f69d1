"""The README's first command: a whole round trip on a local store.

Creates (or re-creates) the topic ``quickstart``, produces keyed records,
reads them back as a DataFrame, prints end offsets and the store's history.
"""

from __future__ import annotations

from collections.abc import Callable

TOPIC = "quickstart"


def run_quickstart(path: str, out: Callable[[str], None] = print) -> None:
    from engine.store import LogStore

    store = LogStore.open(path)
    out(f"store: {store.uri}")
    if TOPIC in store.list_topics():
        store.delete_topic(TOPIC)
    store.create_topic(TOPIC, partitions=3, config={"retention.ms": 7 * 24 * 3600 * 1000})
    out(f"created topic {TOPIC!r} with 3 partitions")

    with store.producer(**{"client.id": "quickstart", "linger.ms": 20}) as producer:
        futures = [
            producer.send(TOPIC, value=f"order {i} for {user}", key=user)
            for i, user in enumerate(["alice", "bob", "carol", "alice", "dave", "bob", "alice", "erin", "carol"])
        ]
        producer.flush()
        for future in futures:
            md = future.get()
            out(f"acknowledged: partition {md.partition} offset {md.offset}")

    out("records, per partition in offset order:")
    rows = (
        store.read(TOPIC)
        .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        .orderBy("partition", "offset")
        .collect()
    )
    for row in rows:
        out(f"  {row.partition}  {row.offset}  {row.key:<6} {row.value}")
    out(f"end offsets: {store.end_offsets(TOPIC)}")
    out("history:")
    for entry in store.history_entries(TOPIC):
        ranges = ", ".join(f"{t}-{p}:{s}..{e - 1}" for t, p, s, e in entry.ranges)
        out(f"  v{entry.version}  {entry.operation:<13} {entry.client_id or '':<12} {ranges}")
    store.close()
