"""The house's shape: imports point down and form no circle (import-linter's contracts in
pyproject.toml), and no module of lakelog reads another module's private names.

Both read the sources only (no JVM, nothing imported from lakelog). A lazy import inside a
function and a TYPE_CHECKING import count as imports: a circle is removed, not hidden."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lakelog"

# Private names of third-party objects lakelog has to reach (PySpark keeps its JVM handles and
# its context's lock private; there is no public way to them).
THIRD_PARTY_PRIVATES = frozenset({"_jvm", "_jdf", "_jsc", "_jsparkSession", "_gateway", "_sc", "_lock"})


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the package at ``root`` with the contracts of ``root``'s pyproject.toml."""
    command = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run(
        # --no-cache: nothing written into the checkout.
        [sys.executable, "-c", command, "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_imports_point_down_and_form_no_circle():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    assert "0 broken" in done.stdout, done.stdout[-5000:]


def _copy_package(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "lakelog").mkdir(parents=True)
    for source in PACKAGE.rglob("*.py"):
        target = root / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text())
    (root / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    return root


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # The engine importing the façade above it, lazily: the circle store <-> engine is back.
        ("lakelog/engine/produce/producer.py", "def _up() -> None:\n    from lakelog.store import Store\n", "packages"),
        # The seam importing a client of it.
        ("lakelog/engine/context.py", "import lakelog.engine.consume.consumer\n", "engine"),
        # Two modules of one package importing each other, the second only for type checking.
        (
            "lakelog/engine/commit/checksum.py",
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    from lakelog.engine.commit.state import TableState\n",
            "acyclic",
        ),
    ],
)
def test_an_import_up_or_around_breaks_a_contract(tmp_path, module, line, contract):
    root = _copy_package(tmp_path)
    path = root / module
    path.write_text(path.read_text() + "\n\n" + textwrap.dedent(line))
    done = lint_imports(root)
    assert done.returncode != 0, done.stdout[-3000:]
    names = {
        "packages": "lakelog's packages point down",
        "engine": "the engine's rooms point down",
        "acyclic": "no import circle",
    }
    broken = [line for line in done.stdout.splitlines() if "BROKEN" in line or names[contract] in line]
    assert any(names[contract] in line for line in broken), done.stdout[-3000:]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name != "_"


def private_definitions(files: dict[Path, ast.Module]) -> dict[str, set[Path]]:
    """Every private name bound in each module: functions, classes, assigned names and attributes."""
    defined: dict[str, set[Path]] = defaultdict(set)
    for path, tree in files.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names = [node.attr]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names = [node.id]
            else:
                continue
            for name in names:
                if _private(name):
                    defined[name].add(path)
    return defined


def cross_module_private_access(package: Path) -> list[str]:
    """``module:line: expression`` for each place a module of ``package`` imports another lakelog
    module's private name, or reads an attribute ``x._name`` where ``_name`` is defined only in
    other modules of ``package`` (``self._name`` and ``cls._name`` are the module's own)."""
    files = {path: ast.parse(path.read_text(), str(path)) for path in sorted(package.rglob("*.py"))}
    defined = private_definitions(files)
    found = []
    for path, tree in files.items():
        where = path.relative_to(package.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lakelog":
                found += [f"{where}:{node.lineno}: import {a.name}" for a in node.names if _private(a.name)]
            elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in THIRD_PARTY_PRIVATES:
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                homes = defined.get(node.attr, set())
                if homes and path not in homes:
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reads_another_modules_private_names():
    assert cross_module_private_access(PACKAGE) == []


def test_the_private_access_check_finds_a_reach_into_another_module(tmp_path):
    package = tmp_path / "lakelog"
    (package / "engine").mkdir(parents=True)
    (package / "engine" / "store.py").write_text(
        "class Store:\n    def _latest_topics(self):\n        return {}\n\n\ndef _helper():\n    return 1\n"
    )
    (package / "engine" / "client.py").write_text(
        "from lakelog.engine.store import _helper\n\n\n"
        "def topics(store, spark):\n"
        "    spark.sparkContext._jvm  # PySpark's, allowed\n"
        "    return store._latest_topics()\n"
    )
    assert cross_module_private_access(package) == [
        "lakelog/engine/client.py:1: import _helper",
        "lakelog/engine/client.py:6: store._latest_topics",
    ]


def imports_of_tests(folder: Path) -> list[str]:
    """Each import of the ``tests`` package (``import tests...``, ``from tests... import``) in the
    modules under ``folder``, as ``path:line: statement``: benchmarks/ is imported by lakelog perf
    and by tests, never the other way round."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(name == "tests" or name.startswith("tests.") for name in names):
                found.append(f"{path.relative_to(folder.parent)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_benchmarks_never_import_the_tests():
    assert imports_of_tests(ROOT / "benchmarks") == []


def test_the_benchmarks_check_finds_an_import_of_the_tests(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "run.py").write_text(
        "import testsuite\n\n\ndef run():\n    from tests.frameworks.harness import JavaProgram\n"
    )
    assert imports_of_tests(tmp_path / "benchmarks") == [
        "benchmarks/run.py:5: from tests.frameworks.harness import JavaProgram"
    ]
