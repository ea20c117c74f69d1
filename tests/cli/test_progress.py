"""Progress of long commands: a spinner naming the current step on a terminal, one ``... step`` line
per step elsewhere (what a script's log keeps); the results stay on stdout."""

from __future__ import annotations

import io
import sys

from lakelog.cli import main
from lakelog.cli.tables import steps


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_steps_print_one_line_each_when_stderr_is_not_a_terminal(capsys):
    with steps("first") as progress:
        progress("second")
    assert capsys.readouterr().err == "... first\n... second\n"


def test_steps_draw_a_spinner_on_a_terminal(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with steps("compacting orders") as progress:
        progress("vacuum: listing unreferenced files")
    drawn = terminal.getvalue()
    assert "compacting orders" in drawn and "vacuum: listing unreferenced files" in drawn
    assert "\x1b[2K" in drawn, "redrawn in place"
    assert "... " not in drawn


def test_maintain_reports_its_steps_on_stderr_and_its_report_on_stdout(tmp_path, capsys):
    store = str(tmp_path / "s")
    assert main(["--store", store, "topics", "create", "orders"]) == 0
    capsys.readouterr()
    assert main(["maintain", "--store", store]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(f"... maintaining {store}") and "... vacuum" in captured.err
    assert "maintenance done" in captured.out and "... " not in captured.out
