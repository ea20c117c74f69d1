"""No command creates anything in the working directory it runs in: each runs here as a real process
in a new, empty directory, with the store elsewhere, and the directory is still empty afterwards."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import ROOT, command


@pytest.fixture
def empty(tmp_path) -> Path:
    directory = tmp_path / "cwd"
    directory.mkdir()
    return directory


def test_quickstart_and_serve_create_nothing_in_the_working_directory(tmp_path, empty):
    store = str(tmp_path / "store")
    done = command("--store", store, "quickstart", cwd=empty, timeout=300)
    assert done.returncode == 0, done.stderr
    serve = subprocess.Popen(
        [sys.executable, "-m", "lakelog.cli", "--store", store, "serve", "--listen", "127.0.0.1:0"],
        cwd=empty,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = serve.stdout.readline()
        assert re.search(r"on 127\.0\.0\.1:\d+ ", line), line + serve.stderr.read()
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0
    assert list(empty.iterdir()) == []


@pytest.mark.spark
def test_a_spark_verb_keeps_sparks_warehouse_in_the_stores_scratch_area(tmp_path, empty):
    store = tmp_path / "store"
    argv = ("--store", str(store), "perf", "produce", "--api", "dataframe", "--num-records", "100")
    done = command(*argv, cwd=empty, timeout=600)
    assert done.returncode == 0, done.stderr
    assert list(empty.iterdir()) == []  # Spark's default is ./spark-warehouse
    assert (store / "_lakelog" / "spark-warehouse").is_dir()
