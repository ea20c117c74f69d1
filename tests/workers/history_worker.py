"""A worker of the randomized history workload (run as a script; no Spark: clients need no JVM).

Roles: ``producer`` (plain idempotent sends), ``txn`` (transactional sends,
some transactions aborted), ``consumer`` (a member of one group: polls,
commits). Every operation and outcome goes to ``--log`` as JSON lines in
the format tests/history_checker.py reads. Consumers run until ``--stop``
(a file) exists.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--role", choices=["producer", "txn", "consumer"], required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--log", required=True)
    parser.add_argument("--stop")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from engine import LogStore
    from engine.errors import CommitStateUnknownError, LakelogError

    store = LogStore.open(args.store)
    rng = random.Random(args.seed)
    log = open(args.log, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process

    def record(event: dict) -> None:
        log.write(json.dumps({"process": args.name, "time": time.time(), **event}) + "\n")
        log.flush()

    def outcome_of(exc: BaseException) -> str:
        return "unknown" if isinstance(exc, CommitStateUnknownError) else "failed"

    if args.role == "producer":
        with store.producer(linger_ms=rng.choice([0, 5, 20])) as producer:
            pending = []
            for i in range(args.count):
                value = f"{args.name}-{i}"
                record(
                    {
                        "type": "send",
                        "value": value,
                        "topic": args.topic,
                        "partition": None,
                        "offset": None,
                        "outcome": "unknown",
                        "txn": None,
                    }
                )
                pending.append((value, producer.send(args.topic, value, key=f"k{rng.randrange(6)}")))
                if rng.random() < 0.2:
                    producer.flush()
            producer.flush()
            for value, future in pending:
                error = future.exception()
                if error is None:
                    md = future.get()
                    record(
                        {
                            "type": "send",
                            "value": value,
                            "topic": md.topic,
                            "partition": md.partition,
                            "offset": md.offset,
                            "outcome": "ok",
                            "txn": None,
                        }
                    )
                else:
                    record(
                        {
                            "type": "send",
                            "value": value,
                            "topic": args.topic,
                            "partition": None,
                            "offset": None,
                            "outcome": outcome_of(error),
                            "txn": None,
                        }
                    )
        return 0

    if args.role == "txn":
        producer = store.transactional_producer(f"hist-{args.name}")
        producer.init_transactions()
        i = 0
        attempt = 0
        while i < args.count:
            attempt += 1
            txn = f"{args.name}-t{attempt}"
            producer.begin_transaction()
            size = rng.randint(1, 6)
            for j in range(size):
                value = f"{args.name}-{i + j}-a{attempt}"
                record(
                    {
                        "type": "send",
                        "value": value,
                        "topic": args.topic,
                        "partition": None,
                        "offset": None,
                        "outcome": "unknown",
                        "txn": txn,
                    }
                )
                producer.send(args.topic, value, key=f"k{rng.randrange(6)}")
            if rng.random() < 0.3:
                producer.abort_transaction()
                record({"type": "txn", "txn": txn, "outcome": "aborted"})
                continue
            try:
                producer.commit_transaction()
                record({"type": "txn", "txn": txn, "outcome": "committed"})
                i += size
            except LakelogError as exc:
                record(
                    {
                        "type": "txn",
                        "txn": txn,
                        "outcome": outcome_of(exc) if outcome_of(exc) == "unknown" else "aborted",
                    }
                )
                producer.abort_transaction()
        producer.close()
        return 0

    consumer = store.consumer(
        "history",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=500,
        session_timeout_ms=5000,
    )
    consumer.subscribe([args.topic])
    assigned: set = set()
    while not (args.stop and os.path.exists(args.stop)):
        records = consumer.poll(timeout_ms=200, max_records=rng.randint(1, 30))
        if consumer.assignment() != assigned:
            assigned = consumer.assignment()
            record({"type": "assign", "partitions": sorted([tp.topic, tp.partition] for tp in assigned)})
        if records:
            record(
                {
                    "type": "poll",
                    "records": [
                        {"topic": r.topic, "partition": r.partition, "offset": r.offset, "value": r.value.decode()}
                        for r in records
                    ],
                }
            )
        if assigned and rng.random() < 0.3:
            offsets = {tp: consumer.position(tp) for tp in assigned}
            encoded = {f"{tp.topic}/{tp.partition}": o for tp, o in offsets.items()}
            try:
                consumer.commit(offsets)
                record({"type": "commit", "group": "history", "offsets": encoded, "outcome": "ok"})
            except LakelogError as exc:
                record({"type": "commit", "group": "history", "offsets": encoded, "outcome": outcome_of(exc)})
    consumer.close(autocommit=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
