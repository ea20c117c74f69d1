"""lakelog's jobs on a Spark cluster: a produce job, a streaming copy, maintenance.

Run: python cluster_job.py --master spark://127.0.0.1:7077 --store URI --checkpoint URI [--conf KEY=VALUE]...
Prints one JSON line with what it saw; tests/test_cluster.py checks it.
The same code as on local[*]: only the master differs.
"""

from __future__ import annotations

import argparse
import json
import time

from pyspark.sql import functions as F

from lakelog.compaction import maintain
from lakelog.spark_connector.session import build_session
from lakelog.store import Store

RECORDS = 20_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting KEY=VALUE")
    args = parser.parse_args()
    spark = build_session(
        {
            "spark.master": args.master,
            "spark.driver.host": "127.0.0.1",
            "spark.executor.memory": "1g",
            "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "2",
            **dict(c.split("=", 1) for c in args.conf),
        }
    )
    store = Store.open(args.store, spark=spark)
    store.create_topic("events", partitions=4)
    store.create_topic("copy", partitions=4)
    store.create_topic("prices", partitions=2, config={"cleanup.policy": "compact", "min.compaction.lag.ms": 0})

    # Produce: offsets are assigned and files written by the executors' tasks.
    started = time.monotonic()
    rows = spark.range(RECORDS, numPartitions=4).select(
        F.concat(F.lit("k"), (F.col("id") % 97).cast("string")).alias("key"),
        F.col("id").cast("string").alias("value"),
    )
    store.write(rows, topic="events")
    for round_ in range(5):
        prices = spark.range(50).select(
            F.concat(F.lit("fruit"), (F.col("id") % 10).cast("string")).alias("key"),
            F.lit(str(round_)).alias("value"),
        )
        store.write(prices, topic="prices")
    produce_s = time.monotonic() - started
    # The driver is listed too; the others ran the tasks above.
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    executors = [f"{e.host()}:{e.port()}" for e in tracker.getExecutorInfos()]

    # A streaming copy, checkpointed next to the store.
    started = time.monotonic()
    query = (
        spark.readStream.format("lakelog")
        .option("path", store.uri)
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5000")
        .load()
        .select("key", "value")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", "copy")
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    stream_s = time.monotonic() - started

    # Maintenance with its rewrites as Spark tasks on the cluster.
    started = time.monotonic()
    report = maintain(store, spark=spark, vacuum=True, vacuum_retention_hours=0)
    maintain_s = time.monotonic() - started

    def pairs(topic: str) -> list[list[str]]:
        frame = store.read(topic).selectExpr(
            "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "partition", "offset"
        )
        return [[r.k, r.v, r.partition, r.offset] for r in frame.collect()]

    by_topic = {t.topic: t for t in report.topics}
    print(
        json.dumps(
            {
                "master": spark.sparkContext.master,
                "executors": executors,
                "events": pairs("events"),
                "copy": pairs("copy"),
                "prices": pairs("prices"),
                "end_offsets": {t: store.end_offsets(t) for t in ("events", "copy", "prices")},
                "compacted": by_topic["prices"].records_removed_by_compaction,
                "files_after": {t: by_topic[t].files_after for t in ("events", "copy", "prices")},
                "seconds": {"produce": produce_s, "stream": stream_s, "maintain": maintain_s},
            }
        ),
        flush=True,
    )
    spark.stop()


if __name__ == "__main__":
    main()
