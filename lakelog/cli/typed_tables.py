"""``lakelog tables run``: a topic kept as a typed Delta table of its own.

Named as Confluent's Tableflow and AutoMQ's "table topics" call the idea: a topic as a table.
The table's progress is its streaming checkpoint (by default in the store's scratch area, one
per topic and table location), so there is nothing to create first: ``run`` on a new pair
starts from the topic's first record, ``run`` again continues where the last one stopped.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.arguments import Out, add_topic_args, float_at_least, open_store, topic_arg


def cmd_tables_run(args: argparse.Namespace, out: Out) -> None:
    topic = topic_arg(args, "tables run")
    store = open_store(args)
    try:
        store.materialize(
            topic,
            args.table,
            checkpoint=args.checkpoint_location,
            subject=args.subject,
            message=args.message,
            continuous=args.continuous,
            trigger_interval=f"{args.interval} seconds",
            timeout_s=args.timeout,
        )
        out(f"Typed table of {topic!r} at {args.table} is up to date.")
    finally:
        store.close()


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    tables = commands.add_parser(
        "tables", parents=parents, help="topics kept as typed Delta tables (the registry's Avro schemas as columns)"
    )
    sub = tables.add_subparsers(dest="action", required=True)
    p = sub.add_parser(
        "run",
        parents=parents,
        help="bring a topic's typed table up to date (or keep it so with --continuous)",
        description="Appends the topic's records not yet in the table to the Delta table at --table: the value "
        "schema's fields (decoded with the store's Schema Registry: Avro, JSON Schema or Protobuf) plus "
        "partition, offset and timestamp, each record once, new columns added when the subject's schema "
        "evolves compatibly.",
    )
    add_topic_args(p, "the topic")
    p.add_argument("--table", required=True, help="where the Delta table is (a path or s3a:// URI)")
    p.add_argument("--subject", help="the value subject (default: <topic>-value, Confluent's TopicNameStrategy)")
    p.add_argument("--message", help="Protobuf: the message of the schema read (default: its first)")
    p.add_argument("--checkpoint-location", help="the streaming checkpoint (default: in the store's _lakelog/)")
    p.add_argument("--continuous", action="store_true", help="keep running, one micro-batch every --interval")
    p.add_argument("--interval", type=float_at_least(0.1), default=10.0, help="seconds between micro-batches")
    p.add_argument("--timeout", type=float_at_least(0), help="with --continuous: stop after this many seconds")
    p.set_defaults(func=cmd_tables_run)
