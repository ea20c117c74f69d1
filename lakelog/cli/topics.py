"""``lakelog topics``: kafka-topics, as subcommands (``topics create T``) or Kafka's flags
(``topics --create --topic T --partitions 3 --replication-factor 1 --config k=v``), and
kafka-delete-records as ``topics delete-records`` (``--offset-json-file`` as Kafka's, or
``--topic T --partition P --offset N``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lakelog.cli.arguments import COUNT, Out, add_topic_args, note, open_store, pairs, topic_arg
from lakelog.engine.errors import InvalidConfigError, InvalidTopicError, TopicExistsError, UnknownTopicOrPartitionError
from lakelog.engine.topics import (
    INTERNAL_TOPICS,
    TOPIC_CONFIG_KEYS,
    TopicPartition,
    parse_topic_config,
    validate_topic_name,
)

# Kafka's action flags, as the subcommand each stands for.
ACTIONS = {"--create": "create", "--list": "list", "--describe": "describe", "--delete": "delete", "--alter": "alter"}


def _replication_note(args: argparse.Namespace) -> None:
    factor = getattr(args, "replication_factor", None)
    if factor is not None and factor != 1:
        note(
            f"note: --replication-factor {factor} ignored: a store keeps each record once, "
            "its storage (the file system or object store) keeps the copies"
        )


def cmd_create(args: argparse.Namespace, out: Out) -> None:
    topic = topic_arg(args, "topics create")
    assert topic is not None
    # Checked before the store is opened: a refused topic must not leave a new, empty store behind.
    validate_topic_name(topic)
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"topic {topic!r} is reserved for lakelog's internal use")
    config = pairs(args.config, "--config")
    parse_topic_config(config)
    _replication_note(args)
    store = open_store(args, create=True)
    try:
        created = store.create_topic(topic, partitions=args.partitions, config=config)
    except TopicExistsError:
        if args.if_not_exists:
            return
        raise
    out(f"Created topic {created.name} with {created.partitions} partition(s), id {created.topic_id}.")


def cmd_list(args: argparse.Namespace, out: Out) -> None:
    for name in open_store(args).list_topics(include_internal=args.internal):
        out(name)


def cmd_describe(args: argparse.Namespace, out: Out) -> None:
    topic = topic_arg(args, "topics describe", required=False)
    store = open_store(args)
    if topic is not None and args.if_exists and topic not in store.list_topics(include_internal=True):
        return
    names = [topic] if topic else store.list_topics(include_internal=True)
    for name in names:
        meta = store.describe_topic(name)
        configs = ",".join(f"{k}={TOPIC_CONFIG_KEYS[k].render(v)}" for k, v in sorted(meta.overrides.items()))
        out(
            f"Topic: {meta.name}\tTopicId: {meta.topic_id}\tPartitionCount: {meta.partitions}\t"
            f"ReplicationFactor: 1\tConfigs: {configs}"
        )
        start = store.beginning_offsets(name)
        end = store.end_offsets(name)
        for p in range(meta.partitions):
            out(f"\tTopic: {meta.name}\tPartition: {p}\tLogStartOffset: {start[p]}\tLogEndOffset: {end[p]}")
        if args.all_configs:
            for key, value in sorted(meta.config().items()):
                source = "TOPIC_CONFIG" if key in meta.overrides else "DEFAULT_CONFIG"
                out(f"\t{key}={TOPIC_CONFIG_KEYS[key].render(value)}\t{source}")


def cmd_delete(args: argparse.Namespace, out: Out) -> None:
    topic = topic_arg(args, "topics delete")
    store = open_store(args)
    try:
        store.delete_topic(topic)
    except UnknownTopicOrPartitionError:
        if args.if_exists:
            return
        raise
    out(f"Deleted topic {topic}.")


def cmd_alter(args: argparse.Namespace, out: Out) -> None:
    topic = topic_arg(args, "topics alter")
    to_set = pairs([*(args.add_config or []), *(args.config or [])], "--add-config")
    to_delete = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    if args.partitions is None and not to_set and not to_delete:
        raise InvalidConfigError("nothing to alter: give --partitions, --add-config or --delete-config")
    parse_topic_config(to_set)
    store = open_store(args)
    if args.if_exists and topic not in store.list_topics(include_internal=True):
        return
    if args.partitions is not None:
        meta: Any = store.create_partitions(topic, args.partitions)
        out(f"Topic {meta.name} now has {meta.partitions} partitions.")
    if to_set or to_delete:
        meta = store.alter_topic_config(topic, to_set, to_delete)
        out(f"Altered configs of topic {meta.name}: set {sorted(to_set)}, reset {sorted(to_delete)}.")


def offset_json(text: str, source: str) -> dict[TopicPartition, int]:
    """kafka-delete-records' ``--offset-json-file`` content (``{"partitions": [{"topic": T,
    "partition": P, "offset": N}, ...], "version": 1}``) as offsets; InvalidConfigError naming
    what is wrong."""
    try:
        doc = json.loads(text)
        entries = doc["partitions"]
        offsets = {}
        for entry in entries:
            topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
            if not isinstance(topic, str) or any(type(v) is not int for v in (partition, offset)):
                raise TypeError(f"{entry!r}")
            tp = TopicPartition(topic, partition)
            if tp in offsets:
                raise InvalidConfigError(f"{source}: partition {tp} is given twice")
            offsets[tp] = offset
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidConfigError(
            f'{source}: not kafka-delete-records\' offset JSON ({{"partitions": [{{"topic": ..., '
            f'"partition": ..., "offset": ...}}], "version": 1}}): {exc}'
        ) from exc
    if not offsets:
        raise InvalidConfigError(f"{source}: no partitions given")
    return offsets


def cmd_delete_records(args: argparse.Namespace, out: Out) -> None:
    topic = topic_arg(args, "topics delete-records", required=False)
    if args.offset_json_file is not None:
        if topic is not None or args.partition is not None or args.offset is not None:
            raise InvalidConfigError("give --offset-json-file or --topic/--partition/--offset, not both")
        try:
            with open(args.offset_json_file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise InvalidConfigError(f"--offset-json-file: cannot read {args.offset_json_file}: {exc}") from exc
        offsets = offset_json(text, args.offset_json_file)
    else:
        if topic is None or args.offset is None:
            raise InvalidConfigError("topics delete-records needs --offset-json-file, or a topic and --offset")
        store = open_store(args)
        partitions = [args.partition] if args.partition is not None else range(store.describe_topic(topic).partitions)
        offsets = {TopicPartition(topic, p): args.offset for p in partitions}
    starts = open_store(args).delete_records(offsets)
    out("Records delete operation completed:")
    for tp, start in sorted(starts.items()):
        out(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {start}")


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    topics = commands.add_parser(
        "topics",
        parents=parents,
        help="create, list, describe, delete, alter topics (kafka-topics)",
        description="Subcommands (topics create T ...) or kafka-topics' flags: --create, --list, --describe, "
        "--delete, --alter with --topic T.",
    )
    sub = topics.add_subparsers(
        dest="action", required=True, metavar="{create,list,describe,delete,alter,delete-records}"
    )
    p = sub.add_parser("create", parents=parents, help="create a topic (--create)")
    add_topic_args(p)
    p.add_argument("--partitions", type=COUNT, help="default: the num.partitions setting (1)")
    p.add_argument("--replication-factor", type=COUNT, help="accepted for Kafka's habits; a store keeps one copy")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed quietly if the topic exists")
    p.set_defaults(func=cmd_create)
    p = sub.add_parser("list", parents=parents, help="list topics (--list)")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    p.add_argument("--exclude-internal", action="store_false", dest="internal", help="the default")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser(
        "describe", parents=parents, help="partitions, offsets and configs of a topic, all if none given (--describe)"
    )
    add_topic_args(p)
    p.add_argument("--all-configs", action="store_true", help="also list defaults")
    p.add_argument("--if-exists", action="store_true", help="print nothing for a topic that does not exist")
    p.set_defaults(func=cmd_describe)
    p = sub.add_parser("delete", parents=parents, help="delete a topic and its records (--delete)")
    add_topic_args(p)
    p.add_argument("--if-exists", action="store_true", help="succeed quietly if the topic does not exist")
    p.set_defaults(func=cmd_delete)
    p = sub.add_parser("alter", parents=parents, help="add partitions or change configs (--alter)")
    add_topic_args(p)
    p.add_argument("--partitions", type=COUNT, help="new (larger) partition count")
    p.add_argument("--add-config", action="append", metavar="KEY=VALUE")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="as --add-config (kafka-topics --alter)")
    p.add_argument("--delete-config", action="append", metavar="KEY")
    p.add_argument("--if-exists", action="store_true", help="succeed quietly if the topic does not exist")
    p.set_defaults(func=cmd_alter)
    p = sub.add_parser(
        "delete-records",
        parents=parents,
        help="delete the records below an offset (kafka-delete-records): the log start moves there",
        description="Moves each partition's log start offset forward to the offset given (-1: the high "
        "watermark); it never moves back. Prints each partition's log start afterwards (low_watermark).",
    )
    add_topic_args(p)
    p.add_argument(
        "--offset-json-file",
        help='kafka-delete-records\' JSON: {"partitions": [{"topic": ..., '
        '"partition": ..., "offset": ...}], "version": 1}',
    )
    p.add_argument("--partition", type=int, help="one partition (default: every partition of the topic)")
    p.add_argument("--offset", type=int, help="delete the records below this offset (-1: the high watermark)")
    p.set_defaults(func=cmd_delete_records)
