"""A producer process for the concurrency tests (run as a script; only ``dataframe`` starts Spark).

Sends ``--count`` records named ``<worker>:<i>`` and appends one JSON line
per outcome to ``--log``: the offset it was told, or the error. Waits for
``--start`` (a file) to exist so that all workers begin together.

Modes:
  partitions  records round-robin over ``--partitions`` (explicit partition)
  keyed       records keyed ``k<i % 5>`` (Kafka's partitioner)
  dataframe   records in ``store.write`` batches of ``--batch`` rows, big
              enough that a commit takes a while (for the SIGKILL test)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--mode", choices=["partitions", "keyed", "dataframe"], default="partitions")
    parser.add_argument("--partitions", default="0")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--log", required=True)
    parser.add_argument("--start")
    args = parser.parse_args()

    began = time.monotonic()
    import logging

    # The commit core says at DEBUG when another writer took the version a commit wanted.
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(message)s")
    logging.getLogger("lakelog.engine.commit.committer").setLevel(logging.DEBUG)
    from lakelog.store import Store

    spark = None
    if args.mode == "dataframe":
        from lakelog.spark_connector.session import build_session

        spark = build_session(
            {"spark.master": "local[1]", "spark.driver.memory": "768m", "spark.sql.shuffle.partitions": "1"}
        )
    store = Store.open(args.store, spark=spark)
    print(f"ready after {time.monotonic() - began:.1f} s", flush=True)
    while args.start and not os.path.exists(args.start):
        time.sleep(0.05)
    started = time.monotonic()
    with open(args.log, "a", encoding="utf-8") as log:

        def record(entry: dict) -> None:
            log.write(json.dumps(entry) + "\n")
            log.flush()

        if args.mode == "dataframe":
            run_dataframe(store, spark, args, record)
        else:
            run_producer(store, args, record)
    print(f"done after {time.monotonic() - started:.1f} s", flush=True)
    return 0


def run_producer(store, args, record) -> None:
    partitions = [int(p) for p in args.partitions.split(",")]
    config = {"batch.num.messages": args.batch, "linger.ms": 10, "client.id": args.worker}
    with store.producer(**config) as producer:
        pending = []
        for i in range(args.count):
            name = f"{args.worker}:{i}"
            if args.mode == "keyed":
                future = producer.send(args.topic, name, key=f"k{i % 5}")
            else:
                future = producer.send(args.topic, name, partition=partitions[i % len(partitions)])
            pending.append((i, name, future))
        producer.flush()
        for i, name, future in pending:
            error = future.exception()
            if error is None:
                md = future.get()
                record({"w": args.worker, "i": i, "value": name, "topic": md.topic, "p": md.partition, "o": md.offset})
            else:
                record({"w": args.worker, "i": i, "value": name, "error": type(error).__name__, "msg": str(error)})


def run_dataframe(store, spark, args, record) -> None:
    from pyspark.sql import functions as F

    partition = int(args.partitions.split(",")[0])
    for batch in range(args.count):
        first = batch * args.batch
        df = spark.range(first, first + args.batch).select(
            F.concat(F.lit(f"{args.worker}:"), F.col("id").cast("string")).alias("value"),
            F.lit(partition).alias("partition"),
        )
        result = store.write(df, topic=args.topic)
        for tp, r in result.ranges.items():
            record(
                {"w": args.worker, "batch": batch, "topic": tp.topic, "p": tp.partition, "start": r.start, "end": r.end}
            )


if __name__ == "__main__":
    sys.exit(main())
