"""``lakelog perf startup``: how long a short-lived client takes, from starting ``python`` to its
result, beside confluent-kafka's.

Each row is a fresh process (what a script or a shell command pays), timed from before the
process starts to its last line of output, ``--rounds`` interleaved rounds, medians:

* ``python``: the interpreter alone (the floor under every row);
* ``import lakelog`` and ``import lakelog`` + ``Store`` (the client API's modules);
* ``first ack``: ``python -c`` to the first acknowledged record on a local store that has the
  topic (what ``perf commit --sections first-ack`` measures);
* ``topics --create``, ``produce`` (``--lines`` lines from stdin) and ``consume --max-messages 3``
  (from the beginning of that topic), each as the ``lakelog`` console command runs them;
* ``confluent-kafka``: ``import confluent_kafka`` and a Producer's first ``produce()`` (queued:
  there is no broker), and with ``--kafka`` its first acknowledged record from a real Apache Kafka
  broker (:class:`benchmarks.kafka_reference.KafkaBroker`, started once, not timed).

Each lakelog row also names the heavy packages its process imported (none of pandas, pyspark,
py4j or confluent_kafka belongs on these paths).

The processes run with compiled bytecode cached, as an installed lakelog runs (pip writes the
``.pyc`` files at install; an editable install's first import writes them): the cache is a
directory of the run's own (``PYTHONPYCACHEPREFIX``), filled by one untimed round, so that an
environment with ``PYTHONDONTWRITEBYTECODE`` set and no cache in the checkout does not add the
compilation of every lakelog module to every row (~0.1-0.15 s). ``bytecode_cache=False``
(``--no-bytecode-cache``) runs them in the caller's environment as it is, untouched.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Packages none of these paths should import; a row lists the ones its process did.
HEAVY = ("pandas", "pyspark", "py4j", "confluent_kafka")

# Each script prints the heavy packages it imported as its last line.
_REPORT = "\nprint('imported:', ','.join(m for m in {heavy!r} if m in sys.modules) or '-')\n"

_IMPORT = "import sys\nimport lakelog\n"
_IMPORT_STORE = "import sys\nimport lakelog\nlakelog.Store\n"
_FIRST_ACK = """
import sys
from lakelog import Store
with Store.open(sys.argv[1]).producer(linger_ms=0) as producer:
    producer.send("t", b"first").get()
"""
# What the ``lakelog`` console script runs (its entry point is lakelog.cli:main).
_CLI = """
import sys
from lakelog.cli import main
code = main(sys.argv[1:])
if code:
    sys.exit(code)
"""
_CONFLUENT_QUEUED = """
import sys
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 1000})
producer.produce("t", b"first")
"""
_CONFLUENT_ACK = """
import sys
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 0})
acked = []
producer.produce("t", b"first", on_delivery=lambda err, msg: acked.append(err))
producer.flush(30)
assert acked == [None], acked
"""


@dataclass(frozen=True)
class Row:
    """One timed path: its label, script, arguments (``{store}``, ``{topic}`` and ``{bootstrap}``
    filled per round), stdin file, and the target the issue set for it (seconds, or None)."""

    label: str
    script: str
    args: tuple[str, ...] = ()
    stdin: str | None = None
    target_s: float | None = None
    report: bool = True


def rows(lines_file: str, kafka: bool) -> list[Row]:
    """The rows ``perf startup`` times, in order."""
    found = [
        Row("python (interpreter only)", "pass", report=False),
        Row("import lakelog", _IMPORT),
        Row("import lakelog; lakelog.Store", _IMPORT_STORE),
        Row("python -c -> first acknowledged record", _FIRST_ACK, ("{store}",), target_s=0.5),
        Row(
            "lakelog topics --create",
            _CLI,
            ("--store", "{store}", "topics", "--create", "--topic", "{topic}", "--partitions", "1"),
            target_s=0.8,
        ),
        Row("lakelog produce < lines", _CLI, ("--store", "{store}", "produce", "--topic", "t"), lines_file, 0.8),
        Row(
            "lakelog consume --max-messages 3",
            _CLI,
            ("--store", "{store}", "consume", "--topic", "t", "--from-beginning", "--max-messages", "3"),
            target_s=0.8,
        ),
        Row("confluent-kafka import + first produce (queued)", _CONFLUENT_QUEUED, report=False),
    ]
    if kafka:
        found.append(Row("confluent-kafka -> broker first ack", _CONFLUENT_ACK, ("{bootstrap}",), report=False))
    return found


def _run(row: Row, fill: dict[str, str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds from starting the row's process to its exit, and the heavy packages it imported."""
    script = row.script + (_REPORT.format(heavy=HEAVY) if row.report else "")
    args = [a.format(**fill) for a in row.args]
    stdin = open(row.stdin, "rb") if row.stdin else subprocess.DEVNULL  # noqa: SIM115 -- closed below
    try:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", script, *args],
            cwd=ROOT,
            env=env,
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
        elapsed = time.perf_counter() - started
    finally:
        if row.stdin:
            stdin.close()  # type: ignore[union-attr]
    if done.returncode != 0:
        raise RuntimeError(f"{row.label} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    reported = [line for line in done.stdout.splitlines() if line.startswith("imported: ")]
    return elapsed, reported[-1].removeprefix("imported: ") if reported else ""


def child_environment(work: str, bytecode_cache: bool) -> dict[str, str]:
    """The rows' environment: this checkout importable, and with ``bytecode_cache`` compiled
    modules written to and read from ``work``/pycache (never into the checkout or the venv)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = f"{work}/pycache"
    return env


def perf_startup(
    *,
    rounds: int,
    lines: int,
    kafka: bool,
    work_dir: str | None,
    out: Callable[[str], None],
    bytecode_cache: bool = True,
) -> dict[str, float]:
    """Time every row ``rounds`` times, rows interleaved within each round (after one untimed
    round that fills the bytecode cache, with ``bytecode_cache``); print a line per row (median,
    min, target, heavy imports) and return the medians by label."""
    from lakelog.store import Store

    work = tempfile.mkdtemp(prefix="lakelog-perf-startup-", dir=work_dir)
    broker = None
    try:
        lines_file = f"{work}/lines.txt"
        Path(lines_file).write_text("".join(f"line-{i}\n" for i in range(lines)))
        store = f"{work}/store"
        Store.open(store).create_topic("t", partitions=1)
        fill = {"store": store, "bootstrap": ""}
        if kafka:
            from benchmarks.kafka_reference import KafkaBroker, create_topic

            broker = KafkaBroker().start()
            fill["bootstrap"] = broker.bootstrap
            # The reference broker does not auto-create topics (neither does lakelog's Produce).
            create_topic(broker.bootstrap, "t")
        timed = rows(lines_file, kafka)
        env = child_environment(work, bytecode_cache)
        if bytecode_cache:
            for row in timed:
                _run(row, {**fill, "topic": "warm-up"}, env)
        times: dict[str, list[float]] = {row.label: [] for row in timed}
        heavy: dict[str, set[str]] = {row.label: set() for row in timed}
        for round_ in range(rounds):
            for row in timed:
                elapsed, imported = _run(row, {**fill, "topic": f"created-{round_}"}, env)
                times[row.label].append(elapsed)
                heavy[row.label].update(m for m in imported.split(",") if m and m != "-")
        load = os.getloadavg()[0]
        bytecode = "bytecode cached" if bytecode_cache else "bytecode as the environment has it"
        out(
            f"startup: {rounds} interleaved rounds, medians (load average {load:.1f}, {os.cpu_count()} CPUs, "
            f"{bytecode})"
        )
        width = max(len(label) for label in times)
        for row in timed:
            median = statistics.median(times[row.label])
            target = "" if row.target_s is None else f"  target <= {row.target_s:.1f} s"
            imported = ""
            if row.report:
                imported = "  imports " + (", ".join(sorted(heavy[row.label])) or "none of " + "/".join(HEAVY))
            out(f"  {row.label:<{width}}  {median:6.3f} s  (min {min(times[row.label]):.3f}){target}{imported}")
        return {label: statistics.median(values) for label, values in times.items()}
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
