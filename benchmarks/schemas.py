"""``lakelog perf schemas``: the Schema Registry of ``lakelog serve`` from a warm HTTP client.

A registry served in this process (as ``lakelog serve --schema-registry-listen`` serves it)
over a fresh local store; one client keeping its HTTP connection open (as confluent-kafka's
SchemaRegistryClient does, but without its cache: every call reaches the registry):

* register: ``schemas`` distinct Avro schemas under ``subjects`` subjects, one by one (each a
  Delta commit to ``_schemas``); p50 and p99;
* lookups by id (``GET /schemas/ids/{id}``) and by subject (``GET /subjects/{s}/versions/latest``
  and ``POST /subjects/{s}`` with a schema), ``lookups`` of each, ids and subjects at random;
  p50, p99 and requests/s.

Each request reads the store's latest ``_schemas`` records (a look at the Delta log; the
records themselves only when another writer added some). The store lives in a temporary
directory this tool removes.
"""

from __future__ import annotations

import http.client
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any


def _schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"R{n}", "fields": [{"name": "f", "type": "string"}]})


class _Client:
    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: Any = None) -> tuple[float, Any]:
        data = None if body is None else json.dumps(body)
        started = time.perf_counter()
        self.connection.request(
            method, path, body=data, headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}
        )
        response = self.connection.getresponse()
        answer = json.loads(response.read())
        elapsed_ms = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {answer}")
        return elapsed_ms, answer


def _summary(label: str, latencies_ms: list[float]) -> str:
    ordered = sorted(latencies_ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    rate = len(ordered) / (sum(ordered) / 1000) if sum(ordered) else float("inf")
    return (
        f"{label}: {len(ordered)} requests, p50 {statistics.median(ordered):.2f} ms, p99 {p99:.2f} ms, "
        f"{rate:,.0f} requests/s"
    )


def perf_schemas(
    *, schemas: int, subjects: int, lookups: int, work_dir: str | None, out: Callable[[str], None]
) -> dict[str, list[float]]:
    """Run the benchmark; print one line per measure and return the latencies (ms) by measure."""
    from benchmarks.scratch import scratch_dir
    from lakelog.schemas.rest import start_registry
    from lakelog.store import Store

    rng = random.Random(0)
    results: dict[str, list[float]] = {"register": [], "by id": [], "latest by subject": [], "lookup by subject": []}
    with scratch_dir("schemas", work_dir) as scratch:
        store = Store.open(f"{scratch}/store")
        server = start_registry(store.context, "127.0.0.1:0")
        try:
            client = _Client(server.port)
            client.call("PUT", "/config", {"compatibility": "NONE"})
            ids: dict[int, tuple[str, str]] = {}
            for n in range(schemas):
                subject = f"subject-{n % subjects}"
                elapsed, answer = client.call("POST", f"/subjects/{subject}/versions", {"schema": _schema(n)})
                results["register"].append(elapsed)
                ids[answer["id"]] = (subject, _schema(n))
            known = sorted(ids)
            for _ in range(lookups):
                schema_id = rng.choice(known)
                subject, text = ids[schema_id]
                results["by id"].append(client.call("GET", f"/schemas/ids/{schema_id}")[0])
                results["latest by subject"].append(client.call("GET", f"/subjects/{subject}/versions/latest")[0])
                results["lookup by subject"].append(client.call("POST", f"/subjects/{subject}", {"schema": text})[0])
        finally:
            server.shutdown()
            server.server_close()
            store.close()
    for label, latencies in results.items():
        out(_summary(label, latencies))
    return results


MATERIALIZE_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def perf_materialize(
    *, records: int, partitions: int, rounds: int, work_dir: str | None, out: Callable[[str], None]
) -> dict[str, list[float]]:
    """Typed materialization of ``records`` Avro records (``lakelog tables run``: format("lakelog")
    with valueFormat=avro into a Delta table) against the same Spark job decoding the raw topic
    with ``from_avro`` by hand; ``rounds`` interleaved rounds (the order alternates), each into a
    fresh table and checkpoint. Prints records/s (median) of both and their ratio; returns the
    records/s of each round by side."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    from benchmarks.scratch import scratch_dir
    from lakelog.schemas.rest import start_registry
    from lakelog.schemas.spark_columns import header
    from lakelog.spark_connector import typed_tables
    from lakelog.store import Store

    text = json.dumps(MATERIALIZE_SCHEMA)
    rates: dict[str, list[float]] = {"typed table": [], "from_avro by hand": []}
    with scratch_dir("materialize", work_dir) as scratch:
        store = Store.open(f"{scratch}/store")
        spark = store.spark
        server = start_registry(store.context, "127.0.0.1:0")
        try:
            schema_id = _Client(server.port).call("POST", "/subjects/orders-value/versions", {"schema": text})[1]["id"]
            store.create_topic("orders", partitions=partitions)
            record = F.struct(
                F.col("id"),
                F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")).alias("customer"),
                (F.col("id") / 100).alias("amount"),
                F.lit(None).cast("string").alias("note"),
            )
            # Confluent's framing around Spark's own Avro encoding of the schema registered above.
            framed = spark.range(records).select(
                F.concat(F.expr(header(schema_id)), to_avro(record, text)).alias("value")
            )
            started = time.perf_counter()
            store.write(framed, "orders")
            out(f"wrote {records:,} Avro records to {partitions} partitions in {time.perf_counter() - started:.1f} s")

            def typed(n: int) -> None:
                spec = typed_tables.typed_table(store.uri, "orders", f"{scratch}/typed-{n}", f"{scratch}/cp-typed-{n}")
                typed_tables.run(spark, spec)

            def by_hand(n: int) -> None:
                raw = (
                    spark.readStream.format("lakelog")
                    .option("path", store.uri)
                    .option("subscribe", "orders")
                    .option("startingOffsets", "earliest")
                    .load()
                    .select(
                        from_avro(F.expr("substring(value, 6)"), text).alias("v"), "partition", "offset", "timestamp"
                    )
                    .select("v.*", "partition", "offset", "timestamp")
                )
                query = (
                    raw.writeStream.format("delta")
                    .option("checkpointLocation", f"{scratch}/cp-hand-{n}")
                    .trigger(availableNow=True)
                    .start(f"{scratch}/hand-{n}")
                )
                query.awaitTermination()

            sides = [("typed table", typed), ("from_avro by hand", by_hand)]
            for n in range(rounds):
                for label, job in sides if n % 2 == 0 else sides[::-1]:
                    started = time.perf_counter()
                    job(n)
                    rates[label].append(records / (time.perf_counter() - started))
                    out(f"round {n + 1}, {label}: {rates[label][-1]:,.0f} records/s")
        finally:
            server.shutdown()
            server.server_close()
            store.close()
    typed_rate, hand_rate = (statistics.median(rates[k]) for k in ("typed table", "from_avro by hand"))
    out(f"typed table (lakelog tables run): {typed_rate:,.0f} records/s (median of {rounds})")
    out(f"same job, from_avro by hand: {hand_rate:,.0f} records/s (median of {rounds})")
    out(f"ratio typed / by hand: {typed_rate / hand_rate:.2f}")
    return rates
