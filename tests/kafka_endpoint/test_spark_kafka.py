"""Spark's own Kafka source and sink (``format("kafka")``, spark-sql-kafka-0-10 for the project's
Spark) against ``lakelog serve``, unchanged but for ``kafka.bootstrap.servers``: a batch read sees
the store's records with their offsets, a batch write lands in the store. In a Spark driver of its
own (its class path needs the Kafka jars)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kafka_reference import SPARK_KAFKA_DIR, ensure_kafka_jars
from engine import LogStore
from engine.offsets import TopicPartition

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
# What Spark's documentation puts on --jars for format("kafka"); the rest of the copied class
# path (Hadoop, Scala, log4j) a session already has.
NEEDED = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")

JOB = """
import json, sys
from engine.session import build_session, session_conf
bootstrap, jars = sys.argv[1], sys.argv[2]
spark = build_session({"spark.jars": session_conf()["spark.jars"] + "," + jars, "spark.master": "local[2]"})
rows = (
    spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "t")
    .option("startingOffsets", "earliest").load()
    .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value").collect()
)
out = spark.createDataFrame([("k-new", "from-spark")], "key string, value string")
out.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", "t").save()
print(json.dumps([r.asDict() for r in rows]))
"""


def test_spark_format_kafka_reads_and_writes_a_store_through_the_agent(agent):
    store = LogStore.open(agent.store, create=False)
    sent = {}
    with store.producer(linger_ms=0) as producer:
        for i in range(12):
            meta = producer.send("t", f"v{i}", key=f"k{i}").get()
            sent[(meta.partition, meta.offset)] = (f"k{i}", f"v{i}")
    folder = ensure_kafka_jars() / SPARK_KAFKA_DIR
    jars = ",".join(str(p) for p in sorted(folder.glob("*.jar")) if p.name.startswith(NEEDED))
    done = subprocess.run(
        [sys.executable, "-c", JOB, agent.bootstrap, jars],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in rows} == sent
    ends = LogStore.open(agent.store, create=False).log.latest()
    assert sum(ends.end_offset(TopicPartition("t", p)) for p in (0, 1)) == 13
