"""kafka-topics' shape: --store/--bootstrap-server anywhere, --topic T beside the positional, Kafka's
action flags, --replication-factor, --if-exists / --if-not-exists; bad input refused before a store exists."""

from __future__ import annotations

import pytest

from lakelog.store import Store
from tests.cli.helpers import command, run


def test_the_store_option_goes_anywhere_and_bootstrap_server_names_it(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LAKELOG_STORE", raising=False)
    store = str(tmp_path / "s")
    assert run(capsys, monkeypatch, "topics", "create", "a", "--store", store)[0] == 0
    assert run(capsys, monkeypatch, "topics", "--store", store, "create", "b")[0] == 0
    assert run(capsys, monkeypatch, "--bootstrap-server", store, "topics", "create", "c")[0] == 0
    assert run(capsys, monkeypatch, "topics", "create", "d", "--bootstrap-server", store)[0] == 0
    assert run(capsys, monkeypatch, "-v", "topics", "list", "--store", store)[1].split() == ["a", "b", "c", "d"]
    conf = tmp_path / "my.conf"
    conf.write_text("num.partitions 2\n")
    assert run(capsys, monkeypatch, "topics", "create", "e", "--conf", str(conf), "--store", store)[0] == 0
    assert Store.open(store, create=False).describe_topic("e").partitions == 2  # the --conf after the command
    code, _, err = run(capsys, monkeypatch, "topics", "list", "--store", store, "--conf", str(tmp_path / "missing"))
    assert code == 2 and "missing" in err
    assert Store.open(store, create=False).list_topics() == ["a", "b", "c", "d", "e"]


def test_kafka_topics_flag_forms(tmp_path, capsys, monkeypatch):
    s = ("--bootstrap-server", str(tmp_path / "s"))
    code, out, err = run(
        capsys,
        monkeypatch,
        *s,
        "topics",
        "--create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=1000",
    )
    assert code == 0 and "Created topic orders with 3 partition(s)" in out
    assert "--replication-factor 3 ignored" in err
    code, _, err = run(capsys, monkeypatch, "topics", "--create", "--topic", "x", "--replication-factor", "1", *s)
    assert code == 0 and err == ""  # 1 is what a store keeps: no note
    assert run(capsys, monkeypatch, "topics", "--list", *s)[1].split() == ["orders", "x"]
    code, out, _ = run(capsys, monkeypatch, "topics", "--describe", "--topic", "orders", *s)
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=1000" in out
    assert out.count("\tTopic: orders\tPartition:") == 3
    code, out, _ = run(capsys, monkeypatch, "topics", "--alter", "--topic", "orders", "--partitions", "4", *s)
    assert code == 0 and "now has 4 partitions" in out
    code, out, _ = run(capsys, monkeypatch, "topics", "--describe", *s)  # every topic
    assert "Topic: orders" in out and "Topic: x" in out
    assert run(capsys, monkeypatch, "topics", "--delete", "--topic", "x", *s)[:2] == (0, "Deleted topic x.\n")
    assert Store.open(s[1], create=False).describe_topic("orders").partitions == 4


def test_if_exists_and_if_not_exists(tmp_path, capsys, monkeypatch):
    s = ("--store", str(tmp_path / "s"))
    assert run(capsys, monkeypatch, *s, "topics", "--create", "--topic", "t")[0] == 0
    assert run(capsys, monkeypatch, *s, "topics", "--create", "--topic", "t")[0] == 5
    assert run(capsys, monkeypatch, *s, "topics", "--create", "--topic", "t", "--if-not-exists") == (0, "", "")
    assert run(capsys, monkeypatch, *s, "topics", "--delete", "--topic", "nope")[0] == 6
    assert run(capsys, monkeypatch, *s, "topics", "--delete", "--topic", "nope", "--if-exists") == (0, "", "")
    assert run(capsys, monkeypatch, *s, "topics", "--describe", "--topic", "nope")[0] == 6
    assert run(capsys, monkeypatch, *s, "topics", "--describe", "--topic", "nope", "--if-exists") == (0, "", "")
    assert run(capsys, monkeypatch, *s, "topics", "--alter", "--topic", "nope", "--partitions", "2")[0] == 6
    assert run(capsys, monkeypatch, *s, "topics", "alter", "nope", "--partitions", "2", "--if-exists")[0] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["topics", "--create", "--topic", "t", "--partitions", "0"], "--partitions: must be at least 1"),
        (["topics", "--create", "--topic", "t", "--replication-factor", "x"], "must be an integer"),
        (["topics", "--create"], "topics create needs a topic"),
        (["topics", "create", "a", "--topic", "b"], "two topics given"),
        (["topics", "--create", "--delete", "--topic", "t"], "give one of --create"),
        (["topics", "--create", "--topic", "t", "--config", "colour=blue"], "unknown topic config key 'colour'"),
        (["topics", "--alter", "--topic", "t", "--config", "retention.ms=soon"], "retention.ms"),
    ],
)
def test_bad_topic_arguments_are_named_before_a_store_exists(tmp_path, capsys, monkeypatch, argv, message):
    path = tmp_path / "new"
    code, out, err = run(capsys, monkeypatch, *argv, "--store", str(path))
    assert code == 2 and message in err and "Traceback" not in err and out == ""
    assert not path.exists()


def test_the_real_command_creates_and_lists_without_spark(tmp_path):
    store = str(tmp_path / "s")
    done = command("topics", "--create", "--topic", "t", "--partitions", "2", "--bootstrap-server", store)
    assert done.returncode == 0 and "Created topic t with 2 partition(s)" in done.stdout, done.stderr
    done = command("topics", "--create", "--topic", "t", "--bootstrap-server", store)
    assert done.returncode == 5 and done.stderr.startswith("error: ") and "t" in done.stderr
    assert command("topics", "--list", "--store", store).stdout == "t\n"


def test_delete_records_as_kafka_delete_records(tmp_path, capsys, monkeypatch):
    s = ("--store", str(tmp_path / "s"))
    assert run(capsys, monkeypatch, "topics", "create", "t", "--partitions", "2", *s)[0] == 0
    store = Store.open(s[1], create=False)
    with store.producer(linger_ms=0) as producer:
        producer.send_batch("t", [b"x"] * 10, partition=0).get()
        producer.send_batch("t", [b"y"] * 4, partition=1).get()
    offsets = tmp_path / "offsets.json"
    offsets.write_text('{"partitions": [{"topic": "t", "partition": 0, "offset": 4}], "version": 1}')
    code, out, err = run(capsys, monkeypatch, "topics", "delete-records", "--offset-json-file", str(offsets), *s)
    assert (code, err) == (0, "")
    assert out == "Records delete operation completed:\npartition: t-0\tlow_watermark: 4\n"
    code, out, _ = run(capsys, monkeypatch, "topics", "delete-records", "t", "--offset", "-1", *s)
    assert code == 0 and "partition: t-0\tlow_watermark: 10" in out and "partition: t-1\tlow_watermark: 4" in out
    code, out, _ = run(capsys, monkeypatch, "topics", "describe", "t", *s)
    assert "Partition: 0\tLogStartOffset: 10\tLogEndOffset: 10" in out
    code, _, err = run(
        capsys, monkeypatch, "topics", "delete-records", "--topic", "t", "--partition", "1", "--offset", "9", *s
    )
    assert code == 2 and "high watermark 4" in err  # OffsetOutOfRangeError: invalid input
    assert run(capsys, monkeypatch, "topics", "delete-records", "nope", "--offset", "0", *s)[0] == 6
    offsets.write_text('{"partitions": [{"topic": "t", "offset": 4}]}')
    code, _, err = run(capsys, monkeypatch, "topics", "delete-records", "--offset-json-file", str(offsets), *s)
    assert code == 2 and "offset JSON" in err and "'partition'" in err
    assert Store.open(s[1], create=False).beginning_offsets("t") == {0: 10, 1: 4}
