"""A worker of the randomized history workload (run as a script; only ``writer`` starts Spark).

Roles, each running until ``--stop`` (a file) exists:

* ``producer``: plain idempotent sends, one by one or as ``send_batch`` calls;
* ``txn``: transactions of 1-20 sends, about 30% of them aborted on purpose;
  every incarnation uses the same transactional id (``--txn-id``), so a
  restarted one fences the killed one;
* ``consumer``: a member of group ``--group`` that polls and commits;
* ``writer``: ``store.write(df)`` batches of 1-300 rows, keyed or keyless (one local Spark), to
  ``--topic`` or now and then to ``--race-topic``;
* ``streamer``: a Structured Streaming query (one local Spark) from JSON files it
  drops into ``--inbox`` into ``format("lakelog")`` on ``--topic`` at 2 s
  triggers; each file is one ``write`` (a file source never splits a file across
  micro-batches, and the sink commits a micro-batch whole). A restarted
  incarnation resumes the query from its checkpoint; before stopping, the query
  processes everything in the inbox, after which every file's outcome is ok;
* ``maintainer``: ``compaction.maintain`` over the whole store, then a pause.

Every operation and outcome goes to ``--log`` as JSON lines in the format
tests/history_checker.py reads: an operation is recorded as ``unknown``
before it starts and again with its outcome once it is known, so a worker
SIGKILLed in between leaves exactly what it knew. ``--name`` names this
incarnation and prefixes every value it sends, so a restarted worker sends
fresh values.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

Recorder = Callable[[dict], None]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument(
        "--role", choices=["producer", "txn", "consumer", "writer", "streamer", "maintainer"], required=True
    )
    parser.add_argument("--name", required=True)
    parser.add_argument("--topic", required=True, help="a consumer takes a comma-separated list")
    parser.add_argument("--race-topic", help="writer: the producers' topic, which 20%% of its writes go to")
    parser.add_argument("--log", required=True)
    parser.add_argument("--stop", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pace", type=float, default=1.0, help="scales every pause between operations")
    parser.add_argument("--group", default="history")
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--txn-id", default="hist-x")
    parser.add_argument("--vacuum-retention-hours", type=float, default=None)
    parser.add_argument("--inbox", help="streamer: the directory of its input files (and its checkpoint beside)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    log = open(args.log, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process

    def record(event: dict) -> None:
        log.write(json.dumps({"process": args.name, "time": time.time(), **event}) + "\n")
        log.flush()

    def stopped() -> bool:
        return os.path.exists(args.stop)

    roles = {
        "producer": run_producer,
        "txn": run_txn,
        "consumer": run_consumer,
        "writer": run_writer,
        "streamer": run_streamer,
        "maintainer": run_maintainer,
    }
    roles[args.role](args, rng, record, stopped)
    return 0


def outcome_of(exc: BaseException) -> str:
    """What an operation that raised ``exc`` did: only a LakelogError other than
    CommitStateUnknownError says it certainly did nothing; anything else may have landed."""
    from lakelog.engine.errors import CommitStateUnknownError, LakelogError

    return "failed" if isinstance(exc, LakelogError) and not isinstance(exc, CommitStateUnknownError) else "unknown"


def open_store(args: argparse.Namespace, record: Recorder, spark: Any = None) -> Any:
    """The store, opened again until it opens: a damaged log fails closed (CorruptLogError,
    recorded as an error) until it is mended."""
    from lakelog.engine.errors import LakelogError
    from lakelog.store import Store

    while True:
        try:
            return Store.open(args.store, spark=spark)
        except LakelogError as exc:
            record(error_event("open", exc))
            time.sleep(0.2)


def error_event(operation: str, exc: BaseException) -> dict:
    """An error the worker survived; ``unexpected`` when it is not one of lakelog's named errors (a broken
    contract: lakelog's API raises LakelogErrors only)."""
    from lakelog.engine.errors import LakelogError

    # The innermost frame in lakelog's own code: where the error left it (or came from).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    own = [
        f"{os.path.relpath(frame.filename, root)}:{frame.lineno} in {frame.name}"
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename.startswith(root + os.sep) and "site-packages" not in frame.filename
    ]
    return {
        "type": "error",
        "operation": operation,
        "error": type(exc).__name__,
        "unexpected": not isinstance(exc, LakelogError),
        "where": own[-1] if own else None,
        "message": str(exc)[:500],
    }


def send_event(value: str, topic: str, outcome: str, txn: str | None = None, partition=None, offset=None) -> dict:
    return {
        "type": "send",
        "value": value,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "outcome": outcome,
        "txn": txn,
    }


def run_producer(args: argparse.Namespace, rng: random.Random, record: Recorder, stopped: Callable[[], bool]) -> None:
    from lakelog.engine.errors import LakelogError

    store = open_store(args, record)
    # Outcomes are recorded in send order (the head of the queue first), as the checker's send order.
    pending: deque[tuple[list[str], Any, bool]] = deque()  # (values, future, one future for all values)

    def settle(block: bool) -> None:
        while pending and (block or pending[0][1].done()):
            values, future, whole = pending.popleft()
            try:
                md = future.get()
            except Exception as exc:  # every error is the sends' outcome
                for value in values:
                    record(send_event(value, args.topic, outcome_of(exc)))
                if not isinstance(exc, LakelogError):
                    record(error_event("send", exc))
                continue
            if whole:
                for value, partition, offset in zip(values, md.partitions, md.offsets, strict=True):
                    record(send_event(value, md.topic, "ok", partition=int(partition), offset=int(offset)))
            else:
                record(send_event(values[0], md.topic, "ok", partition=md.partition, offset=md.offset))

    i = 0
    with store.producer(linger_ms=rng.choice([0, 5, 20]), client_id=args.name) as producer:
        while not stopped():
            size = rng.randint(1, 30)
            values = [f"{args.name}-{i + j}" for j in range(size)]
            keys = [f"k{rng.randrange(16)}" for _ in values]
            i += size
            for value in values:
                record(send_event(value, args.topic, "unknown"))
            if rng.random() < 0.2:
                pending.append((values, producer.send_batch(args.topic, values, keys=keys), True))
            else:
                for value, key in zip(values, keys, strict=True):
                    pending.append(([value], producer.send(args.topic, value, key=key), False))
            if rng.random() < 0.2:
                producer.flush()
            settle(block=False)
            time.sleep(rng.uniform(0, 0.1) * args.pace)
        producer.flush()
        settle(block=True)


def run_txn(args: argparse.Namespace, rng: random.Random, record: Recorder, stopped: Callable[[], bool]) -> None:

    from lakelog.engine.errors import LakelogError

    store = open_store(args, record)
    producer = None
    attempt = 0
    while not stopped():
        attempt += 1
        txn = f"{args.name}-t{attempt}"
        try:
            if producer is None:
                producer = store.transactional_producer(args.txn_id)
                producer.init_transactions()
            producer.begin_transaction()
            for j in range(rng.randint(1, 20)):
                value = f"{txn}-{j}"
                record(send_event(value, args.topic, "unknown", txn=txn))
                producer.send(args.topic, value, key=f"k{rng.randrange(16)}")
            if rng.random() < 0.3:
                producer.abort_transaction()
                record({"type": "txn", "txn": txn, "outcome": "aborted"})
                time.sleep(rng.uniform(0, 0.2) * args.pace)
                continue
        except LakelogError as exc:  # before its commit (a damaged log fails closed): it never committed
            record({"type": "txn", "txn": txn, "outcome": "aborted"})
            record(error_event("send", exc))
            with contextlib.suppress(Exception):
                producer.close()  # type: ignore[union-attr]
            producer = None
            time.sleep(0.2)
            continue
        try:
            producer.commit_transaction()
            record({"type": "txn", "txn": txn, "outcome": "committed"})
        except Exception as exc:  # recorded; a new instance starts over
            record({"type": "txn", "txn": txn, "outcome": "unknown" if outcome_of(exc) == "unknown" else "aborted"})
            record(error_event("commit_transaction", exc))
            # Start over with a new instance: init_transactions fences whatever state this one is in.
            with contextlib.suppress(Exception):
                producer.close()
            producer = None
        time.sleep(rng.uniform(0, 0.2) * args.pace)
    if producer is not None:
        producer.close()


class _AssignmentRecorder:
    """Records each partition the group hands this member, as an ``assign`` of only those partitions:
    their position restarts from the committed offset, the other partitions' positions go on."""

    def __init__(self, record: Recorder) -> None:
        self._record = record

    def on_partitions_assigned(self, partitions: set) -> None:
        self._record(
            {"type": "assign", "added": True, "partitions": sorted([tp.topic, tp.partition] for tp in partitions)}
        )

    def on_partitions_revoked(self, partitions: set) -> None:
        pass


def run_consumer(args: argparse.Namespace, rng: random.Random, record: Recorder, stopped: Callable[[], bool]) -> None:
    from lakelog.engine.errors import LakelogError

    store = open_store(args, record)

    def join():
        consumer = store.consumer(
            args.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=500,
            session_timeout_ms=5000,
            partition_assignment_strategy=args.assignor,
            client_id=args.name,
        )
        consumer.subscribe(args.topic.split(","), listener=_AssignmentRecorder(record))
        return consumer

    def commit(consumer, last: dict) -> dict:
        """Commit the current positions if they moved since ``last``; return what is committed now."""
        offsets = {tp: consumer.position(tp) for tp in consumer.assignment()}
        encoded = {f"{tp.topic}/{tp.partition}": offset for tp, offset in offsets.items()}
        if not encoded or encoded == last:
            return last
        start = time.time()
        try:
            consumer.commit(offsets)
        except Exception as exc:  # the commit's outcome; the loop decides what follows
            record(
                {"type": "commit", "group": args.group, "offsets": encoded, "outcome": outcome_of(exc), "start": start}
            )
            if not isinstance(exc, LakelogError):
                raise
            return {}
        record({"type": "commit", "group": args.group, "offsets": encoded, "outcome": "ok", "start": start})
        return encoded

    consumer = join()
    committed: dict = {}
    last_commit = time.monotonic()
    while not stopped():
        try:
            records = consumer.poll(timeout_ms=200, max_records=rng.randint(1, 200))
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
            if rng.random() < 0.3 or time.monotonic() - last_commit > 1:
                committed = commit(consumer, committed)
                last_commit = time.monotonic()
        except Exception as exc:  # recorded; a new instance takes over
            # A new consumer instance joins again and restarts every position (the listener records it).
            record(error_event("consume", exc))
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False)
            consumer = join()
            committed = {}
    try:
        commit(consumer, committed)
    except Exception as exc:  # recorded
        record(error_event("commit", exc))
    consumer.close(autocommit=False)


def run_writer(args: argparse.Namespace, rng: random.Random, record: Recorder, stopped: Callable[[], bool]) -> None:
    from lakelog.spark_connector.session import build_session

    spark = build_session(
        {"spark.master": "local[1]", "spark.driver.memory": "768m", "spark.sql.shuffle.partitions": "1"}
    )
    store = open_store(args, record, spark)
    batch = 0
    while not stopped():
        batch += 1
        write = f"{args.name}-b{batch}"
        values = [f"{write}-{i}" for i in range(rng.randint(1, 300))]
        if rng.random() < 0.5:
            rows = [(value, f"k{rng.randrange(16)}") for value in values]
            df = spark.createDataFrame(rows, "value string, key string").repartition(rng.randint(1, 3))
        else:
            # Keyless: each Spark task fills a partition of its own, written with no count job
            # when the write is optimistic (more tasks than partitions: counted and spread).
            df = spark.createDataFrame([(value,) for value in values], "value string").repartition(rng.randint(1, 4))
        # Beside the producers' frequent commits: its offsets are reserved before its files are written.
        topic = args.race_topic if args.race_topic and rng.random() < 0.2 else args.topic
        record({"type": "write", "write": write, "topic": topic, "values": values, "outcome": "unknown"})
        try:
            result = store.write(df, topic=topic)
        except Exception as exc:  # the write's outcome
            record({"type": "write", "write": write, "outcome": outcome_of(exc)})
            record(error_event("write", exc))
        else:
            ranges = {f"{tp.topic}/{tp.partition}": [r.start, r.end] for tp, r in result.ranges.items()}
            record({"type": "write", "write": write, "outcome": "ok", "ranges": ranges})
        time.sleep(rng.uniform(0, 1.0) * args.pace)
    spark.stop()


def run_streamer(args: argparse.Namespace, rng: random.Random, record: Recorder, stopped: Callable[[], bool]) -> None:
    from pathlib import Path

    from lakelog.spark_connector.session import build_session

    spark = build_session(
        {"spark.master": "local[1]", "spark.driver.memory": "768m", "spark.sql.shuffle.partitions": "1"}
    )
    store = open_store(args, record, spark)
    inbox = Path(args.inbox)
    inbox.mkdir(parents=True, exist_ok=True)

    def start() -> Any:
        return (
            spark.readStream.schema("value STRING, key STRING")
            .json(str(inbox))
            .writeStream.format("lakelog")
            .option("path", store.uri)
            .option("topic", args.topic)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="2 seconds")
            .start()
        )

    checkpoint = inbox.parent / f"{inbox.name}-checkpoint"
    acknowledged: set[str] = set()

    def acknowledge() -> None:
        for name in committed_files(checkpoint) - acknowledged:
            record({"type": "write", "write": name, "outcome": "ok"})
            acknowledged.add(name)

    query = start()
    batch = 0
    while not stopped():
        if query.exception() is not None:  # a micro-batch failed: resume from the checkpoint
            record(stream_error(query.exception()))
            query = start()
        acknowledge()
        batch += 1
        write = f"{args.name}-f{batch}"
        values = [f"{write}-{i}" for i in range(rng.randint(1, 300))]
        record({"type": "write", "write": write, "topic": args.topic, "values": values, "outcome": "unknown"})
        lines = "".join(json.dumps({"value": v, "key": f"k{rng.randrange(16)}"}) + "\n" for v in values)
        # Whole or not at all: the file source ignores names starting with a dot.
        hidden = inbox / f".{write}.json"
        hidden.write_text(lines)
        os.replace(hidden, inbox / f"{write}.json")
        time.sleep(rng.uniform(0, 1.0) * args.pace)
    for _ in range(3):
        try:
            query.processAllAvailable()  # every file of every incarnation, each exactly once
        except Exception as exc:  # a micro-batch failed: resume from the checkpoint and try again
            record(stream_error(exc))
            query = start()
            continue
        acknowledge()
        break
    query.stop()
    spark.stop()


def committed_files(checkpoint: Any) -> set[str]:
    """The input files (by name, without .json) of every micro-batch the streaming query
    committed: Spark writes ``commits/<batch>`` after the sink committed the batch, and its
    file source lists each batch's files in ``sources/0/<batch>`` (or, every tenth batch,
    in a compacted ``<batch>.compact`` holding all files so far with their batch ids)."""
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    committed = {int(p.name) for p in (checkpoint / "commits").glob("*") if p.name.isdigit()}
    names = set()
    sources = checkpoint / "sources" / "0"
    for path in sources.glob("*"):
        batch = path.name.removesuffix(".compact")
        if not batch.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines()[1:]:  # after the "v1" header
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if entry.get("batchId", int(batch)) in committed:
                        names.add(Path(unquote(urlparse(entry["path"]).path)).stem)
    return names


def stream_error(exc: BaseException) -> dict:
    """A failed micro-batch as the LakelogError the sink raised inside it (Spark wraps it in a
    StreamingQueryException whose message names the Python exception's class), else as is."""
    import re

    from lakelog.engine import errors

    event = error_event("stream", exc)
    found = re.search(r"lakelog\.engine\.errors\.(\w+)", str(exc))
    cls = getattr(errors, found.group(1), None) if found else None
    if isinstance(cls, type) and issubclass(cls, errors.LakelogError):
        event.update(error=cls.__name__, unexpected=False)
    return event


def run_maintainer(args: argparse.Namespace, rng: random.Random, record: Recorder, stopped: Callable[[], bool]) -> None:
    from lakelog.compaction.maintain import maintain

    store = open_store(args, record)
    run = 0
    while not stopped():
        run += 1
        name = f"{args.name}-m{run}"
        record({"type": "maintain", "run": name, "outcome": "unknown"})
        try:
            report = maintain(store, vacuum_retention_hours=args.vacuum_retention_hours)
        except Exception as exc:  # recorded; a scheduler would run it again
            record({"type": "maintain", "run": name, "outcome": "failed"})
            record(error_event("maintain", exc))
        else:
            topics = {
                t.topic: {
                    "removed": t.records_removed_by_retention + t.records_removed_by_compaction,
                    "files_optimized": t.files_optimized,
                    "skipped": len(t.skipped),
                }
                for t in report.topics
            }
            record(
                {"type": "maintain", "run": name, "outcome": "ok", "topics": topics, "vacuumed": report.vacuumed_files}
            )
        time.sleep(rng.uniform(0.5, 3.0) * args.pace)


if __name__ == "__main__":
    sys.exit(main())
