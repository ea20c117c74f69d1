"""The options of ``format("lakelog")``, with the names and meaning of Spark's Kafka source and sink.

Checked when the query is defined (the DataSource is built): an unknown
option, a value of the wrong kind, or two options that contradict each
other is an :class:`engine.errors.InvalidConfigError` naming the option.
Options of Kafka's source and sink that have no meaning here -- Kafka client
settings (``kafka.*``: a store is a path, there are no brokers), consumer
polling and offset-fetch retries, ``groupIdPrefix`` -- are accepted and
ignored, each with one logged warning saying why, so a query written for
``format("kafka")`` runs unchanged. Reference:
https://spark.apache.org/docs/latest/structured-streaming-kafka-integration.html

Whether a read is batch or streaming is known in the Python worker only when
the reader is made, after ``load()``; lakelog-jvm.jar's provider tells it at
``load()`` with the internal option :data:`QUERY_KIND_OPTION`, so an option of
the other kind fails there.

Typed reads (lakelog's own options, named as Spark's ``from_avro`` users and Databricks'
``from_avro(..., subject, schemaRegistryAddress)`` name them): ``valueFormat`` / ``keyFormat``
``avro``, ``json`` (JSON Schema) or ``protobuf`` decode the column with the store's Schema Registry (its
``_schemas`` topic), ``valueSubject`` / ``keySubject`` name the subject (default ``<topic>-value`` /
``<topic>-key``), ``valueMessage`` / ``keyMessage`` the Protobuf message read (default: the
schema's first), ``mode`` is ``from_avro``'s and ``from_json``'s FAILFAST (default) or PERMISSIVE;
see :mod:`lakelog.schemas.spark_columns`.

S3A settings (``fs.s3a.endpoint``, ``fs.s3a.access.key``, ... and their
``fs.s3a.bucket.<bucket>.*`` forms) are accepted as options, as Delta's
DataFrameReader/Writer accept Hadoop ``fs.*`` options for a table's
storage. They reach lakelog's Python side in Spark's Python workers, which
cannot see the session's Hadoop configuration; lakelog-jvm.jar's provider
(io.lakelog.spark.LakelogProvider) fills them in from it, so a session
configured with ``spark.hadoop.fs.s3a.*`` alone works.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakelog.engine.errors import InvalidConfigError, InvalidOffsetError
from lakelog.engine.offsets import EARLIEST, LATEST, parse_offset_spec
from lakelog.engine.storage.object_store import StoreAccess, bucket_and_key, is_s3, settings_from_hadoop
from lakelog.schemas.spark_columns import FORMATS, MODES, Decoding

SOURCE_OPTIONS = (
    "path",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "failOnDataLoss",
    "includeHeaders",
    "groupId",
    "minPartitions",
    "maxRecordsPerPartition",
    "valueFormat",
    "keyFormat",
    "valueSubject",
    "keySubject",
    "valueMessage",
    "keyMessage",
    "mode",
)
# checkpointLocation is Spark's own; DataStreamWriter hands it to the sink with the rest.
SINK_OPTIONS = ("path", "topic", "checkpointLocation")
# Hadoop S3A settings for the store, as options (see the module docstring).
S3A_OPTION_PREFIX = "fs.s3a."
STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "groupId")
BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
# Set by io.lakelog.spark.LakelogProvider at load(): "batch" or "streaming" (LakelogProvider.QUERY_KIND).
QUERY_KIND_OPTION = "lakelog.internal.querykind"
KAFKA_PREFIX = "kafka."
_NO_BROKERS = "lakelog has no brokers: it reads and writes the store given by option('path')"
# Kafka source options with no meaning here, and why: accepted and ignored with a warning.
IGNORED_SOURCE_OPTIONS = {
    "kafkaConsumer.pollTimeoutMs": "records are read from the store's files, no consumer polls a broker",
    "groupIdPrefix": "the query reads files and joins no consumer group (option 'groupId' commits its offsets "
    "to a group)",
    "fetchOffset.numRetries": "offsets come from the Delta log, with no broker to retry",
    "fetchOffset.retryIntervalMs": "offsets come from the Delta log, with no broker to retry",
}
_KAFKA_GROUP_ID = "kafka.group.id"

log = logging.getLogger("lakelog.spark_connector")

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def check_known(
    options: Mapping[str, str], known: tuple[str, ...], what: str, ignored: Mapping[str, str] | None = None
) -> tuple[tuple[str, str], ...]:
    """Raise for options ``format("lakelog")`` does not have (case-insensitive, as Spark's).

    Returns the options given that Kafka's source or sink has but that mean
    nothing here (``kafka.*`` and ``ignored``), each with the reason, for
    :func:`warn_ignored`.
    """
    names = {k.lower(): k for k in known}
    no_ops = {k.lower(): why for k, why in (ignored or {}).items()}
    found = []
    for key in options:
        low = str(key).lower()
        if low == QUERY_KIND_OPTION:
            continue
        if low == _KAFKA_GROUP_ID:
            found.append((str(key), f"{_NO_BROKERS}; option 'groupId' commits a streaming query's offsets to a group"))
        elif low.startswith(KAFKA_PREFIX):
            found.append((str(key), f"{_NO_BROKERS}; Kafka client settings do nothing"))
        elif low in no_ops:
            found.append((str(key), no_ops[low]))
        elif low not in names and not low.startswith(S3A_OPTION_PREFIX):
            raise InvalidConfigError(
                f"unknown {what} option {key!r}; lakelog's {what} options are {', '.join(known)} "
                f"and S3A settings ({S3A_OPTION_PREFIX}*)"
            )
    return tuple(found)


def warn_ignored(ignored: tuple[tuple[str, str], ...], what: str) -> None:
    """One warning per option of Kafka's that is accepted but does nothing here."""
    for key, why in ignored:
        log.warning('format("lakelog") %s option %r is ignored: %s', what, key, why)


def access_from_options(path: str, options: Mapping[str, str]) -> StoreAccess:
    """How Python code in Spark's workers reaches the store: the ``fs.s3a.*`` options
    (lower-cased keys), read as S3A reads its configuration, the worker's AWS
    environment filling what they leave unset. Without such options the worker
    keeps its own settings (``settings`` None)."""
    s3a = {k: v for k, v in options.items() if k.startswith(S3A_OPTION_PREFIX)}
    if not s3a or not is_s3(path):
        return StoreAccess(path)
    bucket, _ = bucket_and_key(path)
    return StoreAccess(path, settings_from_hadoop(s3a.get, bucket.lower()))


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise InvalidConfigError(f"option {name!r} must be true or false, got {raw!r}")


def _positive_long(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidConfigError(f"option {name!r} must be a positive integer, got {raw!r}")
    return value


def parse_duration_ms(raw: str, name: str) -> int:
    """``"15m"``, ``"30s"``, ``"500ms"`` or plain milliseconds."""
    match = _DURATION.match(raw)
    if not match:
        raise InvalidConfigError(f"option {name!r} must be a duration like 15m, 30s or 500ms, got {raw!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2) or "ms"]


def _assign(raw: str) -> dict[str, list[int]]:
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise InvalidConfigError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {raw!r}") from exc
    ok = isinstance(parsed, dict) and all(
        isinstance(t, str) and isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
        for t, ps in parsed.items()
    )
    if not ok or not parsed:
        raise InvalidConfigError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, got {raw!r}")
    return {t: sorted(set(ps)) for t, ps in parsed.items()}


def _timestamps(raw: str, option: str) -> dict[str, dict[int, int]]:
    try:
        parsed = json.loads(raw)
        result = {str(t): {int(p): int(ts) for p, ts in ps.items()} for t, ps in parsed.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise InvalidConfigError(
            f'option {option!r} must be JSON like {{"topicA":{{"0":1700000000000}}}}, got {raw!r}'
        ) from exc
    if any(ts < 0 for ps in result.values() for ts in ps.values()):
        raise InvalidConfigError(f"option {option!r}: timestamps must be >= 0 (ms)")
    return result


def _timestamp(options: Mapping[str, str], option: str) -> int | None:
    if option.lower() not in options:
        return None
    raw = options[option.lower()].strip()
    if not raw.isdigit():
        raise InvalidConfigError(f"option {option!r} must be milliseconds since the epoch, got {raw!r}")
    return int(raw)


def _one_of(options: Mapping[str, str], names: tuple[str, ...]) -> None:
    given = [n for n in names if n.lower() in options]
    if len(given) > 1:
        raise InvalidConfigError(f"options {' and '.join(given)} contradict each other: give one")


@dataclass(frozen=True)
class Subscription:
    """What to read: exactly one of Kafka's ``subscribe``, ``subscribePattern``, ``assign``."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        if self.assignment:
            return f"assign {dict(self.assignment)}"
        return f"subscribe {list(self.topics)}"


@dataclass(frozen=True)
class SourceOptions:
    path: str
    subscription: Subscription
    starting: str | dict[str, dict[int, int]]  # parsed startingOffsets
    ending: str | dict[str, dict[int, int]]  # parsed endingOffsets (batch)
    starting_timestamp: int | None
    starting_by_timestamp: dict[str, dict[int, int]] | None
    timestamp_strategy: str  # "error" or "latest"
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fail_on_data_loss: bool
    include_headers: bool
    group_id: str | None
    access: StoreAccess
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    ignored: tuple[tuple[str, str], ...] = ()  # Kafka options accepted as no-ops, with why
    ending_timestamp: int | None = None  # endingTimestamp (batch)
    ending_by_timestamp: dict[str, dict[int, int]] | None = None  # endingOffsetsByTimestamp (batch)
    decodings: tuple[Decoding, ...] = ()  # keyFormat / valueFormat: typed columns


def query_kind(options: Mapping[str, Any]) -> bool | None:
    """Streaming (True), batch (False) or unknown (None): what LakelogProvider said at ``load()``."""
    kind = _lower(options).get(QUERY_KIND_OPTION)
    return None if kind is None else kind.strip().lower() == "streaming"


def parse_source_options(raw: Mapping[str, Any], *, streaming: bool | None) -> SourceOptions:
    """Validate the options of a read: streaming, batch, or (None) either, as at ``load()``
    (there the JVM provider's :data:`QUERY_KIND_OPTION` says which, when present)."""
    ignored = check_known(raw, SOURCE_OPTIONS, "source", IGNORED_SOURCE_OPTIONS)
    options = _lower(raw)
    if streaming is None:
        streaming = query_kind(options)
    path = options.get("path", "").strip()
    if not path:
        raise InvalidConfigError("option 'path' (the lakelog store) is required, e.g. .option('path', '/data/store')")
    for name in () if streaming is None else STREAM_ONLY if not streaming else BATCH_ONLY:
        if name.lower() in options:
            raise InvalidConfigError(
                f"option {name!r} only applies to {'streaming' if not streaming else 'batch'} queries"
            )

    chosen = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in options]
    if len(chosen) != 1:
        raise InvalidConfigError(
            "give exactly one of the options 'subscribe', 'subscribePattern' and 'assign'"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    if chosen[0] == "subscribe":
        topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not topics:
            raise InvalidConfigError("option 'subscribe' must name at least one topic")
        subscription = Subscription(topics=topics)
    elif chosen[0] == "subscribePattern":
        try:
            re.compile(options["subscribepattern"])
        except re.error as exc:
            raise InvalidConfigError(f"option 'subscribePattern' is not a valid regex: {exc}") from exc
        subscription = Subscription(pattern=options["subscribepattern"])
    else:
        subscription = Subscription(assignment={t: tuple(ps) for t, ps in _assign(options["assign"]).items()})

    # Spark's Kafka source lets one win silently (by timestamp over offsets); which one was
    # meant cannot be told, so two are an error here.
    _one_of(options, ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp"))
    _one_of(options, ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"))
    try:
        starting = parse_offset_spec(
            options.get("startingoffsets", "latest" if streaming else "earliest"), option="startingOffsets"
        )
        ending = parse_offset_spec(options.get("endingoffsets", "latest"), option="endingOffsets")
    except InvalidOffsetError as exc:
        raise InvalidConfigError(str(exc)) from exc
    if streaming is False:
        if starting == "latest" or (isinstance(starting, dict) and _has(starting, LATEST)):
            raise InvalidConfigError("option 'startingOffsets' cannot be latest (-1) for batch queries")
        if ending == "earliest" or (isinstance(ending, dict) and _has(ending, EARLIEST)):
            raise InvalidConfigError("option 'endingOffsets' cannot be earliest (-2) for batch queries")
    starting_timestamp = _timestamp(options, "startingTimestamp")
    by_timestamp = (
        _timestamps(options["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
        if "startingoffsetsbytimestamp" in options
        else None
    )
    ending_by_timestamp = (
        _timestamps(options["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp")
        if "endingoffsetsbytimestamp" in options
        else None
    )
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidConfigError(
            f"option 'startingOffsetsByTimestampStrategy' must be error or latest, got {strategy!r}"
        )

    max_per_trigger = _positive_long(options, "maxOffsetsPerTrigger")
    min_per_trigger = _positive_long(options, "minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise InvalidConfigError(
            f"option 'minOffsetsPerTrigger' ({min_per_trigger}) is larger than "
            f"'maxOffsetsPerTrigger' ({max_per_trigger})"
        )
    delay_ms = parse_duration_ms(options.get("maxtriggerdelay", "15m"), "maxTriggerDelay")
    if "maxtriggerdelay" in options and min_per_trigger is None:
        raise InvalidConfigError("option 'maxTriggerDelay' only applies together with 'minOffsetsPerTrigger'")
    group_id = options.get("groupid")
    if group_id is not None and not group_id.strip():
        raise InvalidConfigError("option 'groupId' must not be empty")
    return SourceOptions(
        path=path,
        subscription=subscription,
        starting=starting,
        ending=ending,
        starting_timestamp=starting_timestamp,
        starting_by_timestamp=by_timestamp,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay_ms,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        group_id=group_id,
        access=access_from_options(path, options),
        min_partitions=_positive_long(options, "minPartitions"),
        max_records_per_partition=_positive_long(options, "maxRecordsPerPartition"),
        ignored=ignored,
        ending_timestamp=_timestamp(options, "endingTimestamp"),
        ending_by_timestamp=ending_by_timestamp,
        decodings=_decodings(options, subscription),
    )


def _decodings(options: Mapping[str, str], subscription: Subscription) -> tuple[Decoding, ...]:
    """The typed columns ``keyFormat`` / ``valueFormat`` ask for (with ``keySubject`` /
    ``valueSubject``, Confluent's TopicNameStrategy subject otherwise, and ``mode``)."""
    mode = options.get("mode", "FAILFAST").strip().upper()
    if mode not in MODES:
        raise InvalidConfigError(f"option 'mode' must be one of {', '.join(MODES)}, got {options['mode']!r}")
    found = []
    for column in ("key", "value"):
        fmt = options.get(f"{column}format", "binary").strip().lower()
        subject = options.get(f"{column}subject")
        message = options.get(f"{column}message")
        if message is not None and fmt != "protobuf":
            raise InvalidConfigError(f"option '{column}Message' applies with option {column}Format=protobuf only")
        if fmt == "binary":
            if subject is not None:
                raise InvalidConfigError(f"option '{column}Subject' applies with option '{column}Format' only")
            continue
        if fmt not in FORMATS:
            raise InvalidConfigError(
                f"option '{column}Format' must be binary (the default: bytes as Kafka's source gives them) "
                f"or {', '.join(FORMATS)}, got {fmt!r}"
            )
        topics = sorted({*subscription.topics, *subscription.assignment})
        if subscription.pattern is not None or len(topics) != 1:
            raise InvalidConfigError(
                f"option '{column}Format' decodes one topic's {column}s with its subject's schemas: "
                f"subscribe to exactly one topic (got {subscription.describe()})"
            )
        subject = (subject or "").strip() or f"{topics[0]}-{column}"
        found.append(Decoding(column, topics[0], subject, mode, fmt, (message or "").strip() or None))
    if "mode" in options and not found:
        raise InvalidConfigError("option 'mode' applies with option 'valueFormat' or 'keyFormat' only")
    return tuple(found)


def _has(spec: Mapping[str, Mapping[int, int]], code: int) -> bool:
    return any(v == code for ps in spec.values() for v in ps.values())


@dataclass(frozen=True)
class SinkOptions:
    path: str
    topic: str | None
    access: StoreAccess
    ignored: tuple[tuple[str, str], ...] = ()  # Kafka options accepted as no-ops, with why


def parse_sink_options(raw: Mapping[str, Any]) -> SinkOptions:
    """Validate the options of a write; ``topic`` overrides a ``topic`` column, as in Kafka's sink."""
    ignored = check_known(raw, SINK_OPTIONS, "sink")
    options = _lower(raw)
    path = options.get("path", "").strip()
    if not path:
        raise InvalidConfigError("option 'path' (the lakelog store) is required, e.g. .option('path', '/data/store')")
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise InvalidConfigError("option 'topic' must not be empty")
    return SinkOptions(
        path=path, topic=topic.strip() if topic else None, access=access_from_options(path, options), ignored=ignored
    )
