"""``lakelog offsets``: GetOffsetShell (``--topic T --partitions 0,1 --time -1|-2|-3|<ms>`` printing
``T:p:offset`` lines), and ``offsets T``: a table of each partition's earliest and latest offsets."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakelog.cli.arguments import Out, open_store
from lakelog.cli.tables import table
from lakelog.engine.errors import InvalidConfigError, UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from lakelog.store import Store

LATEST_TIME, EARLIEST_TIME, MAX_TIMESTAMP_TIME = -1, -2, -3
_NAMED_TIMES = {"latest": LATEST_TIME, "earliest": EARLIEST_TIME, "max-timestamp": MAX_TIMESTAMP_TIME}


def parse_time(text: str) -> int:
    """--time: -1 / latest, -2 / earliest, -3 / max-timestamp, or ms since the epoch (GetOffsetShell's)."""
    value = _NAMED_TIMES.get(text.strip().lower())
    if value is not None:
        return value
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < MAX_TIMESTAMP_TIME:
        raise InvalidConfigError(
            "--time must be -1 (latest), -2 (earliest), -3 (max-timestamp) or a timestamp in ms since the "
            f"epoch, got {text!r}"
        )
    return value


def parse_partitions(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        chosen = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        chosen = []
    if not chosen or chosen[0] < 0:
        raise InvalidConfigError(f"--partitions must be partition numbers like 0,1, got {text!r}")
    return chosen


def cmd_offsets(args: argparse.Namespace, out: Out) -> None:
    if args.topic is not None and args.topic_flag is None and args.time is None and args.partitions is None:
        _table(args, out)
        return
    if args.topic is not None and args.topic_flag is not None and args.topic != args.topic_flag:
        raise InvalidConfigError(f"offsets: two topics given ({args.topic!r} and --topic {args.topic_flag!r})")
    topic = args.topic_flag or args.topic
    time = parse_time(args.time) if args.time is not None else LATEST_TIME
    chosen = parse_partitions(args.partitions)
    store = open_store(args)
    names = [topic] if topic is not None else store.list_topics(include_internal=not args.exclude_internal_topics)
    for name in names:
        for p, offset in _offsets(store, name, chosen, time):
            out(f"{name}:{p}:{offset}")


def _offsets(store: Store, topic: str, chosen: list[int] | None, time: int) -> list[tuple[int, Any]]:
    partitions = store.describe_topic(topic).partitions
    wanted = chosen if chosen is not None else list(range(partitions))
    missing = [p for p in wanted if p >= partitions]
    if missing:
        raise UnknownTopicOrPartitionError(
            f"partition {missing[0]} of topic {topic!r} does not exist (the topic has {partitions})"
        )
    if time == LATEST_TIME:
        end = store.end_offsets(topic)
        return [(p, end[p]) for p in wanted]
    if time == EARLIEST_TIME:
        begin = store.beginning_offsets(topic)
        return [(p, begin[p]) for p in wanted]
    if time == MAX_TIMESTAMP_TIME:
        newest = store.max_timestamp_offsets(topic, wanted)
        return [(p, newest[p].offset) for p in wanted if newest[p] is not None]
    found = store.offsets_for_times(topic, dict.fromkeys(wanted, time))
    # No record at or after the time: Kafka's ListOffsets answers offset -1 and GetOffsetShell prints nothing.
    return [(p, found[p].offset) for p in wanted if found[p] is not None]


def _table(args: argparse.Namespace, out: Out) -> None:
    store = open_store(args)
    begin = store.beginning_offsets(args.topic)
    end = store.end_offsets(args.topic)
    rows = [[args.topic, p, begin[p], end[p], end[p] - begin[p]] for p in sorted(end)]
    out(table(["TOPIC", "PARTITION", "EARLIEST", "LATEST", "RECORDS"], rows))


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "offsets",
        parents=parents,
        help="offsets of a topic's partitions (GetOffsetShell: --topic T --time -1|-2|-3|MS)",
        description="`offsets T` prints a table of each partition's earliest and latest offset and record count. "
        "With --topic, --partitions or --time it answers as Kafka's GetOffsetShell: one T:PARTITION:OFFSET "
        "line per partition (every topic without --topic); --time -1 (latest, the default), -2 (earliest), "
        "-3 (max-timestamp: the record with the largest timestamp) or MS (the first offset whose timestamp is "
        ">= MS); partitions with no such record are left out.",
    )
    p.add_argument("topic", nargs="?", help="the topic (a table of offsets)")
    p.add_argument("--topic", dest="topic_flag", metavar="TOPIC", help="the topic (GetOffsetShell lines)")
    p.add_argument("--partitions", metavar="P,P", help="only these partitions, e.g. 0,1")
    p.add_argument("--time", help="-1 or latest, -2 or earliest, -3 or max-timestamp, or a timestamp in ms")
    p.add_argument("--exclude-internal-topics", action="store_true", help="without --topic: skip internal topics")
    p.set_defaults(func=cmd_offsets)
