"""A read-process-write worker (run as a script, without Spark): consumes topic
``--source`` in group ``--group``, writes ``T:<value>`` to ``--sink`` and commits the
consumed offsets in the same transaction. Exits 0 once its partitions are drained.
The exactly-once test SIGKILLs it at random moments and starts it again."""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--batch", type=int, default=15)
    args = parser.parse_args()

    from lakelog.store import Store

    store = Store.open(args.store)
    consumer = store.consumer(
        args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=500,
        session_timeout_ms=5000,
    )
    consumer.subscribe([args.source])
    producer = store.transactional_producer(args.transactional_id)
    producer.init_transactions()
    print("ready", flush=True)
    idle_since = time.monotonic()
    while True:
        records = consumer.poll(timeout_ms=300, max_records=args.batch)
        if not records:
            assigned = consumer.assignment()
            ends = consumer.end_offsets(assigned) if assigned else {}
            done = len(assigned) == store.describe_topic(args.source).partitions and all(
                consumer.position(tp) >= end for tp, end in ends.items()
            )
            if done and time.monotonic() - idle_since > 1:
                committed = consumer.committed(assigned)
                if all(committed[tp] is not None and committed[tp].offset >= ends[tp] for tp in assigned):
                    consumer.close(autocommit=False)
                    return 0
            continue
        idle_since = time.monotonic()
        producer.begin_transaction()
        for r in records:
            producer.send(args.sink, b"T:" + r.value, key=r.key)
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        producer.send_offsets_to_transaction(positions, consumer.group_metadata())
        try:
            producer.commit_transaction()
        except Exception as exc:  # a rebalance fenced the read: abort, rewind to committed, go on
            print(f"abort: {exc}", flush=True)
            producer.abort_transaction()
            committed = consumer.committed(consumer.assignment())
            for tp, om in committed.items():
                consumer.seek(tp, om.offset if om is not None else 0)


if __name__ == "__main__":
    sys.exit(main())
