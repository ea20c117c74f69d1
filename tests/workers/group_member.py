"""A consumer group member (run as a script, no Spark) for the group tests and benchmark.

Subscribes to ``--topic`` in ``--group``, polls until ``--stop`` (a file)
exists, commits after every poll (and in ``on_partitions_revoked``, as Kafka
applications do; a commit deferred by a rebalance is made before it stops),
then closes. Every
ownership change, every delivered record range and every commit goes to
``--log`` as JSON lines with the time, for the checker in
tests/engine/test_group_processes.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from lakelog.engine.errors import RebalanceInProgressError


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--stop", required=True)
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--instance-id")
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    args = parser.parse_args()

    from lakelog.store import Store

    store = Store.open(args.store)
    out = open(args.log, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process

    def record(event: str, **fields) -> None:
        out.write(json.dumps({"t": time.time(), "member": args.name, "event": event, **fields}) + "\n")
        out.flush()

    config = {
        "client.id": args.name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": 300,
        "partition.assignment.strategy": args.assignor,
        "max.poll.records": 200,
    }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = store.consumer(args.group, **config)

    class Listener:
        def on_partitions_revoked(self, partitions):
            record("revoked", partitions=sorted(tp.partition for tp in partitions))
            committed = {tp: consumer.position(tp) for tp in partitions}
            consumer.commit(committed)
            record("committed", offsets={str(tp.partition): o for tp, o in committed.items()})

        def on_partitions_assigned(self, partitions):
            record("assigned", partitions=sorted(tp.partition for tp in partitions))

        def on_partitions_lost(self, partitions):
            record("lost", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.topic], listener=Listener())
    record("started", pid=os.getpid())
    deferred = False  # the last commit was deferred: the positions are past the group's offsets
    leave_by = None
    while True:
        if os.path.exists(args.stop):
            # As a careful Kafka application: a deferred commit is made before it leaves (closing
            # in the middle of a rebalance loses the partitions, and their next owner would read
            # the records since the last commit again).
            leave_by = leave_by or time.monotonic() + 60
            if not deferred or time.monotonic() > leave_by:
                break
        records = consumer.poll(timeout_ms=100)
        if not records and not deferred:
            continue
        by_partition: dict[int, list[int]] = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append(r.offset)
        for partition, offsets in by_partition.items():
            record("records", p=partition, first=offsets[0], last=offsets[-1], n=len(offsets))
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        try:
            consumer.commit(positions)
        except RebalanceInProgressError:  # as a Java application: poll (completing it), commit later
            record("commit_deferred")
            deferred = True
            continue
        deferred = False
        record("committed", offsets={str(tp.partition): o for tp, o in positions.items()})
    consumer.close(autocommit=False)
    record("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
