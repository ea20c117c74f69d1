"""Kafka's own frameworks (Streams, Connect, the Java consumer) as programs the framework tests
(tests/kafka_endpoint/frameworks) and the perf verbs (``lakelog perf rebalance``, ``perf streams``)
drive. It lives in benchmarks/ because both use it: benchmarks never import from tests/.

The jars come from Maven Central (``java/pom.xml``: Streams and kafka-clients 4.4.0, Connect
and the connectors Kafka ships 4.3.1) into ``~/.cache/lakelog/jars/kafka-frameworks`` (Maven's
repository in ``~/.cache/lakelog/maven``, never ``~/.m2``); the small programs in ``java/src``
are compiled with javac next to them, once per version of the pom and the sources.

A :class:`JavaProgram` runs one of them in a process of its own: its settings as
``key=value`` arguments, its events (``STATE``, ``ASSIGNED``, ``R``, ``FATAL``...) read from
stdout as they come, its log (log4j2, client loggers at the level asked) in a file whose tail
goes into every failure message. :meth:`JavaProgram.wait_for` returns as soon as the event
came and fails as soon as the program exited, so a framework that dies at its first request
fails its test in seconds, not at a timeout.

With ``KAFKA_FRAMEWORKS_DEBUG=1`` in the environment every program also logs each request
its clients send and each response they get (``org.apache.kafka.clients.NetworkClient`` at
DEBUG: "Sending <API> request with header RequestHeader(apiKey=..., apiVersion=...)"), which is
how to find what a framework asks of the agent: run the tests with ``--basetemp`` (and
``--runxfail``) and read the programs' logs there.

The Connect workers' settings and REST calls are the tests' own
(tests/kafka_endpoint/frameworks/harness.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.kafka_reference import MAVEN_REPOSITORY
from lakelog.jvm.jars import cache_root

JAVA_DIR = Path(__file__).with_name("java")
# The jars' cache is keyed by the pom's bytes and shared by every checkout on the machine: a
# checkout whose pom differs (even in a comment) evicts the jars of the others as they run.
POM = JAVA_DIR / "pom.xml"
SOURCES = JAVA_DIR / "src"
JARS_DIR = cache_root() / "kafka-frameworks"

# The pom's profiles: each is a class path of its own (see java/pom.xml for why two).
STREAMS, CONNECT = "streams", "connect"
PROFILES = (STREAMS, CONNECT)


@dataclass(frozen=True)
class Program:
    """A main class and the profile whose class path it runs on."""

    main: str
    profile: str


WORD_COUNT = Program("lakelog.frameworks.WordCount", STREAMS)
GROUP_CONSUMER = Program("lakelog.frameworks.GroupConsumer", STREAMS)
CONNECT_WORKERS = Program("lakelog.frameworks.ConnectWorkers", CONNECT)

# The tests' JVMs are small and many at once on two cores: a small heap, and no JIT tiers beyond
# C1 for programs that live seconds (a benchmark passes its own, see JavaProgram).
JVM_OPTIONS: tuple[str, ...] = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
LOG_TAIL_LINES = 60
# Not LAKELOG_*: lakelog reads every LAKELOG_* variable as one of its settings.
DEBUG_ENV = "KAFKA_FRAMEWORKS_DEBUG"


class HarnessError(AssertionError):
    """A framework program could not be fetched, compiled or run, or did not do what was awaited.

    An AssertionError, so that pytest reports it as the test's failure with the message, which
    ends with the tail of the program's log.
    """


def _digest(*paths: Path) -> str:
    sha = hashlib.sha256()
    for path in paths:
        for file in sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()):
            sha.update(str(file.relative_to(JAVA_DIR)).encode() + b"\0" + file.read_bytes())
    return sha.hexdigest()


@contextlib.contextmanager
def _locked(name: str):
    JARS_DIR.parent.mkdir(parents=True, exist_ok=True)
    with open(JARS_DIR.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(command: Sequence[str], what: str, timeout_s: float) -> None:
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"{what} did not finish within {timeout_s:.0f}s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-40:])
        raise HarnessError(f"{what} failed (exit {done.returncode}): {' '.join(command)}\n{tail}")


def ensure_jars(timeout_s: float = 1800.0) -> Path:
    """The directory of the frameworks' jars (Streams' class path; Connect's in ``connect/``),
    fetched with Maven the first time and again when ``java/pom.xml`` changed; the marker is
    written only after both copies succeeded, and concurrent callers wait on a lock file."""
    marker = JARS_DIR / ".complete"
    digest = _digest(POM)
    if marker.is_file() and marker.read_text().strip() == digest:
        return JARS_DIR
    mvn = shutil.which("mvn")
    if mvn is None:
        raise HarnessError(f"the frameworks' jars are not in {JARS_DIR} and Maven (mvn) is not on PATH")
    with _locked(JARS_DIR.name):
        if not (marker.is_file() and marker.read_text().strip() == digest):
            shutil.rmtree(JARS_DIR, ignore_errors=True)
            for profile in PROFILES:
                _run(
                    [
                        mvn,
                        "-B",
                        "-q",
                        "-Dstyle.color=never",
                        f"-Dmaven.repo.local={MAVEN_REPOSITORY}",
                        "-f",
                        str(POM),
                        "-P",
                        profile,
                        "dependency:copy-dependencies",
                        f"-DoutputDirectory={_jars_of(profile)}",
                    ],
                    f"Maven (fetching Kafka's frameworks, profile {profile})",
                    timeout_s,
                )
            marker.write_text(digest + "\n")
    return JARS_DIR


def _jars_of(profile: str) -> Path:
    return JARS_DIR if profile == STREAMS else JARS_DIR / profile


def classpath(profile: str) -> str:
    """A profile's jars and its programs (``src/common`` and ``src/<profile>``, compiled with
    javac once per version of the pom and the sources into a directory named by that version,
    so that programs still running from an older one are never pulled from under)."""
    ensure_jars()
    jars = _jars_of(profile)
    classes = JARS_DIR / "classes" / f"{profile}-{_digest(POM, SOURCES)[:16]}"
    if not (classes / ".complete").is_file():
        with _locked("kafka-frameworks-classes"):
            if not (classes / ".complete").is_file():
                javac = shutil.which("javac")
                if javac is None:
                    raise HarnessError("javac (a JDK 17+) is needed to compile the framework programs")
                classes.parent.mkdir(parents=True, exist_ok=True)
                building = Path(tempfile.mkdtemp(prefix=f".{profile}-", dir=classes.parent))
                sources = sorted(str(p) for d in ("common", profile) for p in (SOURCES / d).rglob("*.java"))
                try:
                    _run([javac, "-d", str(building), "-cp", f"{jars}/*", *sources], f"javac ({profile})", 300)
                except BaseException:
                    shutil.rmtree(building, ignore_errors=True)
                    raise
                (building / ".complete").touch()
                building.rename(classes)
    return f"{classes}:{jars}/*"


def log4j2_config(log_file: Path, levels: Mapping[str, str]) -> str:
    """A log4j2 properties config writing everything at WARN (and ``levels``, logger -> level)
    to ``log_file``."""
    lines = [
        "status = warn",
        "shutdownHook = disable",
        "appender.file.type = File",
        "appender.file.name = file",
        f"appender.file.fileName = {log_file}",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p [%t] %m (%c)%n",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.file.ref = file",
    ]
    for i, (name, level) in enumerate(sorted(levels.items())):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {level}"]
    return "\n".join(lines) + "\n"


# Frames of a thread that is idle by design: a pool or a REST server waiting for work, a client's
# network loop waiting for its sockets.
_IDLE_THREADS = (
    "sun.nio.ch.EPoll.wait",
    "ThreadPoolExecutor.getTask",
    "ScheduledThreadPoolExecutor$DelayedWorkQueue.take",
    "org.eclipse.jetty.util.thread.QueuedThreadPool",
    "org.eclipse.jetty.io.ManagedSelector",
)


class JavaProgram:
    """One of the framework programs, running (see the module docstring).

    ``settings`` become ``key=value`` arguments (``args`` are passed before them as they are);
    ``workdir`` holds its log (``<name>.log``) and log4j2 config; ``log_levels`` maps loggers to
    levels (e.g. ``{"org.apache.kafka.clients": "DEBUG"}`` for the clients' requests);
    ``jvm_options`` replace :data:`JVM_OPTIONS`. ``started`` is the monotonic time just before
    its JVM was launched.
    """

    def __init__(
        self,
        program: Program,
        workdir: Path,
        name: str,
        settings: Mapping[str, str] = {},
        args: Sequence[str] = (),
        log_levels: Mapping[str, str] = {},
        jvm_options: Sequence[str] = JVM_OPTIONS,
    ) -> None:
        self.name = name
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}.log"
        config = workdir / f"{name}-log4j2.properties"
        if os.environ.get(DEBUG_ENV) == "1":
            log_levels = {**log_levels, "org.apache.kafka.clients.NetworkClient": "DEBUG"}
        config.write_text(log4j2_config(self.log_path, log_levels))
        self.lines: list[str] = []
        self.killed = False
        self._changed = threading.Condition()
        command = [
            shutil.which("java") or "java",
            *jvm_options,
            f"-Dlog4j2.configurationFile={config}",
            "-cp",
            classpath(program.profile),
            program.main,
            *args,
            *(f"{k}={v}" for k, v in settings.items()),
        ]
        self._stderr = open(workdir / f"{name}.stderr", "wb")  # noqa: SIM115 -- the child's, closed in stop()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            start_new_session=True,  # a SIGKILL of the group reaches the whole JVM
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def events(self, kind: str) -> list[list[str]]:
        """The words after ``kind`` of every event line of that kind, in order."""
        with self._changed:
            return [line.split()[1:] for line in self.lines if line.split()[:1] == [kind]]

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        texts = []
        for path in (self.log_path, self.log_path.with_suffix(".stderr")):
            with contextlib.suppress(OSError):
                texts.append(path.read_text(errors="replace"))
        return "\n".join("\n".join(texts).strip().splitlines()[-lines:])

    def fail(self, what: str) -> HarnessError:
        fatal = [" ".join(e) for e in self.events("FATAL") + self.events("FAILED")]
        return HarnessError(
            f"{self.name}: {what}; exit code {self.proc.poll()}; fatal events {fatal}\n"
            f"last events: {self.lines[-5:]}\nits log ({self.log_path}) ends:\n{self.log_tail()}"
            f"{self.busy_threads()}"
        )

    def busy_threads(self, frames: int = 14) -> str:
        """Where a still running program's own threads are (a wait that never ends is silent in
        its log: a Connect source task's producer retries forever): the JVM's whole thread dump
        goes to ``<name>.threads`` beside its log, and the top ``frames`` of every thread but the
        JVM's own and idle pool threads are returned. Empty when it has exited or ``jcmd`` fails."""
        if self.proc.poll() is not None:
            return ""
        jcmd = Path(shutil.which("java") or "java").resolve().with_name("jcmd")
        try:
            dump = subprocess.run(
                [str(jcmd), str(self.proc.pid), "Thread.print"], capture_output=True, text=True, timeout=30
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
        with contextlib.suppress(OSError):
            self.log_path.with_suffix(".threads").write_text(dump)
        kept = []
        for block in dump.split("\n\n"):
            head, _, body = block.strip().partition("\n")
            if not head.startswith('"') or "java.lang.Thread.State" not in body:
                continue
            lines = body.splitlines()
            idle = any(frame in body for frame in _IDLE_THREADS) or not any("org.apache" in x for x in lines)
            if idle and "task-thread" not in head:  # a Connect task's own thread is always shown
                continue
            kept.append("\n".join([head, *lines[: frames + 1]]))
        return f"\nits threads ({self.log_path.with_suffix('.threads')}):\n" + "\n".join(kept) if kept else ""

    def wait_for(self, condition: Callable[[JavaProgram], bool], timeout_s: float, what: str) -> None:
        """Return once ``condition(self)`` holds; raise :class:`HarnessError` when the program
        reported FATAL/FAILED or exited first, or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not condition(self):
                if self.events("FATAL") or self.events("FAILED"):
                    raise self.fail(f"failed while waiting for {what}")
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise self.fail(f"exited while waiting for {what}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.fail(f"no {what} within {timeout_s:.0f}s")
                self._changed.wait(min(remaining, 0.5))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self, timeout_s: float = 45.0) -> int:
        """Close its stdin (the program stops cleanly), SIGKILL it after ``timeout_s``; its exit code."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(5)
        self._stderr.close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the program's whole process group and reap it."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(5)
        self._stderr.close()


@contextlib.contextmanager
def stopped_after(programs: list[JavaProgram]) -> Iterator[list[JavaProgram]]:
    """The programs the block starts (it appends them to ``programs``): after a failure each is
    SIGKILLed at once (the failure is what matters, not a clean stop); after success each is
    stopped and must exit 0 (unless the block SIGKILLed it on purpose)."""
    try:
        yield programs
    except BaseException:
        for program in programs:
            program.kill()
        raise
    codes = [program.stop() for program in programs]
    for program, code in zip(programs, codes, strict=True):
        if code != 0 and not program.killed:
            raise program.fail("did not stop cleanly")


def owned_partitions(member: JavaProgram) -> set[str]:
    """The partitions (``topic-partition``) a GroupConsumer owns now, from its rebalance callbacks
    in order (eager members are told their whole assignment, cooperative ones what is added or
    taken away)."""
    owned: set[str] = set()
    for line in list(member.lines):
        kind, _, rest = line.partition(" ")
        partitions = set() if rest in ("", "-") else set(rest.split(","))
        if kind == "ASSIGNED":
            owned |= partitions
        elif kind in ("REVOKED", "LOST"):
            owned -= partitions
    return owned
