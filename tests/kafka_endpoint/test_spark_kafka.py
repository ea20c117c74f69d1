"""Spark's own Kafka source and sink (``format("kafka")``, spark-sql-kafka-0-10 for the project's
Spark) against ``lakelog serve``, unchanged but for ``kafka.bootstrap.servers``: a batch read and
a streaming query (availableNow, maxOffsetsPerTrigger) see the store's records with their offsets,
a batch write lands in the store; and records produced
through the agent are what ``store.read()``, ``format("lakelog")`` and delta-rs read, at the same
offsets. In a Spark driver of its own (its class path needs the Kafka jars)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kafka_reference import SPARK_KAFKA_DIR, ensure_kafka_jars
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
# What Spark's documentation puts on --jars for format("kafka"); the rest of the copied class
# path (Hadoop, Scala, log4j) a session already has.
NEEDED = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")

JOB = """
import json, sys
from lakelog.spark_connector.session import build_session, session_conf
bootstrap, jars = sys.argv[1], sys.argv[2]
spark = build_session({"spark.jars": session_conf()["spark.jars"] + "," + jars, "spark.master": "local[2]"})
rows = (
    spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "t")
    .option("startingOffsets", "earliest").load()
    .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value").collect()
)
# The streaming source too: one availableNow query over what is there, into a memory table.
query = (
    spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "t")
    .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "5").load()
    .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
    .writeStream.format("memory").queryName("streamed").trigger(availableNow=True)
    .option("checkpointLocation", sys.argv[4]).start()
)
query.awaitTermination(300)
streamed = spark.sql("SELECT * FROM streamed").collect()
batches = len([p for p in query.recentProgress if p["numInputRows"]])
out = spark.createDataFrame([("k-new", "from-spark")], "key string, value string")
out.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", "t").save()
# What went in through the agent, as lakelog's Spark readers see it.
from lakelog.store import Store
store = Store.open(sys.argv[3], spark=spark)
columns = ["partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"]
lakelog_source = spark.read.format("lakelog").option("path", sys.argv[3]).option("subscribe", "t").load()
print(json.dumps({
    "kafka": [r.asDict() for r in rows],
    "streamed": [r.asDict() for r in streamed],
    "stream_batches": batches,
    "store_read": [r.asDict() for r in store.read("t").selectExpr(*columns).collect()],
    "format_lakelog": [r.asDict() for r in lakelog_source.selectExpr(*columns).collect()],
}))
"""


def test_spark_format_kafka_reads_and_writes_a_store_through_the_agent(agent, tmp_path):
    from confluent_kafka import Producer

    store = Store.open(agent.store, create=False)
    sent = {}
    with store.producer(linger_ms=0) as producer:
        for i in range(12):
            meta = producer.send("t", f"v{i}", key=f"k{i}").get()
            sent[(meta.partition, meta.offset)] = (f"k{i}", f"v{i}")
    kafka = Producer({"bootstrap.servers": agent.bootstrap})
    for i in range(6):  # and through the agent
        kafka.produce(
            "t",
            f"kv{i}".encode(),
            key=f"kk{i}".encode(),
            on_delivery=lambda e, m: sent.__setitem__(
                (m.partition(), m.offset()), (m.key().decode(), m.value().decode())
            ),
        )
    assert kafka.flush(30) == 0
    folder = ensure_kafka_jars() / SPARK_KAFKA_DIR
    jars = ",".join(str(p) for p in sorted(folder.glob("*.jar")) if p.name.startswith(NEEDED))
    done = subprocess.run(
        [sys.executable, "-c", JOB, agent.bootstrap, jars, str(agent.store), str(tmp_path / "checkpoint")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in seen["kafka"]} == sent
    # The streaming source read the same 18 records once each, at most 5 a micro-batch.
    streamed = [(r["partition"], r["offset"]) for r in seen["streamed"]]
    assert sorted(streamed) == sorted(sent) and seen["stream_batches"] >= 4
    ends = Store.open(agent.store, create=False).log.latest()
    assert sum(ends.end_offset(TopicPartition("t", p)) for p in (0, 1)) == 19  # and Spark's one record
    for reader in ("store_read", "format_lakelog"):  # the same records at the same offsets
        found = {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in seen[reader]}
        assert {k: v for k, v in found.items() if v[1] != "from-spark"} == sent, reader
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    query = "SELECT partition, \"offset\", CAST(value AS VARCHAR) AS value FROM log WHERE topic = 't'"
    plain = pa.table(QueryBuilder().register("log", DeltaTable(str(agent.store))).execute(query).read_all()).to_pylist()
    assert {(r["partition"], r["offset"]): r["value"] for r in plain if r["value"] != "from-spark"} == {
        k: v[1] for k, v in sent.items()
    }  # delta-rs, a reader that knows nothing of lakelog
