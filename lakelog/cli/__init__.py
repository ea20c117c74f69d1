"""The ``lakelog`` command line, shaped like Kafka's tools.

Exit codes scripts can rely on:

====  =========================================================
0     success
1     fatal error (the request cannot succeed as given): no lakelog
      store at the path, storage read-only or full, an unexpected error
2     usage error, invalid name, config, offset or record (also a record
      over the topic's ``max.message.bytes``)
3     retriable: conflicts or timeouts exhausted, nothing committed
4     outcome unknown: a commit may have landed, re-read the log
5     topic already exists; consumer group not empty (has live members, or
      they subscribe to the topic whose offsets are to be deleted)
6     unknown topic or partition; unknown consumer group
7     partially committed (``produce``): the records stderr lists were
      committed, the rest not; sending all again would duplicate them
8     ``check`` found violations of the store's invariant (listed on
      stdout; after ``--repair``, those that remain)
====  =========================================================

Which error class exits with which code is listed in the README's table
(tests/cli/test_exit_codes.py holds the two together). Errors go to stderr
as one line, ``error: <message>`` (an unexpected error
as ``error: <type>: <message>``); ``-v`` adds the traceback. Results go to
stdout. Arguments are checked before a store is opened or Spark started;
``--store`` (or Kafka's ``--bootstrap-server``) and ``--conf`` go anywhere on
the line. ``topics`` and ``groups`` also take Kafka's action flags
(``topics --create --topic T``, ``groups --describe --group G``).
Only ``topics create``, ``quickstart`` and the perf verbs that fill their
own topics (``perf produce``, ``perf transactions``, ``perf stream``,
``perf maintain``) create a store; every other command that uses one
fails with exit 1 on a path without one and creates nothing. Perf baselines go to a
temporary directory of their own (or under ``--work-dir``), never beside
the store, and are deleted afterwards.

One module per tool: :mod:`.topics` (kafka-topics), :mod:`.produce`
(kafka-console-producer), :mod:`.consume` (kafka-console-consumer),
:mod:`.groups` (kafka-consumer-groups), :mod:`.offsets` (GetOffsetShell),
:mod:`.dump` (kafka-dump-log), :mod:`.security` (kafka-configs for users, kafka-acls),
:mod:`.perf` (the perf tests' arguments; their drivers are the
checkout's ``benchmarks/``), :mod:`.admin` (the store's own commands), :mod:`.quickstart` (the
README's first command); :mod:`.setup` (the jars Spark sessions use); :mod:`.typed_tables` (``tables run``: topics kept
as typed Delta tables); :mod:`.log_format` (``serve
--log-format json``); :mod:`.arguments` and
:mod:`.tables` hold what they share. The top of the package: it may import any of lakelog.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import traceback
from collections.abc import Sequence

from lakelog.cli import admin, consume, dump, groups, offsets, perf, produce, security, setup, topics, typed_tables
from lakelog.cli.arguments import STORE_ENV, store_options, verbose_option
from lakelog.engine.errors import InvalidConfigError, LakelogError, UnexpectedError, error_for_exception
from lakelog.engine.settings import load_settings, redact_logs, redact_text

COMMANDS = (
    "topics",
    "produce",
    "consume",
    "offsets",
    "dump",
    "history",
    "groups",
    "perf",
    "maintain",
    "check",
    "serve",
    "config",
    "configs",
    "acls",
    "quickstart",
    "setup",
)
# Options of the top level that take a value (skipped when looking for the command).
_VALUED = ("--store", "--bootstrap-server", "--conf")
# Kafka's action flags of the tools that have them, as this CLI's subcommands.
_ACTION_FLAGS = {"topics": topics.ACTIONS, "groups": groups.ACTIONS}


def build_parser() -> argparse.ArgumentParser:
    store = store_options()
    everywhere = [store, verbose_option()]
    parser = argparse.ArgumentParser(
        prog="lakelog",
        parents=everywhere,
        description="Kafka-style topics in a Delta Lake table; the commands are shaped like Kafka's tools.",
        epilog="Exit codes: 0 ok, 1 fatal (incl. no store at the path), 2 invalid input, 3 retriable, "
        "4 outcome unknown, 5 topic exists or group not empty, 6 unknown topic, partition or group, "
        "7 partially committed (produce: stderr lists what was committed), 8 check found violations.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    topics.add_parser(commands, everywhere)
    produce.add_parser(commands, everywhere)
    consume.add_parser(commands, everywhere)
    offsets.add_parser(commands, everywhere)
    dump.add_parser(commands, everywhere)
    # groups describe has Kafka's own --verbose (with --members): there -v alone is lakelog's.
    groups.add_parser(commands, [store, verbose_option(long=False)])
    perf.add_parser(commands, everywhere)
    admin.add_parsers(commands, everywhere)
    security.add_parsers(commands, everywhere)
    setup.add_parser(commands, everywhere)
    typed_tables.add_parser(commands, everywhere)
    return parser


def _command_index(argv: Sequence[str]) -> int | None:
    """Where the command is in ``argv``, past the top-level options before it."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in _VALUED:
            i += 2
        elif token.startswith("-"):
            i += 1
        else:
            return i if token in COMMANDS else None
    return None


def kafka_forms(argv: Sequence[str]) -> list[str]:
    """``topics --create ...`` as ``topics create ...`` (and so on for groups): Kafka's action flag
    becomes the subcommand; the other arguments stay as they are."""
    args = list(argv)
    at = _command_index(args)
    if at is None or args[at] not in _ACTION_FLAGS:
        return args
    actions = _ACTION_FLAGS[args[at]]
    rest = args[at + 1 :]
    first = _first_positional(rest)
    if first >= 0 and rest[first] in actions.values():
        return args  # already the subcommand form
    flags = [a for a in rest if a in actions]
    if not flags:
        return args
    if len(set(flags)) > 1:
        raise InvalidConfigError(f"{args[at]}: give one of {', '.join(actions)}, got {', '.join(flags)}")
    rest.remove(flags[0])
    return [*args[: at + 1], actions[flags[0]], *rest]


def _first_positional(rest: list[str]) -> int:
    i = 0
    while i < len(rest):
        if rest[i] in _VALUED:
            i += 2
        elif rest[i].startswith("-"):
            i += 1
        else:
            return i
    return -1


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code (see the module docstring). Every failure is reported
    as one ``error:`` line, with the traceback only under ``-v``. Malformed arguments
    (a negative count, a missing option) are argparse's: usage on stderr, SystemExit(2)."""
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        raw = kafka_forms(raw)
    except InvalidConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    parser = build_parser()
    args = parser.parse_args(raw)
    # Not parser.set_defaults: the options' actions are shared by every subcommand's parser.
    for name, default in (("store", None), ("conf", None), ("verbose", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
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


__all__ = ["STORE_ENV", "build_parser", "kafka_forms", "main"]
