"""The producer's and the consumer's configuration keys, Kafka's flat dotted names.

Here, below both clients, so that lakelog's settings (``producer.<key>``,
``consumer.<key>``: :mod:`engine.settings`) validate them without importing
the clients; ``partition.assignment.strategy`` values are parsed here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakelog.engine.config import INT_MAX, ConfigKey, key_table
from lakelog.engine.errors import InvalidConfigError

STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")

_PACKAGE = "org.apache.kafka.clients.consumer."
_CLASS_NAMES = {
    _PACKAGE + "RangeAssignor": "range",
    _PACKAGE + "RoundRobinAssignor": "roundrobin",
    _PACKAGE + "StickyAssignor": "sticky",
    _PACKAGE + "CooperativeStickyAssignor": "cooperative-sticky",
}


def _accepted() -> str:
    return ", ".join(STRATEGIES) + " or the class names " + ", ".join(_CLASS_NAMES)


def parse_strategy(value: str | Sequence[str]) -> str:
    """The canonical name (one of :data:`STRATEGIES`) of the first entry of a
    ``partition.assignment.strategy`` value (see :func:`parse_strategies`)."""
    return parse_strategies(value)[0]


def parse_strategies(value: str | Sequence[str]) -> list[str]:
    """The canonical names (of :data:`STRATEGIES`) of a ``partition.assignment.strategy`` value,
    in its order, without repeats: the protocols a member offers its group. Kafka's
    coordinator chooses among the strategies *every* member lists the one most members put first.

    Accepts Kafka's short names (any case) and assignor class names, alone or
    as Kafka's list (a sequence, or one string separated by commas), e.g.
    ``"range,cooperative-sticky"``. Every entry must be known (InvalidConfigError).
    """
    if isinstance(value, str):
        entries = value.split(",")
    elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        entries = [part for v in value for part in v.split(",")]
    else:
        raise InvalidConfigError(
            f"partition.assignment.strategy {value!r} is not a name or a list of names; accepted: {_accepted()}"
        )
    names = [entry.strip() for entry in entries if entry.strip()]
    if not names:
        raise InvalidConfigError(f"partition.assignment.strategy {value!r} is empty; accepted: {_accepted()}")
    canonical: list[str] = []
    for name in names:
        strategy = name.lower() if name.lower() in STRATEGIES else _CLASS_NAMES.get(name)
        if strategy is None:
            raise InvalidConfigError(
                f"partition.assignment.strategy {value!r}: {name!r} is not a known assignor; accepted: {_accepted()}"
            )
        if strategy not in canonical:
            canonical.append(strategy)
    return canonical


PRODUCER_CONFIG_KEYS = key_table(
    [
        ConfigKey("client.id", "string", "", "Name recorded with every commit of this producer (default producer-N)."),
        ConfigKey(
            "acks",
            "enum",
            "all",
            "Only 'all' (or -1): a record is acknowledged when its Delta commit has landed.",
            choices=("all", "-1"),
        ),
        ConfigKey(
            "batch.size",
            "int",
            16 * 1024 * 1024,
            "Bytes of records that seal a batch at once; one batch is one commit.",
            minimum=1,
            maximum=INT_MAX,
        ),
        ConfigKey(
            "batch.num.messages",
            "int",
            1_000_000,
            "Records that seal a batch at once (librdkafka's name).",
            minimum=1,
            maximum=INT_MAX,
        ),
        ConfigKey("linger.ms", "long", 5, "How long a batch waits for more records before it is committed.", minimum=0),
        ConfigKey(
            "buffer.memory",
            "long",
            256 * 1024 * 1024,
            "Bytes of unsent records held before send() blocks.",
            minimum=1,
        ),
        ConfigKey("max.block.ms", "long", 60_000, "How long send() blocks on a full buffer before failing.", minimum=0),
        ConfigKey(
            "retries", "int", INT_MAX, "Retries of a conflicting commit (bounded by delivery.timeout.ms).", minimum=0
        ),
        ConfigKey("retry.backoff.ms", "long", 100, "First backoff after a commit conflict.", minimum=0),
        ConfigKey("retry.backoff.max.ms", "long", 1000, "Largest backoff after repeated conflicts.", minimum=0),
        ConfigKey(
            "delivery.timeout.ms",
            "long",
            120_000,
            "Upper bound on the time from send() to a record's acknowledgement or failure: time queued "
            "and commit retries included (at least linger.ms).",
            minimum=1,
        ),
        ConfigKey("partitioner.ignore.keys", "bool", False, "Spread keyed records like keyless ones."),
        ConfigKey(
            "enable.idempotence",
            "bool",
            True,
            "Each batch commit sets a Delta app transaction (lakelog-producer-<id>, batch number), so a "
            "retry after an unknown outcome never commits a batch twice.",
        ),
        ConfigKey(
            "metadata.max.age.ms", "long", 300_000, "Age after which cached topic metadata is re-read.", minimum=0
        ),
    ]
)


def _strategy_error(value: Any) -> str | None:
    try:
        parse_strategy(value)
    except InvalidConfigError as exc:
        return str(exc)
    return None


CONSUMER_CONFIG_KEYS = key_table(
    [
        ConfigKey("client.id", "string", "", "Name recorded with the member and its commits."),
        ConfigKey("group.id", "string", "", "The consumer group; needed for subscribe() and commit()."),
        ConfigKey(
            "auto.offset.reset",
            "enum",
            "latest",
            "Where to start without a usable committed offset: earliest, latest, or none (raise).",
            choices=("earliest", "latest", "none"),
        ),
        ConfigKey(
            "allow.auto.create.topics",
            "bool",
            True,
            "Whether subscribe(), assign() and partitions_for_topic() create a topic that does not exist "
            "(num.partitions, the "
            "topic.* settings); only when the store's auto.create.topics.enable is true too, as Kafka's "
            "broker decides. A pattern never creates one.",
        ),
        ConfigKey("enable.auto.commit", "bool", True, "Commit positions every auto.commit.interval.ms from poll()."),
        ConfigKey("auto.commit.interval.ms", "long", 5000, "Interval of automatic commits.", minimum=0),
        ConfigKey("max.poll.records", "int", 500, "Most records one poll() returns.", minimum=1, maximum=INT_MAX),
        ConfigKey(
            "session.timeout.ms", "long", 45_000, "Heartbeat silence after which a member is removed.", minimum=1
        ),
        ConfigKey(
            "heartbeat.interval.ms",
            "long",
            3000,
            "Interval of lease renewals (outside the Delta log) and of checks for silent members.",
            minimum=1,
        ),
        ConfigKey(
            "group.instance.id",
            "string",
            "",
            "Static membership (KIP-345): a member restarted with the same id within session.timeout.ms "
            "gets its partitions back without a rebalance.",
        ),
        ConfigKey(
            "max.poll.interval.ms", "long", 300_000, "Longest gap between polls before the member leaves.", minimum=1
        ),
        ConfigKey(
            "fetch.min.records",
            "int",
            10_000,
            "Records read ahead per partition fetch (whole row groups; lakelog's fetch.min.bytes).",
            minimum=1,
        ),
        ConfigKey("fetch.max.wait.ms", "long", 100, "Pause between looks for new data while poll() waits.", minimum=0),
        ConfigKey(
            "isolation.level",
            "enum",
            "read_committed",
            "Only read_committed: open and aborted transactions are never in the table.",
            choices=("read_committed",),
        ),
        ConfigKey(
            "partition.assignment.strategy",
            "string",
            "range",
            "range, roundrobin, sticky or cooperative-sticky (or Kafka's class names); cooperative-sticky "
            "revokes only the partitions that move.",
            check=_strategy_error,
        ),
        ConfigKey(
            "retries",
            "int",
            INT_MAX,
            "Retries of an offset commit or group change that lost its version to another (bounded by "
            "default.api.timeout.ms).",
            minimum=0,
        ),
        ConfigKey(
            "default.api.timeout.ms",
            "long",
            60_000,
            "How long commit() and the group's joins and syncs may take, retries included (Kafka's commitSync bound).",
            minimum=1,
        ),
    ]
)
