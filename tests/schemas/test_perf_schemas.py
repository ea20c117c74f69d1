"""``lakelog perf schemas`` reports each measure, and a kept-open connection answers lookups without
waiting on delayed ACKs (Nagle's algorithm once cost every request ~40 ms)."""

from __future__ import annotations

import statistics

import pytest

from tests.cli.helpers import run


def test_perf_schemas_reports_register_and_lookups(tmp_path, capsys, monkeypatch) -> None:
    argv = ["perf", "schemas", "--num-schemas", "12", "--subjects", "3", "--lookups", "40"]
    code, out, err = run(capsys, monkeypatch, *argv, "--work-dir", str(tmp_path))
    assert code == 0, err
    lines = out.strip().splitlines()[-4:]
    labels = [line.split(":")[0] for line in lines]
    assert labels == ["register", "by id", "latest by subject", "lookup by subject"]
    assert lines[0].startswith("register: 12 requests, p50 ")
    assert all(line.split(": ")[1].startswith("40 requests") for line in lines[1:])
    assert list(tmp_path.iterdir()) == []  # its store is gone


def test_lookups_on_a_kept_open_connection_take_no_delayed_ack() -> None:
    from benchmarks.schemas import perf_schemas

    results = perf_schemas(schemas=3, subjects=1, lookups=30, work_dir=None, out=lambda line: None)
    # With Nagle's algorithm on, each answer waited ~40 ms for the client's delayed ACK.
    assert statistics.median(results["by id"]) < 20, results["by id"]


@pytest.mark.spark
def test_perf_schemas_materialize_reports_both_sides_and_their_ratio(spark, tmp_path, capsys, monkeypatch) -> None:
    argv = ["perf", "schemas", "--materialize", "--num-records", "300", "--rounds", "1", "--work-dir", str(tmp_path)]
    code, out, err = run(capsys, monkeypatch, *argv)
    assert code == 0, err
    lines = out.strip().splitlines()[-3:]
    assert lines[0].startswith("typed table (lakelog tables run): ") and lines[0].endswith("records/s (median of 1)")
    assert lines[1].startswith("same job, from_avro by hand: ")
    assert float(lines[2].removeprefix("ratio typed / by hand: ")) > 0
    assert list(tmp_path.iterdir()) == []  # its store and tables are gone
