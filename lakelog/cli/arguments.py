"""What every ``lakelog`` command shares: the store options, argument types, ``k=v`` lists,
Java properties files, topic arguments given either way, and notes on stderr."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from lakelog.engine.errors import InvalidConfigError, UnknownTopicOrPartitionError

STORE_ENV = "LAKELOG_STORE"
CHECK_FAILED = 8  # exit code of a check that found violations

Out = Callable[[str], None]

# Keys of a Kafka client's config that name the cluster or the (de)serializers: a store has no
# brokers, and records are bytes, so they mean nothing here (a copied client.properties holds them).
CLIENT_ONLY_KEYS = frozenset(
    {"bootstrap.servers", "key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
)


def note(text: str) -> None:
    """A remark for the user on stderr (stdout keeps the results)."""
    print(text, file=sys.stderr, flush=True)


def store_options() -> argparse.ArgumentParser:
    """``--store``/``--bootstrap-server`` and ``--conf``, accepted before or after any subcommand.

    Defaults are SUPPRESS so that a subcommand's parser never overwrites what was
    given before the subcommand; main() supplies the real defaults.
    """
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--store",
        "--bootstrap-server",
        dest="store",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help=f"store path or URI (default: ${STORE_ENV}); --bootstrap-server is another name for it",
    )
    parent.add_argument(
        "--conf",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="settings file laid over conf/lakelog.conf (default: $LAKELOG_CONF_FILE)",
    )
    return parent


def verbose_option(long: bool = True) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    names = ["-v", "--verbose"] if long else ["-v"]
    parent.add_argument(
        *names, dest="verbose", action="store_true", default=argparse.SUPPRESS, help="log what lakelog does"
    )
    return parent


def store_path(args: argparse.Namespace) -> str:
    path = args.store or os.environ.get(STORE_ENV)
    if not path:
        raise InvalidConfigError(f"no store: pass --store PATH (or --bootstrap-server PATH) or set {STORE_ENV}")
    return path


def open_store(args: argparse.Namespace, *, create: bool = False) -> Any:
    """The store at --store; StoreNotFoundError if there is none, unless ``create``."""
    from lakelog.store import Store

    return Store.open(store_path(args), conf_file=args.conf, create=create)


# -- argument types ---------------------------------------------------------------------


def int_at_least(low: int) -> Callable[[str], int]:
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


def float_at_least(low: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not value >= low:  # also refuses nan
            raise argparse.ArgumentTypeError(f"must be at least {low:g}, got {text}")
        return value

    return parse


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


COUNT = int_at_least(1)
NON_NEGATIVE = int_at_least(0)
WORK_DIR_HELP = (
    "where the run's own temporary directory for baselines goes, a local directory or an S3 URI "
    "(default: the system's temp directory); it is deleted afterwards"
)


# -- k=v lists and properties files --------------------------------------------------------


def split_configs(text: str) -> list[str]:
    """``a=1,b=x,y`` as ["a=1", "b=x,y"]: cleanup.policy=compact,delete holds a comma, so split only before "key="."""
    parts: list[str] = []
    for piece in text.split(","):
        if parts and "=" not in piece:
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return [p for p in parts if p.strip()]


def pairs(items: Iterable[str] | None, what: str, *, commas: bool = True) -> dict[str, str]:
    """``k=v`` arguments as a dict; with ``commas`` each may hold several, comma-separated.

    Without ``commas`` the value is taken whole (``--property key.separator=,``).
    """
    result: dict[str, str] = {}
    for item in items or []:
        for part in split_configs(item) if commas else [item]:
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise InvalidConfigError(f"{what} must look like key=value, got {part!r}")
            result[key.strip()] = value if not commas else value.strip()
    return result


def properties_file(path: str | None, what: str) -> dict[str, str]:
    """A Java .properties file (Kafka's ``--producer.config`` and friends) as a dict; {} without a path."""
    if path is None:
        return {}
    import javaproperties

    try:
        with open(path, encoding="utf-8") as handle:
            return dict(javaproperties.load(handle))
    except OSError as exc:
        raise InvalidConfigError(f"{what}: cannot read {path}: {exc.strerror or exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidConfigError(f"{what}: {path} is not a Java properties file: {exc}") from exc


def client_config(file: str | None, file_flag: str, props: Iterable[str] | None, props_flag: str) -> dict[str, str]:
    """A client's config: the properties file, then ``k=v`` overrides (Kafka's order); keys naming
    brokers or serializers are dropped with a note."""
    config = properties_file(file, file_flag)
    config.update(pairs(props, props_flag))
    dropped = sorted(k for k in config if k in CLIENT_ONLY_KEYS)
    if dropped:
        note(f"note: ignoring {', '.join(dropped)} (a store has no brokers, and records are bytes)")
    return {k: v for k, v in config.items() if k not in CLIENT_ONLY_KEYS}


def boolean(value: str, what: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise InvalidConfigError(f"{what} must be true or false, got {value!r}")


def unescape(text: str) -> str:
    """``\\t``, ``\\n`` and friends in a separator given on the command line (Kafka's tools take them so too)."""
    if "\\" not in text:
        return text
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


# -- topics given either way -----------------------------------------------------------------


def topic_arg(args: argparse.Namespace, what: str, *, required: bool = True) -> str | None:
    """The topic of ``lakelog <what> T`` or ``lakelog <what> --topic T`` (Kafka's form)."""
    positional = getattr(args, "topic", None)
    flag = getattr(args, "topic_flag", None)
    if positional is not None and flag is not None and positional != flag:
        raise InvalidConfigError(f"{what}: two topics given ({positional!r} and --topic {flag!r}); give one")
    topic = positional if positional is not None else flag
    if topic is None and required:
        raise InvalidConfigError(f"{what} needs a topic: `lakelog {what} T` or `lakelog {what} --topic T`")
    return topic


def add_topic_args(parser: argparse.ArgumentParser, help_text: str = "the topic") -> None:
    parser.add_argument("topic", nargs="?", help=f"{help_text} (or --topic)")
    parser.add_argument("--topic", dest="topic_flag", metavar="TOPIC", help=f"{help_text} (Kafka's form)")


def require_partition(topic: str, partition: int | None, partitions: int) -> None:
    if partition is not None and partition >= partitions:
        raise UnknownTopicOrPartitionError(
            f"partition {partition} of topic {topic!r} does not exist (the topic has {partitions})"
        )


def ms_to_text(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def decode(data: bytes | bytearray | None, null: str = "null") -> str:
    if data is None:
        return null
    return bytes(data).decode("utf-8", errors="backslashreplace")
