"""The store's own commands: ``history``, ``maintain``, ``check``, ``serve``, ``config``, ``quickstart``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from lakelog.cli.arguments import CHECK_FAILED, STORE_ENV, Out, float_at_least, open_store, store_path
from lakelog.cli.tables import steps, table
from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.settings import load_settings


def cmd_history(args: argparse.Namespace, out: Out) -> None:
    store = open_store(args)
    entries = store.history_entries(args.topic)
    if args.topic is not None and not entries:
        from lakelog.engine.topics import require_topic

        require_topic(store.context.latest_topics(), args.topic)
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
    out(table(["VERSION", "TIME", "OPERATION", "CLIENT", "WRITER", "CHANGES"], rows))


def _change_text(change: Any) -> str:
    sign = "+" if change.action == "added" else "-"
    where = f"{change.topic}-{change.partition}"
    if change.start_offset is None:
        return f"{sign}{where}:{change.files}files"
    span = f"{change.start_offset}..{change.end_offset - 1}"
    thinned = "" if change.records == change.end_offset - change.start_offset else f"({change.records})"
    return f"{sign}{where}:{span}{thinned}"


# -- consumer groups ---------------------------------------------------------------


def cmd_maintain(args: argparse.Namespace, out: Out) -> None:
    from lakelog.compaction.maintain import maintain

    store = open_store(args)
    with steps(f"maintaining {store.uri}") as progress:
        report = maintain(
            store,
            topics=args.topic or None,
            dry_run=args.dry_run,
            optimize=not args.no_optimize,
            vacuum=not args.no_vacuum,
            vacuum_retention_hours=args.vacuum_retention_hours,
            spark=store.spark if args.spark else None,
            progress=progress,
        )
    for line in report.lines():
        out(line)


def cmd_check(args: argparse.Namespace, out: Out) -> int:
    from lakelog.engine.admin.check import check_log_table, check_store, repair_log, repair_store
    from lakelog.engine.commit import TableLog, normalize_uri
    from lakelog.engine.errors import CorruptLogError

    if args.drop_missing_files and not args.repair:
        raise InvalidConfigError("--drop-missing-files needs --repair")
    try:
        store = open_store(args)
    except CorruptLogError:
        # A log too damaged to open is what check is for: report it file by file (and repair
        # what is safe) from the log alone.
        table_log = TableLog(normalize_uri(store_path(args)))
        report = check_log_table(table_log, args.topic, grace_s=args.grace_seconds)
        if args.repair and not report.ok:
            for line in repair_log(table_log, report):
                out(line)
            report = check_log_table(TableLog(table_log.uri), args.topic, grace_s=args.grace_seconds)
    else:
        report = check_store(store.context, args.topic, grace_s=args.grace_seconds)
        if args.repair and not report.ok:
            for line in repair_store(store.context, report, drop_missing_files=args.drop_missing_files):
                out(line)
            report = check_store(store.context, args.topic, grace_s=args.grace_seconds)
    for line in report.lines():
        out(line)
    return 0 if report.ok else CHECK_FAILED


def cmd_serve(args: argparse.Namespace, out: Out) -> None:
    from lakelog.kafka_endpoint.listeners import parse_listeners
    from lakelog.kafka_endpoint.server import serve

    listen = args.listen or ["127.0.0.1:9092"]
    parse_listeners(listen)  # a wrong listener fails before the store is opened
    registry_listen = getattr(args, "schema_registry_listen", None)
    if registry_listen is not None:
        _, sep, port = registry_listen.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise InvalidConfigError(f"--schema-registry-listen must be HOST:PORT, got {registry_listen!r}")
    if args.log_format == "json":
        from lakelog.cli.log_format import use_json_logs

        use_json_logs()
    store = open_store(args)
    registry = None
    if registry_listen is not None:
        from lakelog.schemas.rest import start_registry

        registry = start_registry(store.context, registry_listen)

    def ready(server: Any) -> None:
        for listener in server.listeners:
            shown = "" if listener.protocol == "PLAINTEXT" else f" ({listener.protocol})"
            out(f"lakelog serve: Kafka protocol on {listener.host}:{listener.port}{shown} for store {store.uri}")
        if registry is not None:
            out(f"lakelog serve: Schema Registry on http://{registry.host}:{registry.port}")
        if server.metrics_address is not None:
            host, port = server.metrics_address
            out(f"lakelog serve: Prometheus metrics on http://{host}:{port}/metrics")
        sys.stdout.flush()

    try:
        serve(store, listen, ready, args.metrics_listen)
    finally:
        if registry is not None:  # take no request once the Kafka listener stopped
            registry.shutdown()
            registry.server_close()


def cmd_config(args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.settings import reference_table

    if args.reference:
        out(reference_table())
        return
    settings = load_settings(args.conf)
    rows = [[key, value, settings.origins.get(key, "default")] for key, value in sorted(settings.shown().items())]
    out(table(["KEY", "VALUE", "FROM"], rows))


def cmd_quickstart(args: argparse.Namespace, out: Out) -> None:
    from lakelog.cli.quickstart import TOPIC, run_kafka_quickstart, run_quickstart
    from lakelog.store import Store

    path = args.store or os.environ.get(STORE_ENV) or "quickstart-store"
    run_quickstart(path, out)
    run_kafka_quickstart(Store.open(path, create=False), TOPIC, out)


def add_parsers(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "history",
        parents=parents,
        help="the store's commits: operation, client, producer/transaction, offsets added (+) and removed (-)",
    )
    p.add_argument("--topic")
    p.set_defaults(func=cmd_history)

    p = commands.add_parser(
        "maintain",
        parents=parents,
        help="retention, log compaction and OPTIMIZE as each topic's config asks, then VACUUM",
    )
    p.add_argument("--topic", action="append", help="only this topic (repeatable; default: all, incl. internal)")
    p.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    p.add_argument("--no-optimize", action="store_true", help="skip OPTIMIZE (file compaction)")
    p.add_argument("--no-vacuum", action="store_true", help="skip VACUUM and Delta log cleanup")
    p.add_argument(
        "--vacuum-retention-hours",
        type=float_at_least(0),
        help="delete unreferenced files older than this (default: delta.deletedFileRetentionDuration, 7 days)",
    )
    p.add_argument("--spark", action="store_true", help="rewrite partitions as Spark tasks (default: in-process)")
    p.set_defaults(func=cmd_maintain)

    p = commands.add_parser(
        "check",
        parents=parents,
        help="verify every partition: files present and readable, stats true, offsets dense and unique",
    )
    p.add_argument("--topic", help="only this topic (default: all, incl. internal)")
    p.add_argument(
        "--repair",
        action="store_true",
        help="remove stray temporary files, bad checksums and a _last_checkpoint naming a missing checkpoint, "
        "then check again (commit files are never changed)",
    )
    p.add_argument(
        "--drop-missing-files",
        action="store_true",
        help="with --repair: drop references to missing data files, recording the offsets they held as lost",
    )
    p.add_argument(
        "--grace-seconds",
        type=float_at_least(0),
        default=3600.0,
        help="temporary files younger than this belong to a writer in flight (default 3600)",
    )
    p.set_defaults(func=cmd_check)

    p = commands.add_parser(
        "serve",
        parents=parents,
        help="a Kafka-protocol endpoint for the store: Kafka clients produce, fetch and list offsets",
        description="Kafka clients and tools reach the store with bootstrap.servers=HOST:PORT (like "
        "kafka-server-start, but stateless: the agent is the leader of every partition and the coordinator of "
        "every group and transaction; several agents may serve one store). Produce is acknowledged after the "
        "Delta commit; idempotent and transactional producers, consumer groups (subscribe), offsets, topic and "
        "group admin work as on a broker. Stop with SIGTERM or Ctrl-C (requests in flight finish).",
    )
    p.add_argument(
        "--schema-registry-listen",
        metavar="HOST:PORT",
        help="also serve a Confluent-compatible Schema Registry (REST, schema.registry.url=http://HOST:PORT) "
        "whose schemas live in the store's _schemas topic (port 0: any free port; off unless given)",
    )
    p.add_argument(
        "--listen",
        action="append",
        help="[PROTOCOL://]HOST:PORT to listen on, as Kafka's listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, "
        "SASL_SSL; repeatable or comma-separated; port 0: any free port; default 127.0.0.1:9092). TLS and SASL "
        "take Kafka's broker settings (ssl.keystore.location, sasl.enabled.mechanisms, ...) from --conf",
    )
    p.add_argument(
        "--metrics-listen",
        help="HOST:PORT serving Prometheus metrics at /metrics and a /health check (port 0: any free port)",
    )
    p.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per log line, with the client id and host, principal and listener",
    )
    p.set_defaults(func=cmd_serve)

    p = commands.add_parser("config", parents=parents, help="the settings in effect and where each came from")
    p.add_argument("--reference", action="store_true", help="print the reference table of every setting (Markdown)")
    p.set_defaults(func=cmd_config)

    p = commands.add_parser(
        "quickstart", parents=parents, help="create a topic, produce, consume, show offsets and history"
    )
    p.set_defaults(func=cmd_quickstart)
