"""A streaming query copying one topic to another through format("lakelog"); killed by tests.

Run: python stream_copy.py --store PATH --source A --sink B --checkpoint DIR [--available-now]
"""

from __future__ import annotations

import argparse

from lakelog.spark_connector.session import build_session
from lakelog.store import Store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets", default="200")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()
    spark = build_session({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    store = Store.open(args.store, spark=spark)
    writer = (
        spark.readStream.format("lakelog")
        .option("path", store.uri)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets)
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers")
        .writeStream.format("lakelog")
        .option("path", store.uri)
        .option("topic", args.sink)
        .option("checkpointLocation", args.checkpoint)
    )
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="0 seconds")
    writer.start().awaitTermination()


if __name__ == "__main__":
    main()
