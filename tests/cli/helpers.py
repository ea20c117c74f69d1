"""Running the ``lakelog`` command in-process or as a process, against a temporary local store."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from lakelog.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, monkeypatch, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    """main's exit code, stdout, stderr; argparse's usage errors (SystemExit) count as exit codes."""
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def command(*argv: str, stdin: str = "", timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The real command in a process of its own (``python -m lakelog.cli``), run in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "lakelog.cli", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
