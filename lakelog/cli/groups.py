"""``lakelog groups``: kafka-consumer-groups, as subcommands (``groups describe --group G``) or
Kafka's flags (``groups --describe --group G``, ``--reset-offsets``, ``--delete``,
``--delete-offsets``, ``--list``)."""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakelog.cli.arguments import Out, integer, note, open_store
from lakelog.cli.tables import table
from lakelog.engine.errors import (
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidOffsetError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.groups.offsets_topic import MIN_LONG, check_offset
from lakelog.engine.topics import TopicPartition

if TYPE_CHECKING:
    from lakelog.store import Store

ACTIONS = {
    "--list": "list",
    "--describe": "describe",
    "--reset-offsets": "reset-offsets",
    "--delete": "delete",
    "--delete-offsets": "delete-offsets",
}
RESET_SPECS = (
    "--to-earliest",
    "--to-latest",
    "--to-current",
    "--to-offset N",
    "--shift-by N",
    "--to-datetime DATETIME",
    "--by-duration DURATION",
    "--from-file CSV",
)
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>[-+]?\d+)D)?"
    r"(?:T(?:(?P<hours>[-+]?\d+)H)?(?:(?P<minutes>[-+]?\d+)M)?(?:(?P<seconds>[-+]?\d+(?:[.,]\d{0,9})?)S)?)?",
    re.IGNORECASE,
)


def _groups(args: argparse.Namespace, store: Store) -> list[str]:
    """The groups named with --group (repeatable), or every group with --all-groups."""
    if args.all_groups:
        if args.group:
            raise InvalidConfigError("give --group or --all-groups, not both")
        from lakelog.engine.admin.groups import list_groups

        return [g.group_id for g in list_groups(store.context)]
    return list(dict.fromkeys(args.group))


def _check_groups(args: argparse.Namespace) -> None:
    if not args.group and not args.all_groups:
        raise InvalidConfigError(f"groups {args.action} needs --group G (repeatable) or --all-groups")


def cmd_list(args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.admin.groups import list_groups

    rows = [[g.group_id, g.state, g.members] for g in list_groups(open_store(args).context)]
    out(table(["GROUP", "STATE", "MEMBERS"], rows))


def cmd_describe(args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.admin.groups import describe_group

    _check_groups(args)
    store = open_store(args)
    names = _groups(args, store)
    for i, name in enumerate(names):
        if i:
            out("")
        _describe_one(describe_group(store.context, name), args, out)


def _describe_one(group: Any, args: argparse.Namespace, out: Out) -> None:
    if args.state:
        # kafka-consumer-groups --describe --state
        rows = [[group.group_id, group.assignor or "", group.state, group.generation, len(group.members)]]
        out(table(["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "GENERATION", "#MEMBERS"], rows))
        return
    if args.members:
        # kafka-consumer-groups --describe --members [--verbose]
        headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if args.verbose_members:
            headers += ["ASSIGNMENT"]
        rows = []
        for m in group.members:
            row = [group.group_id, m.member_id, m.instance_id or "-", "-", m.client_id, len(m.assignment)]
            if args.verbose_members:
                row += [_tps_text(m.assignment)]
            rows.append(row)
        if not group.members:
            note(f"Consumer group '{group.group_id}' has no active members.")
        out(table(headers, rows))
        return
    clients = {m.member_id: m.client_id for m in group.members}

    def cell(value: Any) -> Any:
        return "-" if value is None else value

    rows = []
    for p in group.partitions:
        client = clients.get(p.owner) if p.owner else None
        row = [p.committed, p.log_end_offset, p.lag, p.owner, None, client]
        rows.append([group.group_id, p.topic, p.partition, *(cell(v) for v in row)])
    # A live member without partitions still shows, as in kafka-consumer-groups.
    rows += [
        [group.group_id, "-", "-", "-", "-", "-", m.member_id, "-", m.client_id]
        for m in group.members
        if not m.assignment
    ]
    if not group.members:
        # A note, not a result: stderr keeps stdout a parsable table.
        note(f"Consumer group '{group.group_id}' has no active members.")
    elif group.group_type == "consumer":
        note(
            f"Consumer group '{group.group_id}' (consumer protocol, KIP-848) is {group.state} (group epoch "
            f"{group.generation}, assignment epoch {group.assignment_epoch}, assignor {group.assignor})."
        )
    else:
        note(f"Consumer group '{group.group_id}' is {group.state} (generation {group.generation}).")
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"]
    out(table([*headers, "CLIENT-ID"], rows))


def _tps_text(tps: Iterable[Any]) -> str:
    """Kafka's ASSIGNMENT column: topic(p,p,...) per topic."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())) or "-"


# -- resetting offsets ------------------------------------------------------------------


def parse_duration(text: str) -> timedelta:
    """ISO 8601 durations as Java's Duration.parse reads them: PnDTnHnMn.nS, e.g. PT1H30M, P1DT2H, -PT5M."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(g) for g in ("days", "hours", "minutes", "seconds")):
        raise InvalidConfigError(f"--by-duration must be an ISO 8601 duration like PT1H30M or P1DT2H, got {text!r}")
    parts = {g: float((match.group(g) or "0").replace(",", ".")) for g in ("days", "hours", "minutes", "seconds")}
    duration = timedelta(**parts)
    return -duration if match.group("sign") == "-" else duration


def topic_specs(items: Iterable[str]) -> dict[str, list[int] | None]:
    """``--topic T`` (every partition) and ``--topic T:0,1`` (those partitions), by topic."""
    specs: dict[str, list[int] | None] = {}
    for item in items:
        name, sep, numbers = item.partition(":")
        if not name:
            raise InvalidConfigError(f"--topic must be T or T:0,1, got {item!r}")
        if not sep:
            specs[name] = None
            continue
        try:
            chosen = [int(n) for n in numbers.split(",") if n.strip()]
        except ValueError:
            raise InvalidConfigError(f"--topic partitions must be numbers like T:0,1, got {item!r}") from None
        if not chosen or min(chosen) < 0:
            raise InvalidConfigError(f"--topic partitions must be numbers like T:0,1, got {item!r}")
        if name in specs and specs[name] is None:
            continue
        specs[name] = sorted(set((specs.get(name) or []) + chosen))
    return specs


def _reset_spec(args: argparse.Namespace) -> tuple[str, Any]:
    """The reset spec given, checked before the store is opened."""
    if args.to_earliest:
        return "earliest", None
    if args.to_latest:
        return "latest", None
    if args.to_current:
        return "current", None
    # Kafka's tool parses both as Java longs; an offset is clamped into the log afterwards.
    if args.to_offset is not None:
        return "offset", check_offset(args.to_offset, "--to-offset", low=MIN_LONG)
    if args.shift_by is not None:
        return "shift", check_offset(args.shift_by, "--shift-by", low=MIN_LONG)
    if args.to_datetime is not None:
        try:
            return "datetime", datetime.fromisoformat(args.to_datetime)
        except ValueError as exc:
            raise InvalidConfigError(
                f"--to-datetime must be ISO 8601 like 2024-01-31T12:00:00.000Z, got {args.to_datetime!r}"
            ) from exc
    if args.by_duration is not None:
        return "duration", parse_duration(args.by_duration)
    if args.from_file is not None:
        return "file", read_offsets_file(args.from_file)
    raise InvalidConfigError(
        "reset-offsets needs one of --to-earliest, --to-latest, --to-current, --to-offset N, --shift-by N, "
        "--to-datetime DATETIME, --by-duration DURATION or --from-file CSV"
    )


def read_offsets_file(path: str) -> dict[str | None, dict[TopicPartition, int]]:
    """kafka-consumer-groups' CSV: ``topic,partition,offset`` lines, or ``group,topic,partition,offset``
    (key None for the three-column form: every group given)."""
    result: dict[str | None, dict[TopicPartition, int]] = {}
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [row for row in csv.reader(handle) if row and any(c.strip() for c in row)]
    except OSError as exc:
        raise InvalidConfigError(f"--from-file: cannot read {path}: {exc.strerror or exc}") from exc
    for number, row in enumerate(rows, 1):
        cells = [c.strip() for c in row]
        if len(cells) not in (3, 4):
            raise InvalidConfigError(
                f"--from-file {path} line {number}: expected topic,partition,offset or group,topic,partition,offset"
            )
        group = cells[0] if len(cells) == 4 else None
        topic, partition, offset = cells[-3:]
        try:
            tp, value = TopicPartition(topic, int(partition)), int(offset)
        except ValueError:
            raise InvalidConfigError(
                f"--from-file {path} line {number}: partition and offset must be numbers, got {row!r}"
            ) from None
        if tp.partition < 0 or value < 0:
            raise InvalidConfigError(f"--from-file {path} line {number}: negative partition or offset in {row!r}")
        check_offset(value, f"--from-file {path} line {number}: offset")
        result.setdefault(group, {})[tp] = value
    return result


def _partitions(store: Store, specs: dict[str, list[int] | None]) -> list[TopicPartition]:
    from lakelog.engine.topics import require_topic

    topics = store.context.latest_topics()
    chosen = []
    for name, numbers in specs.items():
        meta = require_topic(topics, name)
        for p in numbers if numbers is not None else range(meta.partitions):
            if p >= meta.partitions:
                raise UnknownTopicOrPartitionError(
                    f"partition {p} of topic {name!r} does not exist (the topic has {meta.partitions})"
                )
            chosen.append(TopicPartition(name, p))
    return chosen


def plan_reset(
    store: Store, group_id: str, args: argparse.Namespace, spec: tuple[str, Any]
) -> dict[TopicPartition, int]:
    """New offsets of one group, as kafka-consumer-groups computes them: clamped into each log's
    [start, end] (Kafka's warning on stderr for each offset that moved); a partition without a
    committed offset goes to the log end for --to-current, and one without a record at or after
    the time to the log end for --to-datetime/--by-duration."""
    from lakelog.engine.admin.groups import clamp_to_log, list_group_offsets

    kind, value = spec
    committed = list_group_offsets(store.context, group_id)
    if kind == "file":
        wanted = {**value.get(None, {}), **value.get(group_id, {})}
        if not wanted:
            raise InvalidConfigError(f"--from-file {args.from_file} has no offsets for group {group_id!r}")
        specs: dict[str, list[int] | None] = {}
        for tp in wanted:
            specs.setdefault(tp.topic, []).append(tp.partition)  # type: ignore[union-attr]
    elif args.all_topics:
        specs = {tp.topic: None for tp in sorted(committed) if tp.topic in store.context.latest_topics()}
        if not specs:
            raise InvalidConfigError(f"--all-topics: group {group_id!r} has no committed offsets for existing topics")
    else:
        specs = topic_specs(args.topic)
    tps = _partitions(store, specs)
    result: dict[TopicPartition, int] = {}
    for topic in dict.fromkeys(tp.topic for tp in tps):
        # Start before end: both only grow, so start <= end holds across the two reads.
        start = store.beginning_offsets(topic)
        end = store.end_offsets(topic)
        mine = [tp for tp in tps if tp.topic == topic]
        if kind in ("datetime", "duration"):
            ms = _epoch_ms(value) if kind == "datetime" else _epoch_ms(datetime.now().astimezone() - value)
            found = store.offsets_for_times(topic, {tp.partition: ms for tp in mine})
        for tp in mine:
            p = tp.partition
            if kind == "earliest":
                offset = start[p]
            elif kind == "latest":
                offset = end[p]
            elif kind == "current":
                offset = committed.get(tp, end[p])
            elif kind == "offset":
                offset = value
            elif kind == "shift":
                if tp not in committed:
                    raise InvalidOffsetError(
                        f"cannot shift the offset of {tp.topic}-{p} for group {group_id!r}: it has no committed offset"
                    )
                offset = committed[tp] + value
            elif kind == "file":
                offset = wanted[tp]
            else:
                hit = found[p]
                offset = hit.offset if hit is not None else end[p]
            # Kafka clamps an out-of-range offset to the log's bounds, and says so on stderr.
            result[tp], warning = clamp_to_log(tp, offset, start[p], end[p])
            if warning is not None:
                note(f"WARN {warning}")
    return result


def _epoch_ms(moment: datetime) -> int:
    if moment.tzinfo is None:  # as group_admin reads a naive time: UTC, as record timestamps are
        from datetime import UTC

        moment = moment.replace(tzinfo=UTC)
    return max(0, int(moment.timestamp() * 1000))


def cmd_reset_offsets(args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.admin.groups import alter_group_offsets, require_inactive_group

    _check_groups(args)
    spec = _reset_spec(args)
    if spec[0] != "file" and not args.topic and not args.all_topics:
        raise InvalidConfigError("reset-offsets needs --topic T (or T:0,1; repeatable), --all-topics or --from-file")
    if args.topic:
        topic_specs(args.topic)  # checked before the store is opened
    store = open_store(args)
    names = _groups(args, store)
    plans = {}
    for name in names:
        # Refused while the group has members, dry run too, as Kafka's tool does.
        require_inactive_group(store.context, name)
        plans[name] = plan_reset(store, name, args, spec)
    if args.execute:
        for name, offsets in plans.items():
            alter_group_offsets(store.context, name, offsets)
    else:
        note("WARN: dry run, nothing committed; add --execute to reset the offsets.")
    if args.export:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        for name, offsets in plans.items():
            for tp, offset in sorted(offsets.items()):
                row = [tp.topic, tp.partition, offset]
                writer.writerow([name, *row] if len(plans) > 1 else row)
        return
    rows = [
        [name, tp.topic, tp.partition, offset]
        for name, offsets in plans.items()
        for tp, offset in sorted(offsets.items())
    ]
    out(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))


def cmd_delete(args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.admin.groups import delete_group

    _check_groups(args)
    store = open_store(args)
    names = _groups(args, store)
    if not names and args.all_groups:
        out("There are no consumer groups to delete.")
        return
    for name in names:
        try:
            delete_group(store.context, name)
        except GroupIdNotFoundError:
            if len(names) == 1:
                raise
            note(f"Group '{name}' could not be deleted: it does not exist.")
    quoted = ", ".join(f"'{n}'" for n in names)
    out(f"Deletion of requested consumer groups ({quoted}) was successful.")


def cmd_delete_offsets(args: argparse.Namespace, out: Out) -> None:
    """kafka-consumer-groups --delete-offsets: one group, the partitions of --topic T[:P,P]."""
    from lakelog.engine.admin.groups import delete_offsets

    if len(args.group) != 1:
        raise InvalidConfigError("groups delete-offsets needs exactly one --group G")
    specs = topic_specs(args.topic)
    if not specs:
        raise InvalidConfigError("groups delete-offsets needs --topic T (or T:0,1; repeatable)")
    store = open_store(args)
    partitions = []
    for name, chosen in specs.items():
        count = store.describe_topic(name).partitions
        partitions += [TopicPartition(name, p) for p in (range(count) if chosen is None else chosen)]
    group = args.group[0]
    delete_offsets(store.context, group, partitions)
    out(f"Request succeed for deleting offsets from group '{group}'.")
    out(table(["TOPIC", "PARTITION", "STATUS"], [[tp.topic, tp.partition, "Successful"] for tp in partitions]))


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    groups = commands.add_parser(
        "groups",
        parents=parents,
        help="list, describe, reset offsets of, delete consumer groups (kafka-consumer-groups)",
        description="Subcommands (groups describe --group G ...) or kafka-consumer-groups' flags: --list, "
        "--describe, --reset-offsets, --delete, --delete-offsets.",
    )
    sub = groups.add_subparsers(
        dest="action", required=True, metavar="{list,describe,reset-offsets,delete,delete-offsets}"
    )
    p = sub.add_parser("list", parents=parents, help="groups with their state and live member count (--list)")
    p.add_argument("--state", action="store_true", help="accepted: the state is always shown")
    p.set_defaults(func=cmd_list)

    def which(p: argparse.ArgumentParser) -> None:
        p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
        p.add_argument("--all-groups", action="store_true", help="every group")

    p = sub.add_parser("describe", parents=parents, help="a group's committed offsets, lag and members (--describe)")
    which(p)
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--offsets", action="store_true", help="offsets and lag per partition (the default)")
    shown.add_argument("--members", action="store_true", help="the group's live members and their assignment")
    shown.add_argument("--state", action="store_true", help="the group's state, assignor, generation, member count")
    p.add_argument("--verbose", dest="verbose_members", action="store_true", help="with --members: the partitions")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser(
        "reset-offsets", parents=parents, help="set a group's committed offsets; a dry run unless --execute"
    )
    which(p)
    p.add_argument("--topic", action="append", default=[], metavar="T[:P,P]", help="T or T:0,1 (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument("--to-current", action="store_true", help="the committed offset (the log end if none)")
    target.add_argument("--to-offset", type=integer, metavar="N", help="offset N, clamped into the log")
    target.add_argument("--shift-by", type=integer, metavar="N", help="the committed offset plus N (may be negative)")
    target.add_argument(
        "--to-datetime", metavar="DATETIME", help="the first offset at or after an ISO 8601 time (no zone: UTC)"
    )
    target.add_argument(
        "--by-duration", metavar="DURATION", help="the first offset at or after now minus an ISO 8601 duration (PT1H)"
    )
    target.add_argument(
        "--from-file", metavar="CSV", help="offsets from topic,partition,offset (or group,topic,...) lines"
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")
    p.add_argument("--export", action="store_true", help="print the new offsets as CSV, the format --from-file reads")
    p.set_defaults(func=cmd_reset_offsets)

    p = sub.add_parser("delete", parents=parents, help="delete a group's offsets and state; no live members (--delete)")
    which(p)
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser(
        "delete-offsets",
        parents=parents,
        help="delete a group's committed offsets of topics no live member subscribes to (--delete-offsets)",
    )
    p.add_argument("--group", action="append", default=[], help="the group")
    p.add_argument("--topic", action="append", default=[], metavar="T[:P,P]", help="T or T:0,1 (repeatable)")
    p.set_defaults(func=cmd_delete_offsets)
