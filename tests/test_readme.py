"""Every ```python block of README.md runs as written, so the README's examples cannot rot.

The rule: each block is a whole program. It runs in a fresh namespace (its own imports, its own
``Store.open("my-store")``, the topics and records it needs) with a new, empty working directory,
so the relative store path ``my-store`` lands in that directory and nothing outside it is touched.
No block uses a name, a store or a topic another block made; the order they run in does not matter.

How they run, each with this venv's Python (``sys.executable``) in a subprocess:

* Blocks that use Spark (recognised by the names in ``SPARK_HINTS``; a block recognised wrongly
  still runs, only in the other kind of subprocess) run one after another in ONE subprocess, so they
  share the SparkSession the first of them starts (Spark takes 5-15 s to start). Each still gets a
  fresh namespace and its own new working directory (``os.chdir`` before it). The JVM, and the Python
  workers it forks, keep the subprocess's starting directory, an empty one no block writes to: a
  relative path handed to Spark would not find the block's files here, so blocks give Spark
  ``store.uri`` (absolute), as they must in any process that changes directory.
* Every other block runs in a subprocess of its own, a fresh interpreter.
* A block addressed to a Kafka client at ``127.0.0.1:9092`` gets what the README puts before it:
  ``lakelog serve`` over a store ``my-store`` in the block's directory (created empty), here on a
  free port, whose address replaces ``127.0.0.1:9092`` in the block's text; one that also names
  the Schema Registry at ``http://127.0.0.1:8081`` gets it served too (``--schema-registry-listen``).
* A block must not leave a streaming query running when it ends: as a script it would exit at once
  and stop the query with it. A streaming example bounds its run as a user would
  (``trigger(availableNow=True)``, ``awaitTermination(timeout)``, ``stop()``).
* A block is left out only when the line before its fence is ``<!-- readme-test: skip (REASON) -->``
  with a reason. Every ```python fence is found; a fence such as ```py or ```python3 fails the test
  rather than being passed over, so no block goes neither run nor marked.

Bash blocks (``lakelog`` commands) are not run here. The module takes about 1.5-2 minutes, nearly all
of it the Spark subprocess (Spark's start, the quickstart's first DataFrame, the streaming copy).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"

# Names whose presence means a block starts Spark (DataFrames, streaming, time travel, value_at).
SPARK_HINTS = ("spark", ".read(", ".history(", ".value_at(", ".write(", ".show(")
KAFKA_BOOTSTRAP = "127.0.0.1:9092"
SCHEMA_REGISTRY = "http://127.0.0.1:8081"
SKIP_MARKER = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<reason>[^)]*\S[^)]*)\)\s*-->")
ANY_MARKER = re.compile(r"<!--\s*readme-test:")
FENCE = re.compile(r"^```(?P<info>[^\s`]*)")  # the info string's first word: ```python title -> python

# Per block: a few seconds of work; the Spark subprocess also starts Spark once.
BLOCK_TIMEOUT_S = 120
SPARK_TIMEOUT_S = 600  # a loaded CI machine: Spark alone has taken a minute to start

# Runs the blocks named in a JSON file given as argv[1] ([{"name", "code", "cwd"}, ...]), one after
# another, each in a fresh namespace with its own working directory; reports each on stdout.
RUNNER = r"""
import json, os, sys, time, traceback

failed = 0
for block in json.load(open(sys.argv[1])):
    os.chdir(block["cwd"])
    print(f"=== {block['name']}: start", flush=True)
    started = time.monotonic()
    try:
        exec(compile(block["code"], block["name"], "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        if "pyspark.sql" in sys.modules:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
            running = [] if spark is None else spark.streams.active
            for query in running:
                query.stop()
            if running:
                raise AssertionError(
                    f"the block left {len(running)} streaming query running: run as a script it would exit at "
                    "once and stop it (bound it: trigger(availableNow=True), awaitTermination(timeout), stop())"
                )
    except BaseException:
        failed += 1
        print(f"=== {block['name']}: FAILED", flush=True)
        traceback.print_exc(file=sys.stdout)
    else:
        print(f"=== {block['name']}: ok in {time.monotonic() - started:.1f} s", flush=True)
    sys.stdout.flush()
sys.stderr.flush()
# Every block has run and reported: leave without interpreter finalization, where polars', pyarrow's
# and delta-rs' native thread pools sometimes abort the process in their destructors ("terminate
# called without an active exception": pola-rs/polars#24169, apache/arrow#34314) after all went well.
os._exit(1 if failed else 0)
"""


@dataclass(frozen=True)
class Block:
    line: int  # line of the opening fence in README.md
    code: str
    skip_reason: str | None

    @property
    def name(self) -> str:
        return f"README.md:{self.line}"

    @property
    def uses_spark(self) -> bool:
        return any(hint in self.code for hint in SPARK_HINTS)

    @property
    def needs_agent(self) -> bool:
        return KAFKA_BOOTSTRAP in self.code


def fenced_blocks(text: str) -> list[tuple[int, str, str, str]]:
    """Every fenced block of ``text``: (line of its opening fence, info string, body, the last
    non-blank line before the fence)."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"README.md:{i + 1}: a fence that is never closed"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        found.append((i + 1, opening.group("info"), "\n".join(lines[i + 1 : end]) + "\n", before))
        i = end + 1
    return found


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of ``text``; AssertionError on a Python-looking fence of another spelling
    and on a readme-test marker that is not a skip with a reason."""
    blocks = []
    for line, info, body, before in fenced_blocks(text):
        if info != "python" and (info.lower().startswith(("py", "ipython")) or info.lower() == "python"):
            raise AssertionError(f"README.md:{line}: fence ```{info}: write ```python so the README test runs it")
        if info != "python":
            continue
        skip = SKIP_MARKER.search(before)
        if skip is None and ANY_MARKER.search(before):
            raise AssertionError(f"README.md:{line}: a readme-test marker reads <!-- readme-test: skip (REASON) -->")
        blocks.append(Block(line, body, skip.group("reason").strip() if skip else None))
    return blocks


BLOCKS = python_blocks(README.read_text())
PLAIN = [b for b in BLOCKS if b.skip_reason is None and not b.uses_spark]
SPARK = [b for b in BLOCKS if b.skip_reason is None and b.uses_spark]


def clean_env() -> dict[str, str]:
    """This environment without settings that would point a block elsewhere (other tests' S3 server,
    lakelog settings of the machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LAKELOG_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_blocks(blocks: list[tuple[str, str, Path]], cwd: Path, timeout: float) -> tuple[int, str, float]:
    """Run ``(name, code, working directory)`` blocks in one subprocess started in ``cwd``;
    (exit code, stdout and stderr, seconds)."""
    spec = cwd / "blocks.json"
    spec.write_text(json.dumps([{"name": n, "code": c, "cwd": str(d)} for n, c, d in blocks]))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(spec)],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    spec.unlink()
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def test_every_python_block_is_found_and_run_or_marked() -> None:
    text = README.read_text()
    # Also counts fences the parser would not see (indented ones): each must be one of BLOCKS.
    assert len(BLOCKS) == len(re.findall(r"^\s*```\s*python", text, flags=re.MULTILINE | re.IGNORECASE)) >= 5
    assert {b.line for b in PLAIN} | {b.line for b in SPARK} | {b.line for b in BLOCKS if b.skip_reason} == {
        b.line for b in BLOCKS
    }
    for block in BLOCKS:
        assert "/tmp/" not in block.code, f"{block.name}: use a relative path (my-store), not /tmp/"


def test_misspelled_fences_and_markers_are_refused() -> None:
    with pytest.raises(AssertionError, match="```py:"):
        python_blocks("text\n\n```py\nprint(1)\n```\n")
    with pytest.raises(AssertionError, match="marker"):
        python_blocks("<!-- readme-test: skip -->\n```python\nprint(1)\n```\n")
    (block,) = python_blocks("<!-- readme-test: skip (needs a GPU) -->\n\n```python\nprint(1)\n```\n")
    assert block.skip_reason == "needs a GPU" and block.line == 3
    (block,) = python_blocks("```python\nstore.read('t').show()\n```\n```bash\nlakelog --help\n```\n")
    assert block.skip_reason is None and block.uses_spark and block.code == "store.read('t').show()\n"


@pytest.mark.parametrize("block", PLAIN, ids=[b.name for b in PLAIN])
def test_block_runs_alone(block: Block, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    code, agent = block.code, None
    if block.needs_agent:
        from lakelog import Store
        from tests.kafka_endpoint.conftest import Agent

        Store.open(workdir / "my-store")
        if SCHEMA_REGISTRY in code:
            from tests.schemas.conftest import RegistryAgent

            agent = RegistryAgent(workdir / "my-store", tmp_path / "agent.log")
            code = code.replace(SCHEMA_REGISTRY, agent.url)
        else:
            agent = Agent(workdir / "my-store")
        code = code.replace(KAFKA_BOOTSTRAP, agent.bootstrap)
    try:
        returncode, output, _ = run_blocks([(block.name, code, workdir)], workdir, BLOCK_TIMEOUT_S)
    finally:
        if agent is not None:
            agent.stop()
    print(output)
    assert returncode == 0, f"{block.name} failed:\n{output}"


@pytest.mark.spark
@pytest.mark.slow
def test_spark_blocks_run_in_one_session(tmp_path: Path) -> None:
    assert SPARK, "no README block uses Spark: check SPARK_HINTS"
    jvm_dir = tmp_path / "jvm"  # the JVM's working directory: no block's
    jvm_dir.mkdir()
    blocks = []
    for block in SPARK:
        workdir = tmp_path / f"line-{block.line}"
        workdir.mkdir()
        blocks.append((block.name, block.code, workdir))
    returncode, output, seconds = run_blocks(blocks, jvm_dir, SPARK_TIMEOUT_S)
    print(f"{len(blocks)} Spark blocks in {seconds:.1f} s\n{output}")
    assert returncode == 0, f"a README block failed:\n{output}"
    assert output.count(": ok in ") == len(blocks), output
