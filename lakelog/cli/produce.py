"""``lakelog produce``: kafka-console-producer. Lines of stdin (or ``--input-file``) become records,
each parsed before it is sent, as Kafka's LineMessageReader parses them (``--property
parse.key=true``, ``key.separator``, ``parse.headers``, ``headers.delimiter``, ``headers.separator``,
``headers.key.separator``, ``null.marker``, ``ignore.error``)."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from lakelog.cli.arguments import (
    COUNT,
    NON_NEGATIVE,
    Out,
    add_topic_args,
    boolean,
    client_config,
    open_store,
    pairs,
    properties_file,
    require_partition,
    topic_arg,
    unescape,
)
from lakelog.cli.tables import progress_bar
from lakelog.engine.errors import (
    CommitStateUnknownError,
    InvalidConfigError,
    LakelogError,
    PartiallyCommittedError,
    error_for_exception,
)
from lakelog.engine.records import RecordMetadata

if TYPE_CHECKING:
    from lakelog.store import Store

READER_KEYS = (
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
    "null.marker",
    "ignore.error",
)


@dataclass(frozen=True)
class LineFormat:
    """How a line splits into headers, key and value (Kafka's LineMessageReader properties)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        unknown = sorted(set(props) - set(READER_KEYS))
        if unknown:
            raise InvalidConfigError(
                f"unknown --property {', '.join(map(repr, unknown))} for the console producer; "
                f"known: {', '.join(READER_KEYS)}"
            )

        def text(key: str, default: str) -> str:
            value = unescape(props.get(key, default))
            if not value:
                raise InvalidConfigError(f"--property {key} must not be empty")
            return value

        fmt = cls(
            parse_key=boolean(props.get("parse.key", "false"), "--property parse.key"),
            key_separator=text("key.separator", "\t"),
            parse_headers=boolean(props.get("parse.headers", "false"), "--property parse.headers"),
            headers_delimiter=text("headers.delimiter", "\t"),
            headers_separator=text("headers.separator", ","),
            headers_key_separator=text("headers.key.separator", ":"),
            null_marker=unescape(props["null.marker"]) if props.get("null.marker") else None,
            ignore_error=boolean(props.get("ignore.error", "false"), "--property ignore.error"),
        )
        if fmt.parse_headers and fmt.headers_separator == fmt.headers_key_separator:
            raise InvalidConfigError("headers.separator and headers.key.separator must differ")
        return fmt

    def _null(self, text: str) -> str | None:
        return None if self.null_marker is not None and text == self.null_marker else text

    def parse(self, line: str, number: int) -> tuple[list[tuple[str, str | None]] | None, str | None, str | None]:
        """(headers, key, value) of one line; InvalidConfigError naming the line if it is malformed."""
        rest = line
        headers: list[tuple[str, str | None]] | None = None
        if self.parse_headers:
            text, sep, after = rest.partition(self.headers_delimiter)
            if sep:
                headers = self._headers(text, number)
                rest = after
            elif not self.ignore_error:
                raise self._missing("headers delimiter", self.headers_delimiter, line, number)
        key: str | None = None
        if self.parse_key:
            text, sep, after = rest.partition(self.key_separator)
            if sep:
                key, rest = self._null(text), after
            elif not self.ignore_error:
                raise self._missing("key separator", self.key_separator, line, number)
        return headers, key, self._null(rest)

    def _headers(self, text: str, number: int) -> list[tuple[str, str | None]]:
        result: list[tuple[str, str | None]] = []
        for pair in text.split(self.headers_separator) if text else []:
            name, sep, value = pair.partition(self.headers_key_separator)
            if not sep and not self.ignore_error:
                raise InvalidConfigError(
                    f"line {number}: no header key separator {self.headers_key_separator!r} in {pair[:60]!r} "
                    f"(nothing from line {number} on was sent)"
                )
            if self.null_marker is not None and name == self.null_marker:
                raise InvalidConfigError(
                    f"line {number}: a header key equals null.marker {self.null_marker!r}; header keys cannot be null"
                )
            result.append((name, self._null(value) if sep else None))
        return result

    @staticmethod
    def _missing(what: str, separator: str, line: str, number: int) -> InvalidConfigError:
        return InvalidConfigError(
            f"line {number} has no {what} {separator!r}: {line[:60]!r} (nothing from line {number} on was sent)"
        )


def line_format(args: argparse.Namespace) -> LineFormat:
    props = properties_file(args.reader_config, "--reader-config")
    props.update(pairs(args.property, "--property", commas=False))
    if args.parse_key:
        props.setdefault("parse.key", "true")
    if args.key_separator is not None:
        props.setdefault("key.separator", args.key_separator)
    return LineFormat.from_properties(props)


def producer_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = client_config(
        args.producer_config, "--producer.config", args.producer_property, "--producer-property"
    )
    # kafka-console-producer's own flags for producer settings.
    if args.batch_size is not None:
        config["batch.num.messages"] = args.batch_size
    if args.timeout is not None:
        config["linger.ms"] = args.timeout
    if args.request_required_acks is not None:
        config["acks"] = args.request_required_acks
    if args.sync:
        config["linger.ms"] = 0
    config.setdefault("client.id", "console-producer")
    from lakelog.engine.client_config import PRODUCER_CONFIG_KEYS
    from lakelog.engine.config import resolve_config

    resolve_config(PRODUCER_CONFIG_KEYS, config, what="producer config")  # before the store is opened
    return config


class _Lines:
    """The input's lines, with a progress bar by bytes read when the input is a file and stderr a terminal."""

    def __init__(self, handle: IO[str], size: int | None) -> None:
        self._handle = handle
        self._size = size

    def __iter__(self) -> Iterator[str]:
        bar = progress_bar("producing", self._size, unit="bytes") if self._size else None
        if bar is None:
            yield from self._handle
            return
        with bar:
            task = bar.task_ids[0]
            for line in self._handle:
                bar.advance(task, len(line.encode("utf-8", "surrogateescape")))
                yield line


def _file_size(handle: IO[str]) -> int | None:
    try:
        info = os.fstat(handle.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def cmd_produce(args: argparse.Namespace, out: Out, stdin: IO[str] | None = None) -> int:
    """Send the input's lines, each parsed before it is sent; stop at the first bad line.

    Exit 0 when every record was committed; when something failed, the
    error's code if nothing was committed, else PartiallyCommittedError (7)
    naming the committed records' offsets.
    """
    topic = topic_arg(args, "produce")
    assert topic is not None
    fmt = line_format(args)
    config = producer_config(args)
    handle: IO[str]
    if args.input_file is not None:
        try:
            handle = open(args.input_file, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115
        except OSError as exc:
            raise InvalidConfigError(f"--input-file: cannot read {args.input_file}: {exc.strerror or exc}") from exc
    else:
        handle = stdin or sys.stdin
    try:
        store = open_store(args)
        # Known before the first line is read, as the console producer learns from metadata
        # (whose request creates a missing topic when the store's auto.create.topics.enable is true).
        store.context.auto_create_topics([topic])
        require_partition(topic, args.partition, store.describe_topic(topic).partitions)
        return _send_lines(store, topic, args, fmt, config, _Lines(handle, _file_size(handle)), out)
    finally:
        if args.input_file is not None:
            handle.close()


def _send_lines(
    store: Store,
    topic: str,
    args: argparse.Namespace,
    fmt: LineFormat,
    config: dict[str, Any],
    lines: Iterable[str],
    out: Out,
) -> int:
    futures = []
    stopped: BaseException | None = None
    producer = store.producer(**config)
    try:
        for number, raw in enumerate(lines, 1):
            line = raw.rstrip("\n").removesuffix("\r")
            if not line and args.skip_empty:
                continue
            headers, key, value = fmt.parse(line, number)
            future = producer.send(topic, value, key=key, partition=args.partition, headers=headers)
            futures.append(future)
            if args.sync:
                producer.flush()
                if future.failed():
                    break
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
    out(f"{len(committed)} record(s) produced to {topic}")
    return 0


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


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "produce",
        parents=parents,
        help="send lines of stdin or a file as records (kafka-console-producer)",
        description="Each line is a record; --property parse.key=true splits off a key at key.separator "
        "(default TAB), parse.headers=true a header list (h1:v1,h2:v2) at headers.delimiter (default TAB); "
        "a key, value or header value equal to null.marker is null.",
    )
    add_topic_args(p, "the topic to send to")
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help=f"line reader property (repeatable): {', '.join(READER_KEYS)}",
    )
    p.add_argument("--reader-config", metavar="FILE", help="line reader properties from a Java properties file")
    p.add_argument("--parse-key", action="store_true", help="as --property parse.key=true")
    p.add_argument("--key-separator", help="as --property key.separator=SEP (default: tab)")
    p.add_argument("--partition", type=NON_NEGATIVE, help="send every record to this partition")
    p.add_argument("--skip-empty", action="store_true", help="ignore empty lines")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE", help="producer config (repeatable)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="producer config properties file")
    p.add_argument("--sync", action="store_true", help="send each record on its own and wait for its commit")
    p.add_argument("--batch-size", type=COUNT, help="records per commit at most (batch.num.messages)")
    p.add_argument("--timeout", type=NON_NEGATIVE, metavar="MS", help="linger.ms: how long a batch waits for more")
    p.add_argument("--request-required-acks", choices=["all", "-1"], help="only all (-1): acks after the commit")
    p.add_argument("--input-file", metavar="FILE", help="read lines from FILE instead of stdin")
    p.set_defaults(func=cmd_produce)
