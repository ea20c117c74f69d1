"""lakelog's own settings, in layers: file, then environment, then keyword arguments.

1. ``conf/lakelog.conf`` (shipped; ``spark-defaults.conf`` syntax), then the
   file named by ``LAKELOG_CONF_FILE`` or passed as ``conf_file=``;
2. environment variables ``LAKELOG_<KEY>``: the key upper-cased with dots as
   underscores (``LAKELOG_PRODUCER_LINGER_MS`` is ``producer.linger.ms``);
3. keyword arguments of :meth:`store.Store.open` (``num_partitions=3``,
   ``**{"producer.linger.ms": 10}``).

A later layer wins. Keys: ``num.partitions``, ``auto.create.topics.enable``, ``jars.dir``; ``topic.<k>``,
``producer.<k>``, ``consumer.<k>`` for every topic, producer and consumer
key (defaults for new topics, producers and consumers; a topic's defaults are
written into its config when it is created, so every client sees the same
topic); ``spark.<k>`` for the SparkSession lakelog builds (over
``conf/spark-defaults.conf``; files and arguments only, since Spark's keys are
case-sensitive). Unknown keys and bad values are errors naming the key and
where it came from, never ignored.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakelog.conf import conf_path, parse_properties
from lakelog.engine.client_config import CONSUMER_CONFIG_KEYS, PRODUCER_CONFIG_KEYS
from lakelog.engine.config import INT_MAX, ConfigKey, key_table, normalize_name
from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.topics import TOPIC_CONFIG_KEYS

SHIPPED_FILE = "lakelog.conf"
ENV_PREFIX = "LAKELOG_"
ENV_CONF_FILE = "LAKELOG_CONF_FILE"
# Environment variables with lakelog's prefix that are not settings: the CLI's
# store, the settings file itself, and the test suite's knobs.
ENV_NOT_SETTINGS = ("LAKELOG_STORE", ENV_CONF_FILE)
ENV_TEST_PREFIX = "LAKELOG_TEST_"

STORE_KEYS = key_table(
    [
        ConfigKey(
            "num.partitions",
            "int",
            1,
            "Partitions of a topic created without a partition count (Kafka's broker default).",
            minimum=1,
            maximum=INT_MAX,
        ),
        ConfigKey(
            "auto.create.topics.enable",
            "bool",
            False,
            "Whether a topic that does not exist is created when a client asks for it, as with Kafka's broker "
            "setting: a producer's send (transactional too), a consumer's subscribe/assign/partitions_for_topic "
            '(if its allow.auto.create.topics), df.write / writeStream .format("lakelog"), the console producer '
            "and consumer, and Metadata requests to `lakelog serve` (not its Produce requests); with "
            "num.partitions and the topic.* settings. "
            "false: nothing is created (a send or write fails with UnknownTopicOrPartitionError). Kafka's "
            "default is true; lakelog's is false, so a mistyped name creates nothing.",
        ),
        ConfigKey(
            "group.initial.rebalance.delay.ms",
            "int",
            3000,
            "How long the first rebalance of a new (or emptied) consumer group waits for more members to join, "
            "each new one extending it by as much up to the rebalance timeout, as Kafka's broker setting: members "
            "starting together form the group in one rebalance. 0: the first member gets its assignment at once.",
            minimum=0,
            maximum=INT_MAX,
        ),
        ConfigKey(
            "jars.dir",
            "string",
            "",
            "Directory where Delta's jars (and S3A's, for s3a:// stores) are resolved through Ivy for sessions "
            "lakelog builds (empty: ~/.cache/lakelog/jars).",
        ),
    ]
)

# `lakelog serve`'s network security, with Kafka's broker names (KafkaConfig / BrokerSecurityConfigs).
SERVE_KEYS = key_table(
    [
        ConfigKey(
            "ssl.keystore.type",
            "enum",
            "PEM",
            "Format of ssl.keystore.location for SSL and SASL_SSL listeners: PEM (the private key and the "
            "certificate chain in one file) or PKCS12 (with ssl.keystore.password). Kafka's JKS is not read.",
            choices=("PEM", "PKCS12"),
        ),
        ConfigKey(
            "ssl.keystore.location",
            "string",
            "",
            "The agent's private key and certificate chain (needed by SSL and SASL_SSL listeners).",
        ),
        ConfigKey("ssl.keystore.password", "string", "", "Password of a PKCS12 keystore (never shown or logged)."),
        ConfigKey("ssl.key.password", "string", "", "Password of an encrypted PEM private key (never shown)."),
        ConfigKey(
            "ssl.truststore.type",
            "enum",
            "PEM",
            "Format of ssl.truststore.location: PEM (CA certificates) or PKCS12.",
            choices=("PEM", "PKCS12"),
        ),
        ConfigKey(
            "ssl.truststore.location",
            "string",
            "",
            "CA certificates that client certificates are checked against (empty: the system's).",
        ),
        ConfigKey("ssl.truststore.password", "string", "", "Password of a PKCS12 truststore (never shown or logged)."),
        ConfigKey(
            "ssl.client.auth",
            "enum",
            "none",
            "Client certificates on SSL listeners, as Kafka's broker: required (refused without a valid one), "
            "requested (checked when given) or none. A client certificate's subject is the principal "
            "(User:CN=...,O=...) on SSL listeners.",
            choices=("required", "requested", "none"),
        ),
        ConfigKey(
            "sasl.enabled.mechanisms",
            "list",
            ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
            "SASL mechanisms of SASL_PLAINTEXT and SASL_SSL listeners. PLAIN checks the password against the "
            "user's SCRAM credentials kept in the store (lakelog configs --alter --entity-type users).",
            choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        ),
        ConfigKey(
            "advertised.listeners",
            "string",
            "",
            "Addresses clients are told to reach each listener at, in --listen's syntax "
            "(SASL_SSL://agent1.example.com:9093,...; matched to a listener by its security protocol). "
            "Empty: each listener's own address.",
        ),
        ConfigKey(
            "authorizer.class.name",
            "string",
            "",
            "Set to org.apache.kafka.metadata.authorizer.StandardAuthorizer (Kafka's name; lakelog's own "
            "implementation of it) to authorize every request of an authenticated (SSL or SASL) listener against "
            "the ACLs in the store. Empty: no authorization, as a broker without an authorizer. PLAINTEXT "
            "listeners are authorized as User:ANONYMOUS when it is set.",
            check=lambda v: (
                None
                if v in ("", AUTHORIZER_CLASS, "kafka.security.authorizer.AclAuthorizer")
                else f"must be empty or {AUTHORIZER_CLASS}"
            ),
        ),
        ConfigKey(
            "super.users",
            "string",
            "",
            "Principals allowed everything whatever the ACLs, separated by ';' (User:admin;User:CN=ops).",
        ),
        ConfigKey(
            "allow.everyone.if.no.acl.found",
            "bool",
            False,
            "Whether a resource no ACL matches is open to everyone (Kafka's default, and lakelog's: false).",
        ),
        ConfigKey(
            "group.consumer.session.timeout.ms",
            "int",
            45_000,
            "How long a member of a consumer-type group (KIP-848, group.protocol=consumer) may go without a "
            "heartbeat before it is removed and its partitions reassigned, as Kafka's broker setting.",
            minimum=1,
            maximum=INT_MAX,
        ),
        ConfigKey(
            "group.consumer.heartbeat.interval.ms",
            "int",
            5_000,
            "How often members of consumer-type groups (KIP-848) heartbeat: the agent answers it in every "
            "ConsumerGroupHeartbeat, as Kafka's broker setting.",
            minimum=1,
            maximum=INT_MAX,
        ),
        ConfigKey(
            "group.consumer.assignors",
            "list",
            ("uniform", "range"),
            "Server-side assignors of consumer-type groups (KIP-848) a member may name in its "
            "group.remote.assignor; the first is the default, as Kafka's broker setting.",
            choices=("uniform", "range"),
        ),
        ConfigKey(
            "serve.cpu.affinity",
            "enum",
            "one",
            "Where `lakelog serve` runs its threads. one: all on the CPU it starts on (its threads take the "
            "interpreter lock in turn, and hand-overs between CPUs cost each a wake-up of the other CPU: "
            "on 2 CPUs warm ProducerPerformance +9%, fetch +27%), its group thread woken without preempting "
            "the event loop (SCHED_BATCH: +6%); all: wherever the operating system places them. Linux only "
            "(elsewhere, and where the process may use one CPU, nothing changes).",
            choices=("one", "all"),
        ),
        ConfigKey(
            "serve.event.loop",
            "enum",
            "uvloop",
            "The event loop `lakelog serve` reads and answers requests on. uvloop: asyncio's loop on libuv "
            "(its streams and cross-thread wake-ups in C: warm ProducerPerformance +2-6%, the event loop's "
            "CPU a commit 0.86 -> 0.72 ms); asyncio: Python's own (also where uvloop is not installed).",
            choices=("uvloop", "asyncio"),
        ),
    ]
)
AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# prefix -> (keys, what the keys configure)
PREFIXED_KEYS: dict[str, tuple[Mapping[str, ConfigKey], str]] = {
    "topic.": (TOPIC_CONFIG_KEYS, "new topics"),
    "producer.": (PRODUCER_CONFIG_KEYS, "producers"),
    "consumer.": (CONSUMER_CONFIG_KEYS, "consumers"),
}
SPARK_PREFIX = "spark."
# Spark's default spark.redaction.regex: values of matching keys are never shown, and Spark's text instead.
SECRET_KEYS = re.compile(r"(?i)secret|password|token|access[.]key")
REDACTED = "*********(redacted)"


def redacted(key: str, value: Any) -> Any:
    """``value``, or :data:`REDACTED` when ``key`` names a secret (Spark's redaction rule)."""
    return REDACTED if SECRET_KEYS.search(key) else value


# Environment variables holding credentials (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_ACCESS_KEY_ID).
_SECRET_ENV = re.compile(r"(?i)secret|password|token|access[._]key")
# "fs.s3a.secret.key=abc", "password: abc", '"token": "abc"' inside free text.
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)([\w.\-]*(?:secret|password|token|access[.]key)[\w.\-]*[\"']?\s*[=:]\s*[\"']?)([^\s\"',;}]+)"
)
# The password of a URI's user info (RFC 3986 section 3.2.1; "s3a://KEY:SECRET@bucket/path", which
# Hadoop once accepted and warns about): the user (an access key id) stays, the secret goes.
_URI_SECRET = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@]+:)([^@\s]+)(@)")
_secret_values: set[str] = set()
_factory_installed = False


def redact_text(text: str) -> str:
    """``text`` with every secret value :func:`redact_logs` was told of, the value of every
    ``<secret key>=value`` / ``<secret key>: value`` and the password of every
    ``scheme://user:password@...`` in it replaced by :data:`REDACTED`."""
    for value in sorted(_secret_values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _URI_SECRET.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    return _SECRET_ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, text)


def redact_logs(settings: Settings, environ: Mapping[str, str] | None = None) -> None:
    """From now on, no log record of this process shows a secret: the values of ``settings``'
    secret keys and of credential variables in ``environ`` (default ``os.environ``), and any
    ``<secret key>=value`` text, are replaced by :data:`REDACTED` when a record is made,
    whichever logger or handler it goes to. Idempotent; secrets accumulate."""
    global _factory_installed
    environ = os.environ if environ is None else environ
    found = [str(v) for k, v in settings.values().items() if SECRET_KEYS.search(k) and v not in (None, "")]
    found += [v for k, v in environ.items() if _SECRET_ENV.search(k) and v]
    # A one- or two-character "secret" would blank out unrelated text; such values protect nothing anyway.
    _secret_values.update(v for v in found if len(v) >= 3)
    if _factory_installed:
        return
    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        text = record.getMessage()
        clean = redact_text(text)
        if clean != text:
            record.msg, record.args = clean, None
        return record

    logging.setLogRecordFactory(factory)
    _factory_installed = True


@dataclass(frozen=True)
class Settings:
    """Resolved settings; ``origins`` says where each given key came from."""

    num_partitions: int = 1
    auto_create_topics_enable: bool = False
    group_initial_rebalance_delay_ms: int = 3000
    jars_dir: str = ""
    topic: dict[str, Any] = field(default_factory=dict)
    producer: dict[str, Any] = field(default_factory=dict)
    consumer: dict[str, Any] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)
    # `lakelog serve`'s settings (SERVE_KEYS: security, consumer-type groups), every key with its value or default.
    serve: dict[str, Any] = field(default_factory=lambda: {k.name: k.default for k in SERVE_KEYS.values()})
    origins: dict[str, str] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        """Every given key with its parsed value, flat (``producer.linger.ms``)."""
        flat: dict[str, Any] = {
            "num.partitions": self.num_partitions,
            "auto.create.topics.enable": self.auto_create_topics_enable,
            "group.initial.rebalance.delay.ms": self.group_initial_rebalance_delay_ms,
            "jars.dir": self.jars_dir,
        }
        for prefix, group in (("topic.", self.topic), ("producer.", self.producer), ("consumer.", self.consumer)):
            flat.update({prefix + k: v for k, v in group.items()})
        flat.update(self.serve)
        flat.update(self.spark)
        return flat

    def shown(self) -> dict[str, Any]:
        """:meth:`values` fit to print or log: secrets (access keys, tokens, passwords) redacted."""
        return {key: redacted(key, value) for key, value in self.values().items()}


def load_settings(
    conf_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Resolve the layers (see the module docstring); raises InvalidConfigError."""
    environ = os.environ if environ is None else environ
    raw: dict[str, tuple[Any, str]] = {}
    shipped = conf_path(SHIPPED_FILE)
    _merge(raw, _file_layer(shipped), str(shipped))
    user_file = conf_file if conf_file is not None else environ.get(ENV_CONF_FILE)
    if user_file:
        path = Path(user_file).expanduser()
        if not path.is_file():
            raise InvalidConfigError(f"settings file {str(path)!r} does not exist")
        _merge(raw, _file_layer(path), str(path))
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in ENV_NOT_SETTINGS or name.startswith(ENV_TEST_PREFIX):
            continue
        key = name.removeprefix(ENV_PREFIX).lower().replace("_", ".")
        if key.startswith(SPARK_PREFIX):
            raise InvalidConfigError(
                f"environment variable {name}: Spark settings cannot come from the environment "
                f"(their keys are case-sensitive); put them in a settings file ({ENV_CONF_FILE})"
            )
        raw[key] = (value, f"environment variable {name}")
    for name, value in (overrides or {}).items():
        key = name if name.startswith(SPARK_PREFIX) or "." in name else normalize_name(name)
        raw[key] = (value, f"argument {name}")
    return _resolve(raw)


def _file_layer(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text(encoding="utf-8"))


def _merge(raw: dict[str, tuple[Any, str]], values: Mapping[str, str], origin: str) -> None:
    for key, value in values.items():
        raw[key] = (value, origin)


def _resolve(raw: Mapping[str, tuple[Any, str]]) -> Settings:
    store: dict[str, Any] = {k.name: k.default for k in STORE_KEYS.values()}
    groups: dict[str, dict[str, Any]] = {prefix: {} for prefix in PREFIXED_KEYS}
    spark: dict[str, str] = {}
    serve: dict[str, Any] = {k.name: k.default for k in SERVE_KEYS.values()}
    origins = {key: origin for key, (_, origin) in raw.items()}
    for key, (value, origin) in raw.items():
        prefix = next((p for p in PREFIXED_KEYS if key.startswith(p)), None)
        group = PREFIXED_KEYS[prefix][0] if prefix is not None else {}
        name = key.removeprefix(prefix) if prefix is not None else key
        if key in SERVE_KEYS:
            try:
                serve[key] = SERVE_KEYS[key].parse(value)
            except InvalidConfigError as exc:
                raise InvalidConfigError(f"{exc} (from {origin})") from None
            continue
        if key not in STORE_KEYS and not key.startswith(SPARK_PREFIX) and name not in group:
            hint = ", ".join(f"{prefix}{k}" for k in sorted(group)) if prefix is not None else _known_summary()
            raise InvalidConfigError(f"unknown setting {key!r} (from {origin}); known: {hint}")
        try:
            if key in STORE_KEYS:
                store[key] = STORE_KEYS[key].parse(value)
            elif key.startswith(SPARK_PREFIX):
                spark[key] = str(value).lower() if isinstance(value, bool) else str(value)
            else:
                groups[prefix][name] = group[name].parse(value)
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"{exc} (from {origin})") from None
    return Settings(
        num_partitions=store["num.partitions"],
        auto_create_topics_enable=store["auto.create.topics.enable"],
        group_initial_rebalance_delay_ms=store["group.initial.rebalance.delay.ms"],
        jars_dir=store["jars.dir"],
        topic=groups["topic."],
        producer=groups["producer."],
        consumer=groups["consumer."],
        spark=spark,
        serve=serve,
        origins=origins,
    )


def _known_summary() -> str:
    prefixed = ", ".join(f"{p}<{what} key>" for p, (_, what) in PREFIXED_KEYS.items())
    return f"{', '.join(STORE_KEYS)}, {', '.join(SERVE_KEYS)}, {prefixed}, {SPARK_PREFIX}<Spark key>"


def reference_rows() -> list[tuple[str, str, str]]:
    """(key, default, meaning) of every setting, in the order of the reference table."""
    rows = [
        (k.name, k.render(k.default) if k.default != "" else "", k.doc)
        for k in (*STORE_KEYS.values(), *SERVE_KEYS.values())
    ]
    rows.append(
        (f"{SPARK_PREFIX}*", "lakelog/conf/spark-defaults.conf", "Any Spark setting of the session lakelog builds.")
    )
    for prefix, (keys, _) in PREFIXED_KEYS.items():
        for key in keys.values():
            default = key.render(key.default) if key.default not in ("", None) else ""
            rows.append((prefix + key.name, default, key.doc))
    return rows


def reference_table() -> str:
    """The reference table of every setting, as Markdown (README's "Configuration reference")."""
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, default, doc in reference_rows():
        cell = f"`{default}`" if default else ""
        lines.append(f"| `{key}` | {cell} | {doc.replace('|', '/')} |")
    return "\n".join(lines)
