"""The ``lakelog`` command line, modelled on Kafka's tools.

Exit codes scripts can rely on:

====  =========================================================
0     success
1     fatal error (the request cannot succeed as given): no lakelog
      store at the path, storage read-only or full, an unexpected error
2     usage error, invalid name, config, offset or record
3     retriable: conflicts or timeouts exhausted, nothing committed
4     outcome unknown: a commit may have landed, re-read the log
5     topic already exists; consumer group not empty (has live members)
6     unknown topic or partition; unknown consumer group
7     partially committed (``produce``): the records stderr lists were
      committed, the rest not; sending all again would duplicate them
8     ``check`` found violations of the store's invariant (listed on
      stdout; after ``--repair``, those that remain)
====  =========================================================

Errors go to stderr as one line, ``error: <message>`` (an unexpected error
as ``error: <type>: <message>``); ``-v`` adds the traceback. Results go to
stdout. Arguments are checked before a store is opened or Spark started.
Only ``topics create``, ``quickstart`` and the perf verbs that fill their
own topics (``perf produce``, ``perf transactions``, ``perf stream``,
``perf maintain``) create a store; every other command that uses one
fails with exit 1 on a path without one and creates nothing. Perf baselines go to a
temporary directory of their own (or under ``--work-dir``), never beside
the store, and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from lakelog.engine.errors import (
    CommitStateUnknownError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidTopicError,
    LakelogError,
    PartiallyCommittedError,
    UnexpectedError,
    UnknownTopicOrPartitionError,
    error_for_exception,
)
from lakelog.engine.offsets import EARLIEST, LATEST, TopicPartition
from lakelog.engine.records import RecordMetadata
from lakelog.engine.settings import load_settings, redact_logs, redact_text
from lakelog.engine.topics import INTERNAL_TOPICS, TOPIC_CONFIG_KEYS, parse_topic_config, validate_topic_name

STORE_ENV = "LAKELOG_STORE"
CHECK_FAILED = 8  # exit code of a check that found violations


def _pairs(items: Iterable[str] | None, what: str) -> dict[str, str]:
    """``k=v`` arguments (each may hold several, comma-separated) as a dict."""
    result: dict[str, str] = {}
    for item in items or []:
        for part in _split_configs(item):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise InvalidConfigError(f"{what} must look like key=value, got {part!r}")
            result[key.strip()] = value.strip()
    return result


def _split_configs(text: str) -> list[str]:
    # cleanup.policy=compact,delete holds a comma: split only before "key=".
    parts: list[str] = []
    for piece in text.split(","):
        if parts and "=" not in piece:
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return [p for p in parts if p.strip()]


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _ms_to_text(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _store_path(args: argparse.Namespace) -> str:
    path = args.store or os.environ.get(STORE_ENV)
    if not path:
        raise InvalidConfigError(f"no store: pass --store PATH or set {STORE_ENV}")
    return path


def _open_store(args: argparse.Namespace, *, create: bool = False):
    """The store at --store; StoreNotFoundError if there is none, unless ``create``."""
    from lakelog.engine.store import LogStore

    return LogStore.open(_store_path(args), conf_file=args.conf, create=create)


def _int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an int >= ``low`` (argparse reports anything else as a usage error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _float_at_least(low: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not value >= low:  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be at least {low:g}, got {text}")
        return value

    return parse


COUNT = _int_at_least(1)
NON_NEGATIVE = _int_at_least(0)
WORK_DIR_HELP = (
    "where the run's own temporary directory for baselines goes, a local directory or an S3 URI "
    "(default: the system's temp directory); it is deleted afterwards"
)


# -- topics --------------------------------------------------------------------


def cmd_topics_create(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    # Checked before the store is opened: a refused topic must not leave a new, empty store behind.
    validate_topic_name(args.topic)
    if args.topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"topic {args.topic!r} is reserved for lakelog's internal use")
    config = _pairs(args.config, "--config")
    parse_topic_config(config)
    store = _open_store(args, create=True)
    topic = store.create_topic(args.topic, partitions=args.partitions, config=config)
    out(f"Created topic {topic.name} with {topic.partitions} partition(s), id {topic.topic_id}.")


def cmd_topics_list(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    for name in _open_store(args).list_topics(include_internal=args.internal):
        out(name)


def cmd_topics_describe(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    store = _open_store(args)
    names = [args.topic] if args.topic else store.list_topics(include_internal=True)
    for name in names:
        topic = store.describe_topic(name)
        configs = ",".join(f"{k}={TOPIC_CONFIG_KEYS[k].render(v)}" for k, v in sorted(topic.overrides.items()))
        out(f"Topic: {topic.name}\tTopicId: {topic.topic_id}\tPartitionCount: {topic.partitions}\tConfigs: {configs}")
        start = store.beginning_offsets(name)
        end = store.end_offsets(name)
        for p in range(topic.partitions):
            out(f"\tTopic: {topic.name}\tPartition: {p}\tLogStartOffset: {start[p]}\tLogEndOffset: {end[p]}")
        if args.all_configs:
            for key, value in sorted(topic.config().items()):
                source = "TOPIC_CONFIG" if key in topic.overrides else "DEFAULT_CONFIG"
                out(f"\t{key}={TOPIC_CONFIG_KEYS[key].render(value)}\t{source}")


def cmd_topics_delete(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    _open_store(args).delete_topic(args.topic)
    out(f"Deleted topic {args.topic}.")


def cmd_topics_alter(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    to_set = _pairs(args.add_config, "--add-config")
    to_delete = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    if args.partitions is None and not to_set and not to_delete:
        raise InvalidConfigError("nothing to alter: give --partitions, --add-config or --delete-config")
    store = _open_store(args)
    if args.partitions is not None:
        topic = store.create_partitions(args.topic, args.partitions)
        out(f"Topic {topic.name} now has {topic.partitions} partitions.")
    if to_set or to_delete:
        topic = store.alter_topic_config(args.topic, to_set, to_delete)
        out(f"Altered configs of topic {topic.name}: set {sorted(to_set)}, reset {sorted(to_delete)}.")


# -- produce / consume -----------------------------------------------------------


def cmd_produce(args: argparse.Namespace, out: Callable[[str], None], stdin=None) -> int:
    """Send stdin's lines, each parsed before it is sent; stop at the first bad line.

    Exit 0 when every record was committed; when something failed, the
    error's code if nothing was committed, else PartiallyCommittedError (7)
    naming the committed records' offsets.
    """
    stdin = stdin or sys.stdin
    config = _pairs(args.producer_property, "--producer-property")
    store = _open_store(args)
    # Known before the first line is read, as the console producer learns from metadata.
    partitions = store.describe_topic(args.topic).partitions
    if args.partition is not None and args.partition >= partitions:
        raise UnknownTopicOrPartitionError(
            f"partition {args.partition} of topic {args.topic!r} does not exist (the topic has {partitions})"
        )
    futures = []
    stopped: BaseException | None = None
    producer = store.producer(**config)
    try:
        for number, line in enumerate(stdin, 1):
            line = line.rstrip("\n")
            if not line and args.skip_empty:
                continue
            key, value = _split_line(line, number, args.key_separator if args.parse_key else None)
            futures.append(producer.send(args.topic, value, key=key, partition=args.partition))
    except (Exception, KeyboardInterrupt) as exc:
        stopped = exc
    finally:
        producer.close()  # commits what was sent before any failure, as Kafka's close does
    committed = [f.get() for f in futures if f.succeeded()]
    errors = [f.exception() for f in futures if f.failed()]
    for i, future in enumerate(futures, 1):
        if future.failed():
            print(f"error: record {i}: {future.exception()}", file=sys.stderr)
    if isinstance(stopped, KeyboardInterrupt):
        if committed:
            print(f"committed {len(committed)} record(s): {committed_ranges(committed)}", file=sys.stderr)
        raise stopped
    failure = None if stopped is None else error_for_exception(stopped, "produce")
    outcome = produce_outcome(committed, failure, errors)
    if outcome is not None:
        raise outcome
    out(f"{len(committed)} record(s) produced to {args.topic}")
    return 0


def _split_line(line: str, number: int, separator: str | None) -> tuple[str | None, str]:
    """A stdin line as (key, value); with a ``separator``, InvalidConfigError if the line lacks it."""
    if separator is None:
        return None, line
    key, sep, value = line.partition(separator)
    if not sep:
        raise InvalidConfigError(
            f"line {number} has no key separator {separator!r}: {line[:60]!r} (nothing from line {number} on was sent)"
        )
    return key, value


def committed_ranges(records: Iterable[RecordMetadata]) -> str:
    """Where ``records`` are, per partition as runs of offsets: ``t-0 offsets 0..2,5..5, t-1 offsets 0..0``."""
    by_partition: dict[tuple[str, int], list[int]] = {}
    for md in records:
        by_partition.setdefault((md.topic, md.partition), []).append(md.offset)
    parts = []
    for (topic, partition), offsets in sorted(by_partition.items()):
        offsets.sort()
        runs = [[offsets[0], offsets[0]]]
        for offset in offsets[1:]:
            if offset == runs[-1][1] + 1:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset])
        parts.append(f"{topic}-{partition} offsets " + ",".join(f"{a}..{b}" for a, b in runs))
    return ", ".join(parts)


def produce_outcome(
    committed: Sequence[RecordMetadata], stopped: LakelogError | None, record_errors: Sequence[BaseException]
) -> LakelogError | None:
    """The error a console produce ends with, or None when all went well.

    ``stopped``: what ended reading the input early; ``record_errors``: the
    failed records' errors. Nothing committed: a record whose outcome is
    unknown makes it CommitStateUnknownError (4), else the first failure's
    own error. Something committed and something not: PartiallyCommittedError
    (7) naming exactly what was committed.
    """
    unknown = [e for e in record_errors if isinstance(e, CommitStateUnknownError)]
    failures = [error_for_exception(e, "produce") for e in record_errors]
    first = unknown[0] if unknown else (stopped or (failures[0] if failures else None))
    if first is None:
        return None
    if not committed:
        return first
    text = f"committed {len(committed)} record(s): {committed_ranges(committed)}"
    if record_errors:
        text += f"; {len(record_errors)} record(s) failed"
        if unknown:
            text += f", {len(unknown)} of them with an unknown outcome (re-read the log)"
    text += f"; first failure: {first}; sending everything again would duplicate what was committed"
    return PartiallyCommittedError(text)


def _offset_arg(args: argparse.Namespace) -> int | None:
    """--offset as EARLIEST, LATEST or an offset (None if not given); checked before anything is opened."""
    if args.offset is None:
        return None
    if args.partition is None:
        raise InvalidOffsetError("--offset needs --partition, as in kafka-console-consumer")
    if args.offset in ("earliest", "latest"):
        return EARLIEST if args.offset == "earliest" else LATEST
    try:
        offset = int(args.offset)
    except ValueError:
        offset = -1
    if offset < 0:
        raise InvalidOffsetError(f"--offset must be earliest, latest or a non-negative number, got {args.offset!r}")
    return offset


def _starting_offsets(args: argparse.Namespace, store: Any, partitions: int) -> Any:
    offset = _offset_arg(args)
    if offset is not None:
        return {args.topic: {args.partition: offset}}
    if args.from_timestamp is not None:
        found = store.offsets_for_times(args.topic, dict.fromkeys(range(partitions), args.from_timestamp))
        return {args.topic: {p: (hit.offset if hit else LATEST) for p, hit in found.items()}}
    return "earliest" if args.from_beginning else "latest"


def cmd_consume(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    _offset_arg(args)
    store = _open_store(args)
    partitions = store.describe_topic(args.topic).partitions
    if args.partition is not None and args.partition >= partitions:
        raise UnknownTopicOrPartitionError(
            f"partition {args.partition} of topic {args.topic!r} does not exist (the topic has {partitions})"
        )
    start = _starting_offsets(args, store, partitions)
    chosen = [args.partition] if args.partition is not None else list(range(partitions))
    consumer = store.consumer(enable_auto_commit=False, client_id="console-consumer")
    count = 0
    try:
        # Partition by partition, each in offset order, up to the log end when the command started.
        for p in chosen:
            tp = (args.topic, p)
            consumer.assign([tp])
            end = consumer.end_offsets([tp])[TopicPartition(*tp)]
            begin = consumer.beginning_offsets([tp])[TopicPartition(*tp)]
            given = start[args.topic].get(p, LATEST) if isinstance(start, dict) else None
            if given is None:
                given = EARLIEST if start == "earliest" else LATEST
            consumer.seek(tp, begin if given == EARLIEST else end if given == LATEST else given)
            while consumer.position(tp) < end:
                if args.max_messages is not None and count >= args.max_messages:
                    break
                for r in consumer.poll(timeout_ms=1000):
                    if r.offset >= end or (args.max_messages is not None and count >= args.max_messages):
                        break
                    value = _decode(r.value)
                    if args.value_only:
                        out(value)
                    else:
                        kind = "CreateTime" if r.timestamp_type == 0 else "LogAppendTime"
                        out(
                            f"{kind}:{r.timestamp}\tPartition:{r.partition}\tOffset:{r.offset}\t{_decode(r.key)}\t{value}"
                        )
                    count += 1
    finally:
        consumer.close(autocommit=False)
    print(f"Processed a total of {count} messages", file=sys.stderr)


def _decode(data: bytes | bytearray | None) -> str:
    if data is None:
        return "null"
    return bytes(data).decode("utf-8", errors="backslashreplace")


def cmd_offsets(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    store = _open_store(args)
    begin = store.beginning_offsets(args.topic)
    end = store.end_offsets(args.topic)
    out(
        _table(
            ["TOPIC", "PARTITION", "EARLIEST", "LATEST", "RECORDS"],
            [[args.topic, p, begin[p], end[p], end[p] - begin[p]] for p in sorted(end)],
        )
    )


def cmd_history(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    store = _open_store(args)
    entries = store.history_entries(args.topic)
    if args.topic is not None and not entries:
        from lakelog.engine.topic_admin import require_topic

        require_topic(store._latest_topics(), args.topic)
    rows = []
    for e in entries:
        stamp = e.timestamp.isoformat(timespec="milliseconds") if e.timestamp else ""
        writer = (
            f"txn {e.transactional_id} epoch {e.transaction_epoch}"
            if e.transactional_id is not None
            else f"producer {e.producer_id}"
            if e.producer_id is not None
            else f"query {e.query_id}"
            if e.query_id is not None
            else ""
        )
        changes = [_change_text(c) for c in e.changes if args.topic is None or c.topic == args.topic]
        what = " ".join(changes) or (f"{e.topic} {e.details or ''}".strip() if e.topic else "")
        rows.append([e.version, stamp, e.operation, e.client_id or "", writer, what])
    out(_table(["VERSION", "TIME", "OPERATION", "CLIENT", "WRITER", "CHANGES"], rows))


def _change_text(change: Any) -> str:
    sign = "+" if change.action == "added" else "-"
    where = f"{change.topic}-{change.partition}"
    if change.start_offset is None:
        return f"{sign}{where}:{change.files}files"
    span = f"{change.start_offset}..{change.end_offset - 1}"
    thinned = "" if change.records == change.end_offset - change.start_offset else f"({change.records})"
    return f"{sign}{where}:{span}{thinned}"


# -- consumer groups ---------------------------------------------------------------


def cmd_groups_list(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.engine.group_admin import list_groups

    rows = [[g.group_id, g.state, g.members] for g in list_groups(_open_store(args))]
    out(_table(["GROUP", "STATE", "MEMBERS"], rows))


def cmd_groups_describe(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.engine.group_admin import describe_group

    group = describe_group(_open_store(args), args.group)
    if args.state:
        # kafka-consumer-groups --describe --state
        rows = [[group.group_id, group.assignor or "", group.state, group.generation, len(group.members)]]
        out(_table(["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "GENERATION", "#MEMBERS"], rows))
        return
    if args.members:
        # kafka-consumer-groups --describe --members [--verbose]
        headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "#PARTITIONS"]
        if args.verbose_members:
            headers += ["ASSIGNMENT", "REVOKING"]
        rows = []
        for m in group.members:
            row = [group.group_id, m.member_id, m.instance_id or "-", m.client_id, len(m.assignment)]
            if args.verbose_members:
                row += [_tps_text(m.assignment), _tps_text(m.revoking)]
            rows.append(row)
        if not group.members:
            print(f"Consumer group '{group.group_id}' has no active members.", file=sys.stderr)
        out(_table(headers, rows))
        return
    clients = {m.member_id: m.client_id for m in group.members}

    def cell(value: Any) -> Any:
        return "-" if value is None else value

    rows = []
    for p in group.partitions:
        client = clients.get(p.owner) if p.owner else None
        row = [p.committed, p.log_end_offset, p.lag, p.owner, client]
        rows.append([group.group_id, p.topic, p.partition, *(cell(v) for v in row)])
    # A live member without partitions still shows, as in kafka-consumer-groups.
    rows += [
        [group.group_id, "-", "-", "-", "-", "-", m.member_id, m.client_id] for m in group.members if not m.assignment
    ]
    if not group.members:
        # A note, not a result: stderr keeps stdout a parsable table.
        print(f"Consumer group '{group.group_id}' has no active members.", file=sys.stderr)
    else:
        print(f"Consumer group '{group.group_id}' is {group.state} (generation {group.generation}).", file=sys.stderr)
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "CLIENT-ID"]
    out(_table(headers, rows))


def _tps_text(tps: Iterable[Any]) -> str:
    """Kafka's ASSIGNMENT column: topic(p,p,...) per topic."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())) or "-"


def _reset_target(args: argparse.Namespace) -> tuple[str, Any]:
    """The ``--to-*`` option given, as group_admin.reset_offsets' ``to`` and ``value``."""
    if args.to_earliest:
        return "earliest", None
    if args.to_latest:
        return "latest", None
    if args.to_offset is not None:
        return "offset", args.to_offset
    if args.to_datetime is not None:
        try:
            return "datetime", datetime.fromisoformat(args.to_datetime)
        except ValueError as exc:
            raise InvalidConfigError(
                f"--to-datetime must be ISO 8601 like 2024-01-31T12:00:00.000Z, got {args.to_datetime!r}"
            ) from exc
    raise InvalidConfigError(
        "reset-offsets needs one of --to-earliest, --to-latest, --to-datetime DATETIME or --to-offset N"
    )


def cmd_groups_reset_offsets(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.engine.group_admin import reset_offsets

    to, value = _reset_target(args)
    offsets = reset_offsets(_open_store(args), args.group, args.topic, to=to, value=value, dry_run=not args.execute)
    if not args.execute:
        print("WARN: dry run, nothing committed; add --execute to reset the offsets.", file=sys.stderr)
    rows = [[args.group, tp.topic, tp.partition, offset] for tp, offset in sorted(offsets.items())]
    out(_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))


def cmd_groups_delete(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.engine.group_admin import delete_group

    delete_group(_open_store(args), args.group)
    out(f"Deletion of requested consumer groups ('{args.group}') was successful.")


# -- perf ------------------------------------------------------------------------


def _baseline_dir(args: argparse.Namespace, kind: str, needed: bool = True) -> contextlib.AbstractContextManager:
    """The run's own scratch directory for baselines (None when not ``needed``); removed afterwards."""
    from lakelog.benchmarks.scratch import scratch_dir

    return scratch_dir(kind, args.work_dir) if needed else contextlib.nullcontext(None)


def _check_perf_args(args: argparse.Namespace) -> None:
    from lakelog.benchmarks.scratch import check_work_dir

    check_work_dir(args.work_dir)
    if hasattr(args, "topic"):
        validate_topic_name(args.topic)


def cmd_perf_produce(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.produce_consume import perf_produce_dataframe, perf_produce_producer, ratio

    _check_perf_args(args)
    store = _open_store(args, create=True)
    if args.topic not in store.list_topics():
        store.create_topic(args.topic, partitions=args.partitions)
    partitions = store.describe_topic(args.topic).partitions
    progress = (lambda msg: print(msg, file=sys.stderr)) if args.progress else (lambda _msg: None)
    with _baseline_dir(args, "produce", args.compare_plain) as work:
        workload = {
            "num_records": args.num_records,
            "record_size": args.record_size,
            "batch_size": args.batch_size,
            "keys": args.keys,
            "compare_plain": args.compare_plain,
            "plain_path": f"{work}/plain-delta" if work else "",
            "warmup_batches": args.warmup_batches,
            "progress": progress,
        }
        if args.api == "producer":
            ours, plain = perf_produce_producer(store, args.topic, **workload)
        else:
            ours, plain = perf_produce_dataframe(store, args.topic, partitions=partitions, **workload)
    out(f"lakelog:     {ours.producer_summary()}")
    if plain is not None:
        out(f"plain delta: {plain.producer_summary()}")
        out(f"throughput ratio lakelog/plain delta: {ratio(ours, plain):.2f}")


def cmd_perf_consume(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.produce_consume import perf_consume, perf_consume_group, ratio

    if args.group and args.partition is not None:
        raise InvalidConfigError("--group reads the whole topic; drop --partition")
    store = _open_store(args)
    if args.group:
        ours, plain = perf_consume_group(
            store, args.topic, group_id=args.group, compare_plain=args.compare_plain, repeats=args.repeats
        )
    else:
        ours, plain = perf_consume(
            store, args.topic, partition=args.partition, compare_plain=args.compare_plain, repeats=args.repeats
        )
    started = datetime.now(tz=UTC).timestamp() - ours.seconds
    out("lakelog:\n" + ours.consumer_summary(started))
    if plain is not None:
        out("plain delta:\n" + plain.consumer_summary(started))
        out(f"throughput ratio lakelog/plain delta: {ratio(ours, plain):.2f}")


def cmd_perf_transactions(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.produce_consume import perf_transactions

    _check_perf_args(args)
    store = _open_store(args, create=True)
    if args.topic not in store.list_topics():
        store.create_topic(args.topic, partitions=args.partitions)
    with _baseline_dir(args, "transactions", args.compare_plain) as work:
        ours, plain = perf_transactions(
            store,
            args.topic,
            transactions=args.num_transactions,
            records=args.records,
            record_size=args.record_size,
            compare_plain=args.compare_plain,
            plain_path=f"{work}/plain-delta" if work else "",
        )
    for result in (ours, plain):
        if result is not None:
            out(
                f"{result.label}: {len(result.latencies_ms)} commits of {args.records} records, "
                f"p50 {result.percentile(0.5):.1f} ms, p99 {result.percentile(0.99):.1f} ms"
            )


def cmd_perf_commit(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.commit import SECTIONS, perf_commit
    from lakelog.benchmarks.scratch import check_work_dir

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown or not sections:
        raise InvalidConfigError(f"--sections takes {', '.join(SECTIONS)}; got {args.sections!r}")
    check_work_dir(args.work_dir, s3=False)
    perf_commit(
        sections,
        commits=args.commits,
        records=args.num_records,
        record_size=args.record_size,
        processes=args.processes,
        batches=args.batches,
        small_versions=args.small_versions,
        large_versions=args.large_versions,
        work_dir=args.work_dir,
        out=out,
    )


def cmd_perf_groups(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.groups import perf_groups
    from lakelog.benchmarks.scratch import check_work_dir

    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise InvalidConfigError(f"--sizes takes group sizes like 1,4,8,16; got {args.sizes!r}") from exc
    if not sizes or min(sizes) < 1:
        raise InvalidConfigError(f"--sizes takes group sizes like 1,4,8,16; got {args.sizes!r}")
    check_work_dir(args.work_dir, s3=False)
    perf_groups(
        sizes,
        records=args.num_records,
        repeat=args.repeat,
        idle_seconds=args.idle_seconds,
        kafka=not args.no_kafka,
        work_dir=args.work_dir,
        out=out,
    )


def cmd_perf_serve(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.scratch import check_work_dir
    from lakelog.benchmarks.serve import perf_serve

    check_work_dir(args.work_dir, s3=False)
    perf_serve(
        records=args.num_records,
        record_size=args.record_size,
        rate=args.rate,
        seconds=args.seconds,
        repeat=args.repeat,
        kafka=not args.no_kafka,
        work_dir=args.work_dir,
        out=out,
    )


def cmd_perf_stream(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.stream import perf_stream

    _check_perf_args(args)
    store = _open_store(args, create=True)
    with _baseline_dir(args, "stream") as work:
        figures = perf_stream(
            store,
            records=args.num_records,
            record_size=args.record_size,
            partitions=args.partitions,
            samples=args.latency_samples,
            work_dir=work,
        )
    for line in figures.lines():
        out(line)


def cmd_maintain(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.compaction.maintain import maintain

    store = _open_store(args)
    report = maintain(
        store,
        topics=args.topic or None,
        dry_run=args.dry_run,
        optimize=not args.no_optimize,
        vacuum=not args.no_vacuum,
        vacuum_retention_hours=args.vacuum_retention_hours,
        spark=store.spark if args.spark else None,
        progress=lambda text: print(f"... {text}", file=sys.stderr, flush=True),
    )
    for line in report.lines():
        out(line)


def cmd_check(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    from lakelog.engine.log_check import check_store, repair_store

    if args.drop_missing_files and not args.repair:
        raise InvalidConfigError("--drop-missing-files needs --repair")
    store = _open_store(args)
    report = check_store(store, args.topic, grace_s=args.grace_seconds)
    if args.repair and not report.ok:
        for line in repair_store(store, report, drop_missing_files=args.drop_missing_files):
            out(line)
        report = check_store(store, args.topic, grace_s=args.grace_seconds)
    for line in report.lines():
        out(line)
    return 0 if report.ok else CHECK_FAILED


def cmd_serve(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.kafka_endpoint.server import serve

    _, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidConfigError(f"--listen must be HOST:PORT, got {args.listen!r}")
    store = _open_store(args)

    def ready(server: Any) -> None:
        out(f"lakelog serve: Kafka protocol on {server.host}:{server.port} for store {store.uri}")
        sys.stdout.flush()

    serve(store, args.listen, ready)


def cmd_perf_maintain(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.benchmarks.maintain import perf_maintain

    _check_perf_args(args)
    store = _open_store(args, create=True)
    with _baseline_dir(args, "maintain") as work:
        perf_maintain(
            store,
            commits=args.commits,
            small=args.small,
            large=args.large,
            compaction_records=args.compaction_records,
            work_dir=work,
            out=lambda line: out(line) or sys.stdout.flush(),
        )


def cmd_config(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.engine.settings import reference_table

    if args.reference:
        out(reference_table())
        return
    settings = load_settings(args.conf)
    rows = [[key, value, settings.origins.get(key, "default")] for key, value in sorted(settings.shown().items())]
    out(_table(["KEY", "VALUE", "FROM"], rows))


def cmd_quickstart(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    from lakelog.engine.quickstart import TOPIC, run_quickstart
    from lakelog.engine.store import LogStore
    from lakelog.kafka_endpoint.quickstart import run_kafka_quickstart

    path = args.store or os.environ.get(STORE_ENV) or "quickstart-store"
    run_quickstart(path, out)
    run_kafka_quickstart(LogStore.open(path, create=False), TOPIC, out)


# -- parser ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakelog",
        description="Kafka-style topics in a Delta Lake table.",
        epilog="Exit codes: 0 ok, 1 fatal (incl. no store at the path), 2 invalid input, 3 retriable, "
        "4 outcome unknown, 5 topic exists or group not empty, 6 unknown topic, partition or group, "
        "7 partially committed (produce: stderr lists what was committed), 8 check found violations.",
    )
    parser.add_argument("--store", help=f"store path or URI (default: ${STORE_ENV})")
    parser.add_argument(
        "--conf", metavar="FILE", help="settings file laid over conf/lakelog.conf (default: $LAKELOG_CONF_FILE)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what lakelog does")
    commands = parser.add_subparsers(dest="command", required=True)

    topics = commands.add_parser("topics", help="create, list, describe, delete, alter topics")
    tsub = topics.add_subparsers(dest="action", required=True)
    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("topic")
    p.add_argument("--partitions", type=COUNT, help="default: the num.partitions setting (1)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)")
    p.set_defaults(func=cmd_topics_create)
    p = tsub.add_parser("list", help="list topics")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    p.set_defaults(func=cmd_topics_list)
    p = tsub.add_parser("describe", help="partitions, offsets and configs of a topic (all topics if none given)")
    p.add_argument("topic", nargs="?")
    p.add_argument("--all-configs", action="store_true", help="also list defaults")
    p.set_defaults(func=cmd_topics_describe)
    p = tsub.add_parser("delete", help="delete a topic and its records")
    p.add_argument("topic")
    p.set_defaults(func=cmd_topics_delete)
    p = tsub.add_parser("alter", help="add partitions or change configs")
    p.add_argument("topic")
    p.add_argument("--partitions", type=COUNT, help="new (larger) partition count")
    p.add_argument("--add-config", action="append", metavar="KEY=VALUE")
    p.add_argument("--delete-config", action="append", metavar="KEY")
    p.set_defaults(func=cmd_topics_alter)

    p = commands.add_parser("produce", help="send stdin lines as records")
    p.add_argument("topic")
    p.add_argument("--parse-key", action="store_true", help="split each line into key and value")
    p.add_argument("--key-separator", default="\t", help="separator for --parse-key (default: tab)")
    p.add_argument("--partition", type=NON_NEGATIVE)
    p.add_argument("--skip-empty", action="store_true", help="ignore empty lines")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_produce)

    p = commands.add_parser("consume", help="print records of a topic")
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--partition", type=NON_NEGATIVE)
    p.add_argument("--offset", help="earliest, latest or a number (needs --partition)")
    p.add_argument("--from-timestamp", type=NON_NEGATIVE, metavar="MS", help="start at the first record at or after MS")
    p.add_argument("--max-messages", type=NON_NEGATIVE, help="stop after this many records (default: all)")
    p.add_argument("--value-only", action="store_true", help="print values only")
    p.set_defaults(func=cmd_consume)

    p = commands.add_parser("offsets", help="earliest and latest offset of each partition")
    p.add_argument("topic")
    p.set_defaults(func=cmd_offsets)

    p = commands.add_parser(
        "history",
        help="the store's commits: operation, client, producer/transaction, offsets added (+) and removed (-)",
    )
    p.add_argument("--topic")
    p.set_defaults(func=cmd_history)

    groups = commands.add_parser("groups", help="list, describe, reset offsets of, delete consumer groups")
    gsub = groups.add_subparsers(dest="action", required=True)
    p = gsub.add_parser("list", help="groups with their state and live member count")
    p.set_defaults(func=cmd_groups_list)
    p = gsub.add_parser("describe", help="a group's committed offsets, lag and members")
    p.add_argument("--group", required=True)
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="the group's live members and their assignment")
    shown.add_argument("--state", action="store_true", help="the group's state, assignor, generation, member count")
    p.add_argument("--verbose", dest="verbose_members", action="store_true", help="with --members: the partitions")
    p.set_defaults(func=cmd_groups_describe)
    p = gsub.add_parser("reset-offsets", help="set a group's committed offsets (dry run unless --execute)")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", action="append", required=True, help="topic whose partitions to reset (repeatable)")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument(
        "--to-datetime",
        metavar="DATETIME",
        help="the first offset at or after an ISO 8601 time (no zone: UTC)",
    )
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N, clamped into the log")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")
    p.set_defaults(func=cmd_groups_reset_offsets)
    p = gsub.add_parser("delete", help="delete a group's offsets and state (it must have no live members)")
    p.add_argument("--group", required=True)
    p.set_defaults(func=cmd_groups_delete)

    perf = commands.add_parser("perf", help="throughput tests like kafka-*-perf-test")
    psub = perf.add_subparsers(dest="action", required=True)
    p = psub.add_parser("produce")
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--num-records", type=COUNT, required=True)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--partitions", type=COUNT, default=8, help="partitions of the topic if it is created")
    p.add_argument("--batch-size", type=COUNT, default=100_000, help="records per commit")
    p.add_argument("--keys", type=NON_NEGATIVE, default=0, help="distinct keys (0: keyless records)")
    p.add_argument("--api", choices=["dataframe", "producer"], default="dataframe")
    p.add_argument("--compare-plain", action="store_true", help="also append the same rows with plain Delta")
    p.add_argument("--warmup-batches", type=NON_NEGATIVE, default=1)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_produce)
    p = psub.add_parser("consume")
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--partition", type=NON_NEGATIVE, help="read one partition (default: all)")
    p.add_argument("--repeats", type=COUNT, default=3)
    p.add_argument("--compare-plain", action="store_true", help="also read with plain Delta and the same filter")
    p.add_argument("--group", help="consume through a member of this group (to the client, as Arrow)")
    p.set_defaults(func=cmd_perf_consume)
    p = psub.add_parser("transactions", help="latency of small transactions")
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--partitions", type=COUNT, default=8, help="partitions of the topic if it is created")
    p.add_argument("--num-transactions", type=COUNT, default=50)
    p.add_argument("--records", type=COUNT, default=10, help="records per transaction")
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--compare-plain", action="store_true", help="also append as many rows with plain Delta")
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_transactions)
    p = psub.add_parser(
        "commit", help="commit latency, throughput, contention, time to first ack, growth (no Spark, no --store)"
    )
    p.add_argument("--sections", default="latency,throughput,contention,first-ack,growth")
    p.add_argument("--commits", type=COUNT, default=300, help="one-record commits for latency")
    p.add_argument("--num-records", type=COUNT, default=1_000_000, help="records for throughput")
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--processes", type=COUNT, default=4, help="contending processes")
    p.add_argument("--batches", type=COUNT, default=100, help="100-record batches per contending process")
    p.add_argument("--small-versions", type=COUNT, default=100)
    p.add_argument("--large-versions", type=COUNT, default=20_000)
    p.add_argument("--work-dir", help="where the temporary stores go (default: the system's temp directory)")
    p.set_defaults(func=cmd_perf_commit)
    p = psub.add_parser(
        "groups", help="consumer groups of N processes: throughput, rebalances, duplicates, next to a Kafka broker"
    )
    p.add_argument("--sizes", default="1,4,8,16", help="group sizes (members)")
    p.add_argument("--num-records", type=COUNT, default=1_000_000)
    p.add_argument("--repeat", type=COUNT, default=3, help="throughput runs per size and side (median reported)")
    p.add_argument(
        "--idle-seconds", type=_float_at_least(0), default=60, help="how long to count an idle group's commits"
    )
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker side")
    p.add_argument("--work-dir", help="where the temporary stores go (default: the system's temp directory)")
    p.set_defaults(func=cmd_perf_groups)
    p = psub.add_parser(
        "serve", help="one Kafka client against lakelog serve and a Kafka broker: produce, latency, fetch"
    )
    p.add_argument("--num-records", type=COUNT, default=1_000_000)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--rate", type=COUNT, default=1000, help="records/s of the fixed-rate latency run")
    p.add_argument("--seconds", type=_float_at_least(1), default=20, help="length of the fixed-rate run")
    p.add_argument("--repeat", type=COUNT, default=1, help="interleaved runs per side (median reported)")
    p.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka broker side")
    p.add_argument("--work-dir", help="where the temporary store goes (default: the system's temp directory)")
    p.set_defaults(func=cmd_perf_serve)
    p = psub.add_parser("stream", help="streaming copy topic -> topic vs a plain Delta stream copy")
    p.add_argument("--num-records", type=COUNT, default=200_000)
    p.add_argument("--record-size", type=COUNT, default=100)
    p.add_argument("--partitions", type=COUNT, default=8)
    p.add_argument("--latency-samples", type=COUNT, default=30)
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_stream)

    p = psub.add_parser("maintain", help="reads before/after OPTIMIZE, tail reads as a topic grows, compaction")
    p.add_argument("--commits", type=COUNT, default=2000, help="small commits of 50 records")
    p.add_argument("--small", type=COUNT, default=1_000_000, help="records of the smaller growth topic")
    p.add_argument("--large", type=COUNT, default=10_000_000, help="records of the larger growth topic")
    p.add_argument("--compaction-records", type=COUNT, default=1_000_000)
    p.add_argument("--work-dir", help=WORK_DIR_HELP)
    p.set_defaults(func=cmd_perf_maintain)

    p = commands.add_parser(
        "maintain", help="retention, log compaction and OPTIMIZE as each topic's config asks, then VACUUM"
    )
    p.add_argument("--topic", action="append", help="only this topic (repeatable; default: all, incl. internal)")
    p.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    p.add_argument("--no-optimize", action="store_true", help="skip OPTIMIZE (file compaction)")
    p.add_argument("--no-vacuum", action="store_true", help="skip VACUUM and Delta log cleanup")
    p.add_argument(
        "--vacuum-retention-hours",
        type=_float_at_least(0),
        help="delete unreferenced files older than this (default: delta.deletedFileRetentionDuration, 7 days)",
    )
    p.add_argument("--spark", action="store_true", help="rewrite partitions as Spark tasks (default: in-process)")
    p.set_defaults(func=cmd_maintain)

    p = commands.add_parser(
        "check", help="verify every partition: files present and readable, stats true, offsets dense and unique"
    )
    p.add_argument("--topic", help="only this topic (default: all, incl. internal)")
    p.add_argument("--repair", action="store_true", help="remove stray temporary files, then check again")
    p.add_argument(
        "--drop-missing-files",
        action="store_true",
        help="with --repair: drop references to missing data files, recording the offsets they held as lost",
    )
    p.add_argument(
        "--grace-seconds",
        type=_float_at_least(0),
        default=3600.0,
        help="temporary files younger than this belong to a writer in flight (default 3600)",
    )
    p.set_defaults(func=cmd_check)

    p = commands.add_parser(
        "serve",
        help="a Kafka-protocol endpoint for the store: Kafka clients produce, fetch and list offsets",
        description="Kafka clients and tools reach the store with bootstrap.servers=HOST:PORT (like "
        "kafka-server-start, but stateless: the agent is the leader of every partition and the coordinator of "
        "every group and transaction; several agents may serve one store). Produce is acknowledged after the "
        "Delta commit; idempotent and transactional producers, consumer groups (subscribe), offsets, topic and "
        "group admin work as on a broker. Stop with SIGTERM or Ctrl-C (requests in flight finish).",
    )
    p.add_argument("--listen", default="127.0.0.1:9092", help="HOST:PORT to listen on (port 0: any free port)")
    p.set_defaults(func=cmd_serve)

    p = commands.add_parser("config", help="the settings in effect and where each came from")
    p.add_argument("--reference", action="store_true", help="print the reference table of every setting (Markdown)")
    p.set_defaults(func=cmd_config)

    p = commands.add_parser("quickstart", help="create a topic, produce, consume, show offsets and history")
    p.set_defaults(func=cmd_quickstart)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code (see the module docstring). Every failure is reported
    as one ``error:`` line, with the traceback only under ``-v``. Malformed arguments
    (a negative count, a missing option) are argparse's: usage on stderr, SystemExit(2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    what = " ".join(part for part in (args.command, getattr(args, "action", None)) if part)
    try:
        # Settings that do not load fail the command where it loads them (config --reference needs none).
        with contextlib.suppress(LakelogError):
            redact_logs(load_settings(args.conf))
        code = args.func(args, print)
        return int(code or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        error = error_for_exception(exc, what, _jvm_message(exc))
        if args.verbose:
            traceback.print_exc()
        print(f"error: {redact_text(str(error))}", file=sys.stderr)
        if isinstance(error, UnexpectedError) and not args.verbose:
            print("(run again with -v to see the traceback)", file=sys.stderr)
        return error.exit_code


def _jvm_message(exc: BaseException) -> str | None:
    """A Py4J error's Java exception as ``class: message`` (its own text is Py4J's call trace)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return None
    try:
        return str(java.toString())
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
