"""A real Apache Kafka broker on loopback, for comparing lakelog against Kafka itself.

:class:`KafkaBroker` starts Apache Kafka 4.4 (KRaft, one node that is both
broker and controller) from the jars Maven Central serves, on free
127.0.0.1 ports, in a temporary directory it deletes again. It is the
baseline of ``lakelog perf`` benchmarks (the same workload against a real
broker) and the reference that client tests hold lakelog's behaviour
against, using real Kafka clients (confluent-kafka) and Kafka's own tools
(``kafka-consumer-groups`` and friends via :meth:`KafkaBroker.run_tool`).

It is not part of lakelog's runtime: nothing in lakelog imports it, and it
needs what lakelog itself does not: Java 17+, Maven (the first time, to fetch
the jars into ``~/.cache/lakelog/jars/kafka/``, see ``kafka-reference-pom.xml``
beside this module; Maven's own repository goes to ``~/.cache/lakelog/maven``,
never ``~/.m2``) and the ``confluent-kafka`` package of the ``dev`` extra.

The broker keeps Kafka's own defaults except where one node needs otherwise
(replication factors 1) and what makes tests deterministic (no automatic topic
creation, no initial rebalance delay, 1 partition unless asked). Like any
Kafka broker with default settings it does not fsync each write: it
acknowledges once the page cache has the data, which a benchmark comparing it
with lakelog's commits (durable on acknowledgement) should say.

::

    with KafkaBroker() as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        ...
        out = kafka.run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", kafka.bootstrap, "--list").stdout
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from lakelog.engine.errors import StoreError
from lakelog.jvm.jars import cache_root

POM = Path(__file__).with_name("kafka-reference-pom.xml")
DEFAULT_JARS_DIR = cache_root() / "kafka"
# Maven's local repository: lakelog's cache, so nothing lands in the user's ~/.m2 (whose pom-only
# entries would then confuse Spark's own --packages resolution).
MAVEN_REPOSITORY = cache_root().parent / "maven"

BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"

# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS, which it gives every class it runs, broker and
# tools alike (its -XX:MaxInlineLevel=15 is JDK 17's default already).
RUN_CLASS_JVM_OPTIONS: tuple[str, ...] = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# kafka-server-start.sh's heap, so that benchmarks measure the broker as Kafka ships it.
BROKER_JVM_OPTIONS: tuple[str, ...] = ("-Xms1g", "-Xmx1g", *RUN_CLASS_JVM_OPTIONS)
# kafka-run-class.sh's default heap for tools.
TOOL_JVM_OPTIONS: tuple[str, ...] = ("-Xmx256m", *RUN_CLASS_JVM_OPTIONS)

# Keys KafkaBroker sets itself: overriding them would break the listeners,
# the single-node quorum or the clean-up of the temporary directory.
MANAGED_KEYS = frozenset(
    {
        "process.roles",
        "node.id",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "controller.listener.names",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.voters",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
    }
)

DEFAULT_CONFIG: dict[str, str] = {
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

# The broker's own messages go to its log file; WARN keeps it short, and the
# "Kafka Server started"/"shut down" lines say when it was up.
_BROKER_LOG4J2 = """\
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = info
"""

# As Kafka's tools-log4j2.yaml: tools print their results on stdout, log warnings on stderr.
_TOOLS_LOG4J2 = """\
status = warn
shutdownHook = disable
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
"""

_T = TypeVar("_T")

_BROKER_NODE_ID = 1
_BIND_FAILED = "Address already in use"  # java.net.BindException's message, in Kafka's log
_START_ATTEMPTS = 3  # a free port can be taken by someone else between probing and the broker's bind


class KafkaReferenceError(StoreError):
    """The reference Kafka broker or its tools could not be fetched, started or run.

    The message says which step failed and ends with the tail of the relevant
    output (Maven's, the storage tool's, or the broker's log).
    """


class _PortTaken(KafkaReferenceError):
    """A port chosen as free was taken by someone else before the broker bound it."""


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _pom_digest(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


# Under the jars directory: Spark's own Kafka source and sink (spark-sql-kafka-0-10) and what
# they need beyond Spark, for sessions that hold lakelog serve against format("kafka").
SPARK_KAFKA_DIR = "spark-kafka"


def ensure_kafka_jars(jars_dir: Path = DEFAULT_JARS_DIR, pom: Path = POM, *, timeout_s: float = 1800.0) -> Path:
    """Make sure ``jars_dir`` holds the broker's jars, ``jars_dir/tools`` Kafka's tools and
    ``jars_dir/spark-kafka`` Spark's ``format("kafka")``.

    Returns ``jars_dir``. If ``jars_dir/.complete`` is missing, or was written
    for another version of ``pom``, both class paths are fetched again with
    Maven (``-B -q``) and the marker is written only after both copies
    succeeded, so a half-finished copy is never taken for a complete one.
    Concurrent callers (pytest workers, benchmarks) wait for each other on a
    lock file next to ``jars_dir``. Raises :class:`KafkaReferenceError` if
    Maven is missing or fails.
    """
    jars_dir = Path(jars_dir)
    marker = jars_dir / ".complete"
    digest = _pom_digest(pom)
    if marker.is_file() and marker.read_text().strip() == digest:
        return jars_dir
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaReferenceError(
            f"Kafka's jars are not in {jars_dir} and Maven (mvn) is not on PATH to fetch them ({pom})"
        )
    jars_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(jars_dir.parent / f".{jars_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text().strip() == digest:
            return jars_dir  # another process fetched them while we waited
        shutil.rmtree(jars_dir, ignore_errors=True)
        for profile, target in (
            (None, jars_dir),
            ("tools", jars_dir / "tools"),
            ("spark-kafka", jars_dir / SPARK_KAFKA_DIR),
        ):
            command = [mvn, "-B", "-q", "-Dstyle.color=never", f"-Dmaven.repo.local={MAVEN_REPOSITORY}", "-f", str(pom)]
            if profile:
                command += ["-P", profile]
            command += ["dependency:copy-dependencies", f"-DoutputDirectory={target}"]
            if profile == "spark-kafka":
                command += ["-DincludeScope=runtime"]  # not the Spark a session already has
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired as exc:
                raise KafkaReferenceError(f"Maven did not fetch Kafka's jars within {timeout_s:.0f}s") from exc
            if done.returncode != 0:
                raise KafkaReferenceError(
                    f"Maven failed to fetch Kafka's jars (exit {done.returncode}): {' '.join(command)}\n"
                    + _tail(done.stdout + done.stderr)
                )
        marker.write_text(digest + "\n")
    return jars_dir


def _find_java(java: str | None) -> str:
    if java is not None:
        candidate = shutil.which(java)
    elif os.environ.get("JAVA_HOME"):
        candidate = shutil.which(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")) or shutil.which("java")
    else:
        candidate = shutil.which("java")
    if candidate is None:
        raise KafkaReferenceError(f"java ({java or 'on PATH or in JAVA_HOME'}) was not found; Kafka 4.4 needs Java 17+")
    return candidate


# The lowest port free_ports picks (below it: well-known and registered services' usual ports).
_LOWEST_PORT = 10000


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (what a bind to port 0 gets)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; macOS's range starts higher still


def free_ports(count: int) -> list[int]:
    """``count`` different ports free on 127.0.0.1 now, for programs told which port to listen
    on. Picked at random below the ephemeral range: a port the kernel hands out for port 0 and
    that is closed again can be handed to any other process binding port 0 (an agent, a client)
    before the program meant to listen on it binds it -- a Connect worker's REST server failed to
    start so in a CI run ("Unable to initialize REST server"). Below the range a port races only
    with another caller drawing the same one of ~20,000."""
    top = _ephemeral_start()
    if top - _LOWEST_PORT < 1000:  # an odd range: the kernel's own choice, as before
        top = 0
    # All sockets stay open until every port is chosen, so the ports differ.
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(100 * count):
            if len(ports) == count:
                break
            port = random.randrange(_LOWEST_PORT, top) if top else 0
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken (or lingering): draw again
            ports.append(sock.getsockname()[1])
        if len(ports) < count:
            raise OSError(f"no {count} free ports found on 127.0.0.1")
        return ports


def _cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` makes one (Kafka's Uuid in base64)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # Kafka's Uuid.randomUuid() rejects ids starting with "-": they read as a CLI flag.
        if not text.startswith("-"):
            return text


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _terminate(proc: subprocess.Popen[bytes] | None, workdir: Path | None, grace_s: float) -> None:
    """SIGTERM the broker (Kafka shuts down cleanly on it), SIGKILL its process group after
    ``grace_s``, then delete its directory. Safe to call more than once."""
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass(frozen=True)
class SaslSslListener:
    """A SASL_SSL listener for :class:`KafkaBroker`, beside its PLAINTEXT one.

    ``keystore_pem`` holds the broker's private key (unencrypted PKCS#8) and certificate chain in
    one PEM file (``ssl.keystore.type=PEM``, KIP-651); ``users`` (name -> password) get
    ``mechanism`` credentials when the log is formatted (``kafka-storage format --add-scram``,
    KIP-900), so they can authenticate as soon as the broker is up.
    """

    keystore_pem: Path
    users: Mapping[str, str] = field(default_factory=dict)
    mechanism: str = "SCRAM-SHA-512"

    def __post_init__(self) -> None:
        if self.mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"SaslSslListener takes SCRAM-SHA-256 or SCRAM-SHA-512, not {self.mechanism!r}")
        for name, password in self.users.items():
            # kafka-storage's --add-scram value is "MECHANISM=[name=...,password=...]": no room for these.
            if any(c in name + password for c in ',=[]"\n'):
                raise ValueError(f"SCRAM user {name!r}: names and passwords here cannot hold , = [ ] or quotes")

    def properties(self, port: int) -> dict[str, str]:
        """The broker settings of this listener on ``port`` (besides listeners and the protocol map)."""
        return {
            "sasl.enabled.mechanisms": self.mechanism,
            # A SCRAM listener needs a JAAS entry, even one without credentials (they are in the metadata log).
            f"listener.name.sasl_ssl.{self.mechanism.lower()}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore_pem),
        }

    def format_arguments(self) -> list[str]:
        return [
            arg
            for name, password in self.users.items()
            for arg in ("--add-scram", f"{self.mechanism}=[name={name},password={password}]")
        ]


class KafkaBroker:
    """One Apache Kafka broker (KRaft combined mode, node id 1) on 127.0.0.1.

    After :meth:`start` returns (or ``with`` is entered): the broker process
    runs in its own process group, listens on :attr:`bootstrap` (PLAINTEXT)
    and :attr:`controller_port`, and has answered a metadata request listing
    itself, so topics can be created and produced to at once. Its data, its
    ``server.properties`` and its log (:attr:`log_path`) are in
    :attr:`workdir`, a new temporary directory.

    After :meth:`stop` (or leaving ``with``): the process has exited (SIGTERM,
    then SIGKILL after ``stop_timeout_s``) and :attr:`workdir` is gone. A
    broker that is never stopped is stopped when it is garbage-collected or
    the interpreter exits.

    ``config`` adds to or overrides :data:`DEFAULT_CONFIG` (e.g.
    ``{"offsets.topic.num.partitions": "1"}``); the listener, quorum and
    directory keys (:data:`MANAGED_KEYS`) are the broker's own and raise
    ``ValueError``. ``sasl_ssl`` adds a SASL_SSL listener (:attr:`sasl_ssl_bootstrap`); the
    PLAINTEXT one stays for the broker's own use and for clients that want it.
    """

    def __init__(
        self,
        config: Mapping[str, str] | None = None,
        *,
        jars_dir: Path | str = DEFAULT_JARS_DIR,
        java: str | None = None,
        jvm_options: Sequence[str] = BROKER_JVM_OPTIONS,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 60.0,
        sasl_ssl: SaslSslListener | None = None,
    ) -> None:
        config = dict(config or {})
        managed = sorted(MANAGED_KEYS & config.keys())
        if managed:
            raise ValueError(f"KafkaBroker sets {', '.join(managed)} itself; they cannot be configured")
        self.config: dict[str, str] = {**DEFAULT_CONFIG, **{k: str(v) for k, v in config.items()}}
        self.jars_dir = Path(jars_dir)
        self._java_arg = java
        self.jvm_options = tuple(jvm_options)
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.sasl_ssl = sasl_ssl
        self._sasl_ssl_port: int | None = None
        self._java: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._port: int | None = None
        self._controller_port: int | None = None
        self._cluster_id: str | None = None
        self._finalizer: weakref.finalize | None = None

    # -- what a started broker exposes -------------------------------------------------

    @property
    def running(self) -> bool:
        """True between a successful :meth:`start` and :meth:`stop`, while the process lives."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:<port>"`` of the PLAINTEXT listener, for ``bootstrap.servers``."""
        return f"127.0.0.1:{self._started(self._port)}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """``"127.0.0.1:<port>"`` of the SASL_SSL listener (only with ``sasl_ssl``)."""
        if self.sasl_ssl is None:
            raise KafkaReferenceError("this Kafka broker has no SASL_SSL listener")
        return f"127.0.0.1:{self._started(self._sasl_ssl_port)}"

    @property
    def port(self) -> int:
        return self._started(self._port)

    @property
    def controller_port(self) -> int:
        return self._started(self._controller_port)

    @property
    def cluster_id(self) -> str:
        return self._started(self._cluster_id)

    @property
    def pid(self) -> int:
        return self._started(self._proc).pid

    @property
    def workdir(self) -> Path:
        """The temporary directory of config, data and log; deleted by :meth:`stop`."""
        return self._started(self._workdir)

    @property
    def log_path(self) -> Path:
        """The broker's stdout and stderr (log4j2 at WARN, plus its start/stop lines)."""
        return self.workdir / "broker.log"

    @property
    def java_classpath(self) -> str:
        """The broker's class path (``<jars>/*``, Kafka 4.4.0): kafka.Kafka, StorageTool, kafka-clients."""
        return str(self.jars_dir / "*")

    @property
    def tools_classpath(self) -> str:
        """Kafka's CLI tools' class path (``<jars>/tools/*``, kafka-tools 4.3.1 with its own clients)."""
        return str(self.jars_dir / "tools" / "*")

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's log ("" if there is none)."""
        try:
            return _tail(self.log_path.read_text(errors="replace"), lines)
        except (FileNotFoundError, KafkaReferenceError):
            return ""

    def _started(self, value: _T | None) -> _T:
        if value is None:
            raise KafkaReferenceError("the Kafka broker is not started")
        return value

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> KafkaBroker:
        """Fetch the jars if needed, format a fresh KRaft log, start the broker and wait for it.

        Returns self once the broker answers metadata requests. Raises
        :class:`KafkaReferenceError` (after removing everything it created)
        if java, Maven or the jars are missing, formatting fails, or the
        broker exits or does not answer within ``startup_timeout_s``.
        """
        if self._proc is not None:
            raise KafkaReferenceError("this KafkaBroker was already started")
        self._java = _find_java(self._java_arg)
        ensure_kafka_jars(self.jars_dir)
        self._workdir = Path(tempfile.mkdtemp(prefix="lakelog-kafka-"))
        self._finalizer = weakref.finalize(self, _terminate, None, self._workdir, self.stop_timeout_s)
        try:
            (self._workdir / "log4j2.properties").write_text(_BROKER_LOG4J2)
            (self._workdir / "tools-log4j2.properties").write_text(_TOOLS_LOG4J2)
            for attempt in range(1, _START_ATTEMPTS + 1):
                if self._launch(last_attempt=attempt == _START_ATTEMPTS):
                    break
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, *, last_attempt: bool) -> bool:
        """One try at formatting and starting on fresh ports. False if a port was taken
        meanwhile (the caller tries again), True once the broker answers."""
        workdir = self.workdir
        data = workdir / "data"
        shutil.rmtree(data, ignore_errors=True)
        self._port, self._controller_port, *extra = free_ports(3 if self.sasl_ssl else 2)
        self._sasl_ssl_port = extra[0] if extra else None
        self._cluster_id = _cluster_id()
        properties = workdir / "server.properties"
        properties.write_text(self._server_properties(data))
        self._format(properties)

        log = open(self.log_path, "wb")  # noqa: SIM115 -- handed to the child, closed below
        try:
            self._proc = subprocess.Popen(
                [
                    self._started(self._java),
                    *self.jvm_options,
                    f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
                    "-cp",
                    self.java_classpath,
                    BROKER_MAIN,
                    str(properties),
                ],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a SIGKILL reaches everything it spawned
            )
        finally:
            log.close()
        assert self._finalizer is not None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _terminate, self._proc, workdir, self.stop_timeout_s)

        try:
            self._wait_until_ready()
        except _PortTaken:
            if last_attempt:
                raise
            # This attempt's data is thrown away: no clean shutdown needed.
            _terminate(self._proc, None, grace_s=0)
            self._proc = None
            return False
        return True

    def _server_properties(self, data: Path) -> str:
        listeners = f"PLAINTEXT://127.0.0.1:{self._port},CONTROLLER://127.0.0.1:{self._controller_port}"
        protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
        secure: dict[str, str] = {}
        if self.sasl_ssl is not None:
            port = self._started(self._sasl_ssl_port)
            listeners += f",SASL_SSL://127.0.0.1:{port}"
            protocols += ",SASL_SSL:SASL_SSL"
            secure = self.sasl_ssl.properties(port)
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(_BROKER_NODE_ID),
            # A dynamic (KIP-853) single-voter quorum, as `kafka-storage format --standalone` sets up:
            # the bootstrap servers replace controller.quorum.voters, which --standalone forbids.
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self._controller_port}",
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": protocols,
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(data),
            **secure,
            **self.config,
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _format(self, properties: Path) -> None:
        command = [
            self._started(self._java),
            f"-Dlog4j2.configurationFile={self.workdir / 'tools-log4j2.properties'}",
            "-cp",
            self.java_classpath,
            STORAGE_TOOL,
            "format",
            "--cluster-id",
            self.cluster_id,
            "--config",
            str(properties),
            "--standalone",
            *(self.sasl_ssl.format_arguments() if self.sasl_ssl is not None else []),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        except subprocess.TimeoutExpired as exc:
            raise KafkaReferenceError("kafka-storage format did not finish within 120s") from exc
        if done.returncode != 0:
            raise KafkaReferenceError(
                f"kafka-storage format failed (exit {done.returncode}):\n" + _tail(done.stdout + done.stderr)
            )

    def _wait_until_ready(self) -> None:
        try:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient
        except ImportError as exc:
            raise KafkaReferenceError(
                "confluent-kafka is needed to check the broker is up: pip install -e '.[dev]'"
            ) from exc
        proc = self._started(self._proc)
        deadline = time.monotonic() + self.startup_timeout_s
        admin = None
        while True:
            if _BIND_FAILED in self.log_tail(200):
                # Kafka takes seconds to give up after a failed bind; the log says so at once.
                raise _PortTaken(
                    f"the Kafka broker could not bind its ports {self.port}/{self.controller_port}; "
                    f"its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            if proc.poll() is not None:
                raise KafkaReferenceError(
                    f"the Kafka broker exited with code {proc.returncode} while starting; "
                    f"its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaReferenceError(
                    f"the Kafka broker did not answer on {self.bootstrap} within {self.startup_timeout_s:.0f}s; "
                    f"its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            if not _accepts(self.port):
                time.sleep(0.1)
                continue
            if admin is None:
                # librdkafka's own logging off: failures show up as the exception below.
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            try:
                # Short, so that a broker that died meanwhile is noticed within a second.
                metadata = admin.list_topics(timeout=min(1.0, max(remaining, 0.1)))
            except KafkaException:
                continue
            # A KRaft broker lists itself only once it is registered and unfenced.
            if _BROKER_NODE_ID in metadata.brokers:
                return
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, SIGKILL after ``stop_timeout_s``) and delete :attr:`workdir`.

        Returns once the process has exited and been reaped. Idempotent.
        """
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        _terminate(self._proc, self._workdir, self.stop_timeout_s)
        self._proc = None
        self._workdir = None
        self._port = self._controller_port = self._sasl_ssl_port = self._cluster_id = None

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- Kafka's tools --------------------------------------------------------------------

    def run_tool(
        self,
        main_class: str,
        *args: str,
        timeout_s: float = 300.0,
        check: bool = True,
        jvm_options: Sequence[str] = TOOL_JVM_OPTIONS,
        classpath: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """:func:`run_kafka_tool` with this started broker's java and jars, e.g.
        :data:`CONSUMER_GROUP_COMMAND` (``kafka-consumer-groups``); ``args`` are passed as they
        are: include ``"--bootstrap-server", broker.bootstrap`` where the tool wants it. Runs on
        :attr:`tools_classpath` unless ``classpath`` says otherwise (e.g. :attr:`java_classpath`
        for the broker's own classes)."""
        return run_kafka_tool(
            main_class,
            *args,
            timeout_s=timeout_s,
            check=check,
            jvm_options=jvm_options,
            classpath=classpath or self.tools_classpath,
            java=self._started(self._java),
            log4j_config=self.workdir / "tools-log4j2.properties",
        )


def run_kafka_tool(
    main_class: str,
    *args: str,
    timeout_s: float = 300.0,
    check: bool = True,
    jvm_options: Sequence[str] = TOOL_JVM_OPTIONS,
    classpath: str | None = None,
    java: str | None = None,
    jars_dir: Path | str = DEFAULT_JARS_DIR,
    log4j_config: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's Java tools without a broker of this module (against ``lakelog serve``,
    say: no idle broker beside the agent it measures). Fetches the jars if needed; runs on the
    tools' class path (``<jars_dir>/tools/*``) unless ``classpath`` says otherwise, with warnings on
    stderr as Kafka's scripts configure them (``log4j_config``, else that configuration in a
    temporary directory removed afterwards). Returns the finished process with text
    ``stdout``/``stderr``. With ``check`` (the default) a non-zero exit raises
    :class:`KafkaReferenceError` with the end of both streams; note that some tools
    (ConsumerGroupCommand among them) print an error and exit 0. Raises KafkaReferenceError
    also when java or the jars are missing, or the tool runs past ``timeout_s``."""
    java = _find_java(java)
    if classpath is None:
        classpath = str(ensure_kafka_jars(Path(jars_dir)) / "tools" / "*")
    with contextlib.ExitStack() as stack:
        if log4j_config is None:
            log4j_config = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lakelog-kafka-tool-")))
            log4j_config = log4j_config / "tools-log4j2.properties"
            log4j_config.write_text(_TOOLS_LOG4J2)
        log4j_option = f"-Dlog4j2.configurationFile={log4j_config}"
        command = [java, *jvm_options, log4j_option, "-cp", classpath, main_class, *args]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as exc:
            raise KafkaReferenceError(f"{main_class} did not finish within {timeout_s:.0f}s") from exc
    if check and done.returncode != 0:
        raise KafkaReferenceError(
            f"{main_class} {' '.join(args)} exited with {done.returncode}:\n" + _tail(done.stdout + "\n" + done.stderr)
        )
    return done


# The durable baseline's topic config: Kafka's flush.messages (the topic-level form of the
# broker's log.flush.interval.messages), an fsync of the partition's log after every append,
# so the broker acknowledges what is on disk as lakelog's commit does.
FLUSH_EVERY_MESSAGE = {"flush.messages": "1"}
# The broker sides of a benchmark: Kafka's defaults, and a topic with FLUSH_EVERY_MESSAGE.
KAFKA, KAFKA_FLUSH = "kafka", "kafka flush=1"


@contextlib.contextmanager
def broker_side(side: str, topic: str) -> Iterator[KafkaBroker]:
    """A new broker for one run of the broker side ``side`` (:data:`KAFKA`, or
    :data:`KAFKA_FLUSH`: ``topic`` with :data:`FLUSH_EVERY_MESSAGE`) holding ``topic`` (one
    partition); stopped on leaving. A benchmark's agent side is new for every run too, so
    both start as cold and warm up as long, and nothing idles beside either."""
    broker = KafkaBroker().start()
    try:
        create_topic(broker.bootstrap, topic, FLUSH_EVERY_MESSAGE if side == KAFKA_FLUSH else {})
        yield broker
    finally:
        broker.stop()


def create_topic(bootstrap: str, topic: str, config: Mapping[str, str] | None = None, partitions: int = 1) -> None:
    """Create ``topic`` on the broker at ``bootstrap`` with the topic ``config`` and wait until
    every partition has a leader. Raises :class:`KafkaReferenceError` when the broker does not
    hold ``config`` for it afterwards (a benchmark's durable baseline then measures nothing
    durable) or no leader appears within 60 s."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    config = dict(config or {})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)
    admin.create_topics([new])[topic].result()
    # CreateTopics answers before the broker's metadata cache holds the topic: on a loaded
    # machine the first ListOffsets then fails with NOT_LEADER_OR_FOLLOWER and DescribeConfigs
    # with UNKNOWN_TOPIC_OR_PARTITION, so the config is checked only once the leaders show.
    deadline = time.monotonic() + 60
    while True:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and all(p.leader >= 0 for p in found.partitions.values()):
            break
        if time.monotonic() > deadline:
            raise KafkaReferenceError(f"the broker's topic {topic} has no leader after 60 s")
        time.sleep(0.1)
    if config:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        held = {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result().items()}
        check_topic_config(topic, config, held)


def check_topic_config(topic: str, wanted: Mapping[str, str], held: Mapping[str, str | None]) -> None:
    """Raise :class:`KafkaReferenceError` naming each of ``wanted`` that the broker's
    DescribeConfigs answer ``held`` for ``topic`` does not hold as asked."""
    differ = {name: held.get(name) for name, value in wanted.items() if held.get(name) != value}
    if differ:
        raise KafkaReferenceError(f"the broker holds {differ} for topic {topic}, not {dict(wanted)}")
