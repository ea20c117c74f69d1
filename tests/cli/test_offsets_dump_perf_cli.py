"""GetOffsetShell's shape (``offsets --topic T --time``), ``lakelog dump`` (kafka-dump-log), ``perf produce``
(kafka-producer-perf-test) whose count is what landed, rich tables, and that none of these start Spark."""

from __future__ import annotations

import time

import pytest

from lakelog.cli.tables import table
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from tests.cli.helpers import run
from tests.test_jvm_free import NO_JVM, run_without_jvm

BASE = 1_700_000_000_000


@pytest.fixture
def store(tmp_path):
    """Topic o: partition 0 with offsets 0..5 in two commits (two files), partition 1 with 0..1."""
    path = str(tmp_path / "s")
    log = Store.open(path)
    log.create_topic("o", partitions=2)
    with log.producer() as producer:
        for i in range(3):
            producer.send("o", f"value-{i}", key=f"k{i}", partition=0, timestamp=BASE + 1000 * i, headers={"h": "x"})
    with log.producer() as producer:
        for i in range(3, 6):
            producer.send("o", "y" * 100 if i == 5 else f"value-{i}", partition=0, timestamp=BASE + 1000 * i)
        for i in range(2):
            producer.send("o", f"p1-{i}", partition=1, timestamp=BASE + 1000 * i)
    return path


def test_get_offset_shell_lines(store, capsys, monkeypatch):
    s = ("--bootstrap-server", store)
    assert run(capsys, monkeypatch, "offsets", "--topic", "o", *s)[1] == "o:0:6\no:1:2\n"
    assert run(capsys, monkeypatch, "offsets", "--topic", "o", "--time", "-1", *s)[1] == "o:0:6\no:1:2\n"
    assert run(capsys, monkeypatch, "offsets", "--topic", "o", "--time", "earliest", *s)[1] == "o:0:0\no:1:0\n"
    assert run(capsys, monkeypatch, "offsets", "--topic", "o", "--time", "-2", "--partitions", "1", *s)[1] == "o:1:0\n"
    # The first offset whose timestamp is >= the time; partition 1 has none that late: left out.
    assert run(capsys, monkeypatch, "offsets", "--topic", "o", "--time", str(BASE + 2500), *s)[1] == "o:0:3\n"
    assert run(capsys, monkeypatch, "offsets", "--topic", "o", "--time", str(BASE), *s)[1] == "o:0:0\no:1:0\n"
    # -3 / max-timestamp: the record with the largest timestamp (KIP-734).
    assert run(capsys, monkeypatch, "offsets", "--topic", "o", "--time", "-3", *s)[1] == "o:0:5\no:1:1\n"
    assert run(capsys, monkeypatch, "offsets", *s)[1] == "o:0:6\no:1:2\n"  # every topic
    code, out, _ = run(capsys, monkeypatch, "offsets", "o", *s)  # the positional form: a table
    assert [line.split() for line in out.splitlines()] == [
        ["TOPIC", "PARTITION", "EARLIEST", "LATEST", "RECORDS"],
        ["o", "0", "0", "6", "6"],
        ["o", "1", "0", "2", "2"],
    ]
    code, _, err = run(capsys, monkeypatch, "offsets", "--topic", "o", "--partitions", "2", *s)
    assert code == 6 and "partition 2 of topic 'o' does not exist" in err
    assert run(capsys, monkeypatch, "offsets", "--topic", "nope", *s)[0] == 6
    with Store.open(store).producer() as producer:  # an older record last: the newest stays where it was
        producer.send("o", "late", partition=1, timestamp=BASE - 1)
    newest = run(capsys, monkeypatch, "offsets", "--topic", "o", "--time", "max-timestamp", "--partitions", "1", *s)
    assert newest[1] == "o:1:1\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--time", "-4"], "--time must be -1 (latest), -2 (earliest), -3"),
        (["--partitions", "a"], "--partitions must be"),
    ],
)
def test_bad_offsets_arguments_exit_2_before_the_store_is_opened(tmp_path, capsys, monkeypatch, argv, message):
    code, _, err = run(capsys, monkeypatch, "offsets", "--topic", "o", *argv, "--store", str(tmp_path / "typo"))
    assert code == 2 and message in err
    assert not (tmp_path / "typo").exists()


def test_dump_prints_each_file_and_the_records_it_holds(store, capsys, monkeypatch):
    files = Store.open(store, create=False).log.latest().files_of(TopicPartition("o", 0))
    paths = [f.path for f in files.ordered]
    assert len(paths) == 2
    code, out, _ = run(capsys, monkeypatch, "dump", "--topic", "o", "--partition", "0", "--store", store)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(f"Dumping {paths[0]} (offsets 0..2, 3 record(s), ")
    assert lines[4].startswith(f"Dumping {paths[1]} (offsets 3..5, 3 record(s), ")
    first = lines[1]
    assert first.startswith(f"| offset: 0 CreateTime: {BASE} keySize: 2 valueSize: 7 ")
    assert first.endswith("headerKeys: [h] key: k0 payload: value-0")
    assert " keySize: -1 valueSize: 7 " in lines[5]
    assert "key: null payload: value-3" in lines[5]
    assert lines[7].endswith("payload: " + "y" * 60 + "...")  # a preview, unless --print-data-log
    code, out, _ = run(capsys, monkeypatch, "dump", "o", "--offset", "2", "--max-messages", "3", "--store", store)
    assert [line.split()[2] for line in out.splitlines() if line.startswith("|")] == ["2", "3", "4"]
    code, out, _ = run(capsys, monkeypatch, "dump", "o", "--offset", "5", "--print-data-log", "--store", store)
    assert out.splitlines()[-1].endswith("payload: " + "y" * 100)
    code, out, _ = run(capsys, monkeypatch, "dump", "--topic", "o", "--files", "--store", store)
    assert [line.split()[:4] for line in out.splitlines()] == [
        ["FILE", "FIRST-OFFSET", "LAST-OFFSET", "RECORDS"],
        [paths[0], "0", "2", "3"],
        [paths[1], "3", "5", "3"],
    ]
    assert run(capsys, monkeypatch, "dump", "o", "--partition", "2", "--store", store)[0] == 6
    code, out, _ = run(capsys, monkeypatch, "dump", "o", "--offset", "9", "--store", store)
    assert out.splitlines()[-1] == "No records of o-0 at or after offset 9."


def test_perf_produce_reports_what_landed(tmp_path, capsys, monkeypatch):
    path = str(tmp_path / "s")
    argv = ["perf", "produce", "--topic", "pt", "--num-records", "3000", "--record-size", "50", "--partitions", "3"]
    code, out, err = run(
        capsys, monkeypatch, *argv, "--producer-props", "linger.ms=10", "batch.num.messages=500", "--store", path
    )
    assert code == 0, err
    final = out.splitlines()[-1]
    assert final.startswith("3000 records sent, ") and "records/sec (" in final and "ms 99.9th." in final
    log = Store.open(path, create=False)
    assert sum(log.end_offsets("pt").values()) == 3000
    # Again into the same topic: the count is this run's, and exactly that many more landed.
    code, out, err = run(capsys, monkeypatch, *argv, "--store", path)
    assert out.splitlines()[-1].startswith("3000 records sent, ") and "landed" not in err
    assert sum(log.end_offsets("pt").values()) == 6000


def test_perf_produce_throughput_caps_the_rate_and_config_files_apply(tmp_path, capsys, monkeypatch):
    path = str(tmp_path / "s")
    config = tmp_path / "p.properties"
    config.write_text("client.id=perf-client\nlinger.ms=1\n")
    started = time.monotonic()
    argv = ["perf", "produce", "--num-records", "200", "--throughput", "400", "--producer.config", str(config)]
    code, out, err = run(capsys, monkeypatch, *argv, "--store", path)
    assert code == 0 and out.splitlines()[-1].startswith("200 records sent"), err
    assert time.monotonic() - started >= 0.45  # 200 records at 400/s
    log = Store.open(path, create=False)
    assert {e.client_id for e in log.history_entries("perf-test") if e.operation == "produce"} == {"perf-client"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--producer-props", "colour=blue"], "unknown producer config key 'colour'"),
        (["--producer-props", "linger.ms"], "--producer-props must look like key=value"),
        (["--throughput", "0"], "--throughput must be positive, or -1"),
        (["--throughput", "-2"], "--throughput: must be at least -1"),
        (["--api", "dataframe", "--throughput", "10"], "apply to --api producer"),
    ],
)
def test_bad_perf_produce_arguments_exit_2_before_the_store_is_opened(tmp_path, capsys, monkeypatch, argv, message):
    code, _, err = run(
        capsys, monkeypatch, "perf", "produce", "--num-records", "5", *argv, "--store", str(tmp_path / "x")
    )
    assert code == 2 and message in err
    assert not (tmp_path / "x").exists()


def test_tables_are_plain_padded_text_off_a_terminal_and_bold_on_one():
    text = table(["A", "LONGER"], [["x[bold]y", None], [12345, "z"]], color=False)
    assert text == "A         LONGER\nx[bold]y\n12345     z"  # markup is text, no trailing spaces, None is empty
    assert "\x1b[" not in text
    wide = table(["K"], [["v" * 500]], color=False)
    assert wide.splitlines()[1] == "v" * 500  # never wrapped or cut
    assert "\x1b[1m" in table(["A"], [["x"]], color=True)


BLOCKED = (
    NO_JVM
    + r"""
import io
from lakelog.cli import main

s = ["--store", sys.argv[1]]
assert main(["topics", "--create", "--topic", "t", "--partitions", "2", *s]) == 0
sys.stdin = io.StringIO("k\tv\nk2\tv2\n")
assert main(["produce", "--topic", "t", "--property", "parse.key=true", *s]) == 0
assert main(["consume", "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "2", *s]) == 0
assert main(["groups", "--describe", "--group", "g", *s]) == 0
assert main(["groups", "--reset-offsets", "--group", "g", "--topic", "t:0", "--shift-by", "-1", "--execute", *s]) == 0
assert main(["offsets", "--topic", "t", "--time", "-2", *s]) == 0
assert main(["dump", "--topic", "t", "--partition", "0", *s]) == 0
assert main(["perf", "produce", "--topic", "p", "--num-records", "100", *s]) == 0
assert "pyspark" not in sys.modules and "py4j" not in sys.modules
print("no jvm ok")
"""
)


def test_the_kafka_shaped_tools_need_no_jvm(tmp_path):
    done = run_without_jvm(BLOCKED, tmp_path / "s")
    assert done.returncode == 0 and "no jvm ok" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
