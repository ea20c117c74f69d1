"""kafka-console-producer and kafka-console-consumer shapes: --property forms, config files, --sync,
--input-file; Kafka's default output and print.* properties, --group commits and resumes, --timeout-ms,
and following new records until SIGTERM or Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from lakelog.engine.produce.partitioner import partition_for_key
from lakelog.store import Store
from tests.cli.helpers import ROOT, command, run


@pytest.fixture
def store(tmp_path):
    path = str(tmp_path / "s")
    Store.open(path).create_topic("t", partitions=1)
    return path


def records(path: str, topic: str = "t") -> list[tuple]:
    consumer = Store.open(path, create=False).consumer(enable_auto_commit=False)
    tps = [(topic, p) for p in range(Store.open(path, create=False).describe_topic(topic).partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    found = []
    while batch := consumer.poll(timeout_ms=100):
        found += [(r.key, r.value, r.headers) for r in batch]
    consumer.close()
    return found


# -- producer -----------------------------------------------------------------------------


def test_producer_parses_keys_headers_and_null_markers_as_kafka(store, capsys, monkeypatch):
    lines = "h1:a,h2:b|k1=v1\nn:1|k2=NIL\nh:NIL|NIL=v3\nNIL|k=v\n"
    code, out, err = run(
        capsys,
        monkeypatch,
        "produce",
        "--topic",
        "t",
        "--store",
        store,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator==",
        "--property",
        "parse.headers=true",
        "--property",
        "headers.delimiter=|",
        "--property",
        "null.marker=NIL",
        stdin=lines,
    )
    # The fourth line's header has no key separator: an error naming it, as Kafka's reader raises.
    assert code == 7 and out == "" and "line 4: no header key separator ':' in 'NIL'" in err
    assert records(store) == [
        (b"k1", b"v1", [("h1", b"a"), ("h2", b"b")]),
        (b"k2", None, [("n", b"1")]),
        (None, b"v3", [("h", None)]),
    ]


def test_key_separator_defaults_to_tab_and_a_missing_one_names_the_line(store, capsys, monkeypatch):
    code, _, err = run(
        capsys, monkeypatch, "produce", "t", "--store", store, "--property", "parse.key=true", stdin="a\tb\nc\n"
    )
    assert code == 7 and "line 2 has no key separator '\\t'" in err
    assert records(store) == [(b"a", b"b", None)]
    # ignore.error=true: a line without the separator is a keyless record, as Kafka's reader makes it.
    props = ["--property", "parse.key=true", "--property", "ignore.error=true"]
    assert run(capsys, monkeypatch, "produce", "t", "--store", store, *props, stdin="c\n")[0] == 0
    assert records(store)[-1] == (None, b"c", None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--property", "parse.key=maybe"], "--property parse.key must be true or false"),
        (["--property", "colour=blue"], "unknown --property 'colour'"),
        (["--property", "novalue"], "--property must look like key=value"),
        (["--producer-property", "linger.ms=-5"], "linger.ms"),
        (["--producer-property", "colour=blue"], "unknown producer config key 'colour'"),
        (["--producer.config", "/nonexistent/p.properties"], "--producer.config: cannot read"),
        (["--request-required-acks", "1"], "invalid choice"),
    ],
)
def test_bad_producer_arguments_exit_2_before_the_store_is_opened(tmp_path, capsys, monkeypatch, argv, message):
    missing = tmp_path / "typo"
    code, _, err = run(capsys, monkeypatch, "produce", "--topic", "t", *argv, "--store", str(missing), stdin="x\n")
    assert code == 2 and message in err and "Traceback" not in err
    assert not missing.exists()


def test_producer_config_file_sync_and_input_file(store, tmp_path, capsys, monkeypatch):
    config = tmp_path / "producer.properties"
    # A Kafka client's file: bootstrap.servers means nothing here and is dropped with a note.
    config.write_text(
        "# copied from a Kafka client\nbootstrap.servers=localhost:9092\nclient.id=from-file\nlinger.ms 0\n"
    )
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"k{i}\tv{i}\n" for i in range(5)))
    argv = ["produce", "--topic", "t", "--store", store, "--producer.config", str(config), "--sync"]
    code, out, err = run(capsys, monkeypatch, *argv, "--parse-key", "--input-file", str(data))
    assert code == 0 and out == "5 record(s) produced to t\n" and "ignoring bootstrap.servers" in err
    assert [r[:2] for r in records(store)] == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]
    log = Store.open(store, create=False)
    produced = [e for e in log.history_entries("t") if e.operation == "produce"]
    assert len(produced) == 5  # --sync: one commit per record
    assert {e.client_id for e in produced} == {"from-file"}
    code, _, err = run(capsys, monkeypatch, "produce", "t", "--store", store, "--input-file", str(tmp_path / "no"))
    assert code == 2 and "--input-file: cannot read" in err


def test_producer_reads_a_redirected_file_in_a_real_process(store, tmp_path):
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"line {i}\n" for i in range(1000)))
    with open(data) as handle:
        done = subprocess.run(
            [sys.executable, "-m", "lakelog.cli", "produce", "--topic", "t", "--bootstrap-server", store],
            stdin=handle,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert done.returncode == 0 and done.stdout == "1000 record(s) produced to t\n", done.stderr
    assert Store.open(store, create=False).end_offsets("t") == {0: 1000}


# -- consumer -----------------------------------------------------------------------------


def fill(path: str, partitions: int = 2) -> Store:
    log = Store.open(path)
    log.create_topic("c", partitions=partitions)
    with log.producer() as producer:
        for i in range(6):
            producer.send("c", f"v{i}", key=f"k{i % 2}", headers=[("n", str(i))] if i == 0 else None)
    return log


def test_default_output_is_the_value_alone_and_properties_add_fields(tmp_path, capsys, monkeypatch):
    path = str(tmp_path / "s")
    fill(path)
    base = ["consume", "--topic", "c", "--from-beginning", "--timeout-ms", "200", "--store", path]
    code, out, err = run(capsys, monkeypatch, *base)
    assert code == 0 and sorted(out.splitlines()) == [f"v{i}" for i in range(6)]
    assert err.endswith("Processed a total of 6 messages\n")
    props = ["print.key=true", "print.offset=true", "print.partition=true", "print.headers=true"]
    props += ["print.timestamp=true", "key.separator= | ", "null.literal=<none>"]
    code, out, _ = run(capsys, monkeypatch, *base, *[a for p in props for a in ("--property", p)])
    lines = {line.split(" | ")[-1]: line.split(" | ") for line in out.splitlines()}
    p0 = partition_for_key(b"k0", 2)
    stamp, partition, offset, headers, key, value = lines["v0"]
    assert stamp.startswith("CreateTime:") and int(stamp.split(":")[1]) > 0
    assert (partition, offset, headers, key, value) == (f"Partition:{p0}", "Offset:0", "n:0", "k0", "v0")
    assert lines["v1"][3] == "NO_HEADERS"
    code, out, _ = run(capsys, monkeypatch, *base, "--property", "print.value=false", "--property", "print.key=true")
    assert sorted(out.splitlines()) == ["k0"] * 3 + ["k1"] * 3
    code, out, _ = run(capsys, monkeypatch, *base, "--property", "line.separator=;", "--partition", str(p0))
    assert out == "".join(f"v{i};" for i in range(6) if partition_for_key(f"k{i % 2}".encode(), 2) == p0)
    code, out, _ = run(capsys, monkeypatch, *base, "--formatter", "kafka.tools.DefaultMessageFormatter")
    assert code == 0 and len(out.splitlines()) == 6


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--formatter", "kafka.tools.LoggingMessageFormatter"], "only Kafka's default formatter"),
        (["--property", "print.key=yes"], "--property print.key must be true or false"),
        (["--property", "print.colour=true"], "unknown --property 'print.colour'"),
        (["--group", "g", "--partition", "0", "--offset", "1"], "--group and --offset cannot be given together"),
        (["--from-beginning", "--partition", "0", "--offset", "1"], "--from-beginning and --offset cannot"),
        (["--timeout-ms", "-1"], "--timeout-ms: must be at least 0"),
        (["--consumer-property", "max.poll.records=0"], "max.poll.records"),
        (["--consumer-property", "group.id=x"], "give the group with --group"),
    ],
)
def test_bad_consumer_arguments_exit_2_before_the_store_is_opened(tmp_path, capsys, monkeypatch, argv, message):
    missing = tmp_path / "typo"
    code, _, err = run(capsys, monkeypatch, "consume", "--topic", "c", *argv, "--store", str(missing))
    assert code == 2 and message in err and "Traceback" not in err
    assert not missing.exists()


def test_a_group_commits_what_was_printed_and_resumes_there(tmp_path, capsys, monkeypatch):
    path = str(tmp_path / "s")
    log = fill(path, partitions=1)
    base = ["consume", "--topic", "c", "--group", "g", "--store", path]
    code, out, err = run(capsys, monkeypatch, *base, "--from-beginning", "--max-messages", "2")
    assert (code, out.splitlines()) == (0, ["v0", "v1"]) and "Processed a total of 2 messages" in err
    code, out, _ = run(capsys, monkeypatch, "groups", "--describe", "--group", "g", "--store", path)
    assert out.splitlines()[1].split() == ["g", "c", "0", "2", "6", "4", "-", "-", "-"]
    # The next run resumes at the committed offset (--from-beginning only counts without one).
    code, out, _ = run(capsys, monkeypatch, *base, "--from-beginning", "--timeout-ms", "300")
    assert out.splitlines() == ["v2", "v3", "v4", "v5"]
    with log.producer() as producer:
        producer.send("c", "v6")
    code, out, _ = run(capsys, monkeypatch, *base, "--timeout-ms", "300")
    assert out.splitlines() == ["v6"]
    committed = log.consumer("g").committed([("c", 0)])
    assert [o.offset for o in committed.values()] == [7]
    # A new group without --from-beginning starts at the end, as Kafka's does, and commits it.
    code, out, _ = run(capsys, monkeypatch, "consume", "c", "--group", "h", "--timeout-ms", "200", "--store", path)
    assert out == "" and [o.offset for o in log.consumer("h").committed([("c", 0)]).values()] == [7]


def test_timeout_ms_ends_a_consumer_that_waited_for_records(tmp_path, capsys, monkeypatch):
    path = str(tmp_path / "s")
    fill(path)
    started = time.monotonic()
    code, out, err = run(capsys, monkeypatch, "consume", "--topic", "c", "--timeout-ms", "700", "--store", path)
    waited = time.monotonic() - started
    assert (code, out) == (0, "") and "Processed a total of 0 messages" in err
    assert 0.7 <= waited < 10


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_consumer_follows_new_records_until_it_is_stopped(tmp_path, stop):
    path = str(tmp_path / "s")
    log = fill(path, partitions=1)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lakelog.cli",
            "consume",
            "--bootstrap-server",
            path,
            "--topic",
            "c",
            "--from-beginning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while len(lines) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(lines) == 6, lines
        time.sleep(1.0)
        assert proc.poll() is None  # all read, still waiting: it follows
        with log.producer() as producer:
            producer.send("c", "late")
        while len(lines) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lines[-1] == "late\n"
        proc.send_signal(stop)
        assert proc.wait(30) == 0
        reader.join(10)
        assert proc.stderr.read().strip().endswith("Processed a total of 7 messages")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_real_commands_round_trip(tmp_path):
    store = str(tmp_path / "s")
    assert command("topics", "--create", "--topic", "r", "--store", store).returncode == 0
    done = command("produce", "--topic", "r", "--property", "parse.key=true", "--store", store, stdin="a\t1\nb\t2\n")
    assert done.returncode == 0, done.stderr
    done = command(
        "consume",
        "--topic",
        "r",
        "--from-beginning",
        "--max-messages",
        "2",
        "--store",
        store,
        "--property",
        "print.key=true",
    )
    assert done.returncode == 0 and done.stdout == "a\t1\nb\t2\n" and "Processed a total of 2 messages" in done.stderr
