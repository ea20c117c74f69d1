"""``lakelog consume``: kafka-console-consumer. Prints records as Kafka's DefaultMessageFormatter
does (the value alone, one a line, unless ``--property print.key=true`` and friends), follows
new records until Ctrl-C / SIGTERM, ``--max-messages`` or ``--timeout-ms``; with ``--group`` it
commits what it printed as a member of the group and resumes there on the next run."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakelog.cli.arguments import (
    NON_NEGATIVE,
    Out,
    add_topic_args,
    boolean,
    client_config,
    decode,
    note,
    open_store,
    pairs,
    properties_file,
    require_partition,
    topic_arg,
    unescape,
)
from lakelog.engine.errors import InvalidConfigError, InvalidOffsetError
from lakelog.engine.groups.offsets_topic import check_offset
from lakelog.engine.offsets import EARLIEST, LATEST
from lakelog.engine.records import check_lookup_timestamp
from lakelog.engine.topics import TopicPartition

if TYPE_CHECKING:
    from lakelog.store import Store

# --formatter values that name Kafka's default formatter, the only one there is here.
DEFAULT_FORMATTERS = frozenset(
    {
        "kafka.tools.DefaultMessageFormatter",
        "org.apache.kafka.tools.consumer.DefaultMessageFormatter",
        "DefaultMessageFormatter",
        "default",
    }
)
FORMATTER_KEYS = (
    "print.timestamp",
    "print.key",
    "print.offset",
    "print.partition",
    "print.headers",
    "print.value",
    "key.separator",
    "line.separator",
    "headers.separator",
    "headers.key.separator",
    "null.literal",
    # Accepted for Kafka's habits: records are printed as UTF-8 text whatever these say.
    "key.deserializer",
    "value.deserializer",
    "headers.deserializer",
)
COMMIT_INTERVAL_S = 5.0


@dataclass(frozen=True)
class Formatter:
    """Kafka's DefaultMessageFormatter: the printed fields in its order, separated by key.separator."""

    print_timestamp: bool = False
    print_key: bool = False
    print_offset: bool = False
    print_partition: bool = False
    print_headers: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> Formatter:
        unknown = sorted(set(props) - set(FORMATTER_KEYS))
        if unknown:
            raise InvalidConfigError(
                f"unknown --property {', '.join(map(repr, unknown))} for the console consumer; "
                f"known: {', '.join(FORMATTER_KEYS[:11])}"
            )

        def flag(key: str, default: str = "false") -> bool:
            return boolean(props.get(key, default), f"--property {key}")

        return cls(
            print_timestamp=flag("print.timestamp"),
            print_key=flag("print.key"),
            print_offset=flag("print.offset"),
            print_partition=flag("print.partition"),
            print_headers=flag("print.headers"),
            print_value=flag("print.value", "true"),
            key_separator=unescape(props.get("key.separator", "\t")),
            line_separator=unescape(props.get("line.separator", "\n")),
            headers_separator=unescape(props.get("headers.separator", ",")),
            headers_key_separator=unescape(props.get("headers.key.separator", ":")),
            null_literal=unescape(props.get("null.literal", "null")),
        )

    def format(self, r: Any) -> str:
        fields = []
        if self.print_timestamp:
            kind = "CreateTime" if r.timestamp_type == 0 else "LogAppendTime"
            fields.append(f"{kind}:{r.timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{r.partition}")
        if self.print_offset:
            fields.append(f"Offset:{r.offset}")
        if self.print_headers:
            headers = r.headers or []
            fields.append(
                self.headers_separator.join(
                    f"{k}{self.headers_key_separator}{decode(v, self.null_literal)}" for k, v in headers
                )
                if headers
                else "NO_HEADERS"
            )
        if self.print_key:
            fields.append(decode(r.key, self.null_literal))
        if self.print_value:
            fields.append(decode(r.value, self.null_literal))
        return self.key_separator.join(fields) + self.line_separator


# The old lakelog output: what print.timestamp, print.partition, print.offset and print.key give.
METADATA_PROPERTIES = {
    "print.timestamp": "true",
    "print.partition": "true",
    "print.offset": "true",
    "print.key": "true",
}


def formatter(args: argparse.Namespace) -> Formatter:
    if args.formatter is not None and args.formatter not in DEFAULT_FORMATTERS:
        raise InvalidConfigError(
            f"--formatter {args.formatter!r}: only Kafka's default formatter (kafka.tools.DefaultMessageFormatter) "
            "is available; choose fields with --property print.key=true etc."
        )
    props = dict(METADATA_PROPERTIES) if args.print_metadata else {}
    props.update(properties_file(args.formatter_config, "--formatter-config"))
    props.update(pairs(args.property, "--property", commas=False))
    return Formatter.from_properties(props)


def offset_arg(args: argparse.Namespace) -> int | None:
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
    return check_offset(offset, "--offset")


def _check(args: argparse.Namespace) -> None:
    offset_arg(args)
    if args.from_timestamp is not None:
        check_lookup_timestamp(args.from_timestamp, "--from-timestamp")
    if args.group is not None:
        if args.offset is not None:
            raise InvalidConfigError("--group and --offset cannot be given together (the group's offsets decide)")
        if args.from_timestamp is not None:
            raise InvalidConfigError("--group and --from-timestamp cannot be given together")
    if args.offset is not None and args.from_beginning:
        raise InvalidConfigError("--from-beginning and --offset cannot be given together")


class _StopRequest:
    """Ctrl-C or SIGTERM, noted by a signal handler and acted on between polls: an exception
    raised inside the client's or a library's code (a Delta load, a Parquet read) could leave
    it half done. A second Ctrl-C interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, _frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[_StopRequest]:
    stop = _StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = client_config(
        args.consumer_config, "--consumer.config", args.consumer_property, "--consumer-property"
    )
    if args.isolation_level is not None:
        config["isolation.level"] = args.isolation_level
    config.setdefault("client.id", "console-consumer")
    if args.group is not None:
        given = config.get("group.id")
        if given not in (None, args.group):
            raise InvalidConfigError(f"--group {args.group!r} and group.id={given!r} differ; give one")
        config["group.id"] = args.group
        # The group's committed offsets decide; without them, where --from-beginning says.
        config["auto.offset.reset"] = "earliest" if args.from_beginning else config.get("auto.offset.reset", "latest")
    elif "group.id" in config:
        raise InvalidConfigError("give the group with --group (group.id in a consumer config needs it too)")
    # Positions are committed by this tool (what it printed), never ahead of it.
    config["enable.auto.commit"] = False
    from lakelog.engine.client_config import CONSUMER_CONFIG_KEYS
    from lakelog.engine.config import resolve_config

    resolve_config(CONSUMER_CONFIG_KEYS, config, what="consumer config")  # before the store is opened
    return config


def cmd_consume(args: argparse.Namespace, out: Out) -> int:
    topic = topic_arg(args, "consume")
    assert topic is not None
    _check(args)
    fmt = formatter(args)
    config = consumer_config(args)
    store = open_store(args)
    consumer = store.consumer(**config)
    try:
        # The console consumer's metadata request: it creates a missing topic when the store's
        # auto.create.topics.enable and the consumer's allow.auto.create.topics say so.
        partitions = len(consumer.partitions_for_topic(topic))
        require_partition(topic, args.partition, partitions)
    except BaseException:
        consumer.close(autocommit=False)
        raise
    chosen = [args.partition] if args.partition is not None else list(range(partitions))
    tps = [TopicPartition(topic, p) for p in chosen]
    count = 0
    unprinted: dict[TopicPartition, int] = {}  # first offset polled but not printed
    committed: dict[TopicPartition, int] = {}  # what this run last committed
    stdout = sys.stdout
    try:
        with _stop_on_signals() as stop:
            try:
                if args.group is not None and args.partition is None:
                    consumer.subscribe([topic])
                else:
                    consumer.assign(tps)
                    if args.group is None:
                        _seek(consumer, store, args, topic, tps)
                last_record = time.monotonic()
                next_commit = time.monotonic() + COMMIT_INTERVAL_S
                while not stop.requested and (args.max_messages is None or count < args.max_messages):
                    wait_ms = 500 if args.timeout_ms is None else max(0, min(500, args.timeout_ms))
                    limit = None if args.max_messages is None else args.max_messages - count
                    records = consumer.poll(timeout_ms=wait_ms, max_records=limit)
                    now = time.monotonic()
                    for r in records:
                        if args.max_messages is not None and count >= args.max_messages:
                            unprinted.setdefault(TopicPartition(r.topic, r.partition), r.offset)
                            continue
                        stdout.write(fmt.format(r))
                        count += 1
                    if records:
                        stdout.flush()
                        last_record = now
                    elif args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
                        break
                    if args.group is not None and now >= next_commit:
                        _commit(consumer, unprinted, committed)
                        next_commit = now + COMMIT_INTERVAL_S
            except KeyboardInterrupt:
                pass
            if args.group is not None:
                _commit(consumer, unprinted, committed)
    finally:
        with contextlib.suppress(Exception):
            stdout.flush()
        consumer.close(autocommit=False)
    note(f"Processed a total of {count} messages")
    return 0


def _commit(consumer: Any, unprinted: dict[TopicPartition, int], done: dict[TopicPartition, int]) -> None:
    """Commit, per partition this member holds, the offset after what was printed (its position when
    every polled record was printed): the next run of the group starts right there. Nothing is
    written when that is what ``done`` (the last commit) holds: an idle follower writes nothing."""
    held = consumer.assignment()
    offsets = {tp: unprinted[tp] if tp in unprinted else consumer.position(tp) for tp in held}
    if offsets and any(done.get(tp) != offset for tp, offset in offsets.items()):
        consumer.commit(offsets)
        done.update(offsets)


def _seek(consumer: Any, store: Store, args: argparse.Namespace, topic: str, tps: list[TopicPartition]) -> None:
    """Start positions without a group: --offset, --from-timestamp, --from-beginning, else the log end."""
    begin = consumer.beginning_offsets(tps)
    end = consumer.end_offsets(tps)
    offset = offset_arg(args)
    if offset is not None:
        tp = tps[0]
        consumer.seek(tp, begin[tp] if offset == EARLIEST else end[tp] if offset == LATEST else offset)
        return
    if args.from_timestamp is not None:
        found = store.offsets_for_times(topic, dict.fromkeys((tp.partition for tp in tps), args.from_timestamp))
        for tp in tps:
            hit = found[tp.partition]
            consumer.seek(tp, hit.offset if hit is not None else end[tp])
        return
    for tp in tps:
        consumer.seek(tp, begin[tp] if args.from_beginning else end[tp])


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "consume",
        parents=parents,
        help="print records of a topic, following new ones (kafka-console-consumer)",
        description="Prints each record's value on a line (--property print.key=true, print.timestamp, "
        "print.offset, print.partition, print.headers add fields) and waits for new records until Ctrl-C or "
        "SIGTERM, --max-messages or --timeout-ms. With --group, what was printed is committed for the group "
        "and the next run resumes there.",
    )
    add_topic_args(p, "the topic to read")
    p.add_argument("--group", help="consume as a member of this group, committing what was printed")
    p.add_argument(
        "--from-beginning", action="store_true", help="start at the log start (a group: if it has no offsets)"
    )
    p.add_argument("--partition", type=NON_NEGATIVE, help="read only this partition")
    p.add_argument("--offset", help="earliest, latest or a number (needs --partition)")
    p.add_argument("--from-timestamp", type=NON_NEGATIVE, metavar="MS", help="start at the first record at or after MS")
    p.add_argument("--max-messages", type=NON_NEGATIVE, help="exit after this many records")
    p.add_argument("--timeout-ms", type=NON_NEGATIVE, help="exit when no record arrived for this long")
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help=f"formatter property (repeatable): {', '.join(FORMATTER_KEYS[:11])}",
    )
    p.add_argument("--formatter", help="only Kafka's default, kafka.tools.DefaultMessageFormatter")
    p.add_argument("--formatter-config", metavar="FILE", help="formatter properties from a Java properties file")
    p.add_argument(
        "--print-metadata",
        action="store_true",
        help="print timestamp, partition, offset and key before the value (all four print.* properties)",
    )
    p.add_argument("--value-only", action="store_true", help="print values only (the default)")
    p.add_argument("--consumer-property", action="append", metavar="KEY=VALUE", help="consumer config (repeatable)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="consumer config properties file")
    p.add_argument("--isolation-level", choices=["read_committed"], help="only read_committed")
    p.set_defaults(func=cmd_consume)
