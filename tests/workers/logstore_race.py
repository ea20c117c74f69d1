"""Races another process to create the same Delta commit files through a LogStore.

It asks the LogStore to create ``<dir>/v.json`` (no overwrite) for v = 0, 1,
... with its own content; after losing a version it skips to the newest one
and tries the next, as a Delta writer does, so the processes keep meeting
at the same version. Records which versions the store said it created. With
a correct LogStore exactly one process succeeds per file.
Run as a script; prints one JSON line: the versions this process won.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--log-store", required=True)
    parser.add_argument("--start", required=True)
    parser.add_argument("--ready", required=True, help="file to create once the JVM is up")
    args = parser.parse_args()

    from lakelog.spark_connector.session import build_session

    spark = build_session({"spark.master": "local[1]", "spark.driver.memory": "512m"})
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    store_class = jvm
    for part in args.log_store.split("."):
        store_class = getattr(store_class, part)
    store = store_class(conf)
    Path = jvm.org.apache.hadoop.fs.Path
    # Warm the write path up (class loading, JIT) so both processes race at full speed.
    os.makedirs(f"{args.dir}-{args.name}-warmup", exist_ok=True)
    for v in range(50):
        lines = jvm.java.util.ArrayList()
        lines.add("{}")
        store.write(Path(f"file://{args.dir}-{args.name}-warmup/{v:020d}.json"), lines.iterator(), False, conf)
    open(args.ready, "w").close()
    while not os.path.exists(args.start):
        time.sleep(0.01)
    won = []
    v = 0
    while v < args.count:
        lines = jvm.java.util.ArrayList()
        lines.add(json.dumps({"writer": args.name, "version": v}))
        try:
            store.write(Path(f"file://{args.dir}/{v:020d}.json"), lines.iterator(), False, conf)
            won.append(v)
            v += 1
        except Exception as exc:  # FileAlreadyExistsException: the other process was first
            if "FileAlreadyExistsException" not in str(exc):
                raise
            # Like a Delta writer that lost: go for the version after the newest one.
            while v < args.count and os.path.exists(f"{args.dir}/{v:020d}.json"):
                v += 1
    print(json.dumps({"name": args.name, "won": won}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
