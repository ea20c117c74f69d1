"""The README's exit-code table is the code's: every error class exits with the code of the row that
names it (or names its nearest named base class), and the CLI's own help and docstring list the same
codes (no Spark)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import lakelog.cli
from lakelog.cli import build_parser
from lakelog.engine import errors
from lakelog.engine.errors import LakelogError, RecordTooLargeError
from lakelog.store import Store
from tests.cli.helpers import run

README = Path(__file__).resolve().parents[2] / "README.md"
CODE = re.compile(r"^\|\s*(\d+)\s*\|")


def readme_rows() -> dict[int, str]:
    """The exit-code table of README.md: code -> the rest of its row."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^\|\s*code\s*\|\s*meaning\s*\|", line))
    rows = {}
    for line in lines[start + 2 :]:
        found = CODE.match(line)
        if found is None:
            break
        rows[int(found.group(1))] = line[found.end() :]
    return rows


def error_classes() -> list[type[LakelogError]]:
    found, pending = [], list(LakelogError.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_error_class_exits_as_the_readme_table_says():
    rows = readme_rows()
    assert sorted(rows) == list(range(9))
    named: dict[type, int] = {}
    for code, row in rows.items():
        for name in re.findall(r"`(\w+)`", row):
            cls = getattr(errors, name, None)
            if isinstance(cls, type) and issubclass(cls, LakelogError):
                assert cls not in named, f"{name} is in two rows"
                named[cls] = code
    assert named, "the table names no error class"
    wrong = {}
    for cls in error_classes():
        nearest = next((c for c in cls.__mro__ if c in named), None)
        assert nearest is not None, f"{cls.__name__} (or a base class of it) is in no row of the table"
        if cls.exit_code != named[nearest]:
            wrong[cls.__name__] = (cls.exit_code, named[nearest])
    assert wrong == {}, "class: (exit code, the table's code)"


def test_the_cli_help_and_docstring_list_the_codes_of_the_readme_table():
    codes = sorted(readme_rows())
    epilog = build_parser().epilog
    assert sorted(int(c) for c in re.findall(r"(?:^|,)\s*(\d+) ", epilog.split(":", 1)[1])) == codes
    docstring = lakelog.cli.__doc__
    table = docstring[docstring.index("====") : docstring.rindex("====")]
    assert sorted(int(c) for c in re.findall(r"^(\d+)\s", table, re.MULTILINE)) == codes


@pytest.mark.parametrize("error", error_classes())
def test_the_cli_exits_with_each_errors_own_code(tmp_path, capsys, monkeypatch, error):
    def fail(*_args, **_kwargs):
        raise error("refused")

    Store.open(tmp_path / "s")
    monkeypatch.setattr(Store, "list_topics", fail)
    code, _, err = run(capsys, monkeypatch, "--store", str(tmp_path / "s"), "topics", "list")
    assert code == error.exit_code and err.splitlines()[0] == "error: refused"


def test_a_record_over_max_message_bytes_exits_2_and_commits_nothing(tmp_path, capsys, monkeypatch):
    store = str(tmp_path / "s")
    Store.open(store).create_topic("t", config={"max.message.bytes": "100"})
    code, _, err = run(capsys, monkeypatch, "--store", store, "produce", "t", stdin="x" * 200 + "\n")
    assert code == RecordTooLargeError.exit_code == 2
    assert "max.message.bytes" in err and "Traceback" not in err
    assert Store.open(store, create=False).end_offsets("t") == {0: 0}
