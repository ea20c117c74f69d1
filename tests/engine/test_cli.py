"""The lakelog command line, run in-process (no Spark: these commands never start it)."""

from __future__ import annotations

import io

from lakelog.cli import main
from lakelog.cli.arguments import split_configs as _split_configs
from lakelog.engine.produce.partitioner import partition_for_key


def run(capsys, *argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_config_lists_keep_commas_inside_values():
    assert _split_configs("cleanup.policy=compact,delete,retention.ms=5") == [
        "cleanup.policy=compact,delete",
        "retention.ms=5",
    ]


def test_topic_commands_and_exit_codes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LAKELOG_STORE", str(tmp_path / "s"))
    code, out, _ = run(
        capsys,
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--config",
        "cleanup.policy=compact,delete",
        "--config",
        "retention.ms=1000",
    )
    assert code == 0 and "Created topic orders with 3 partition(s)" in out
    assert run(capsys, "topics", "create", "orders")[0] == 5
    code, _, err = run(capsys, "topics", "create", "x", "--config", "colour=blue")
    assert code == 2 and "unknown topic config key 'colour'" in err
    assert run(capsys, "topics", "list")[1].split() == ["orders"]
    code, out, _ = run(capsys, "topics", "describe", "orders", "--all-configs")
    assert "PartitionCount: 3" in out and "Configs: cleanup.policy=compact,delete,retention.ms=1000" in out
    assert "Partition: 2\tLogStartOffset: 0\tLogEndOffset: 0" in out
    assert "max.message.bytes=1048588\tDEFAULT_CONFIG" in out
    code, out, _ = run(capsys, "topics", "alter", "orders", "--partitions", "4", "--delete-config", "retention.ms")
    assert code == 0 and "now has 4 partitions" in out
    assert run(capsys, "topics", "alter", "orders", "--partitions", "2")[0] == 2
    assert run(capsys, "topics", "describe", "nope")[0] == 6
    assert run(capsys, "topics", "delete", "orders") == (0, "Deleted topic orders.\n", "")
    assert run(capsys, "topics", "list")[1] == ""


def test_no_store_is_a_usage_error(capsys, monkeypatch):
    monkeypatch.delenv("LAKELOG_STORE", raising=False)
    code, _, err = run(capsys, "topics", "list")
    assert code == 2 and "--store" in err


def test_produce_consume_offsets_history(tmp_path, capsys, monkeypatch):
    store = str(tmp_path / "s")
    run(capsys, "--store", store, "topics", "create", "t", "--partitions", "2")
    lines = "alice\tfirst\nbob\tsecond\nalice\tthird\n"
    code, out, _ = run(capsys, "--store", store, "produce", "t", "--parse-key", stdin=lines, monkeypatch=monkeypatch)
    assert code == 0 and "3 record(s) produced to t" in out
    code, out, err = run(
        capsys, "--store", store, "consume", "t", "--from-beginning", "--print-metadata", "--timeout-ms", "200"
    )
    alice = partition_for_key(b"alice", 2)
    records = [line.split("\t") for line in out.splitlines()]
    assert len(records) == 3 and "Processed a total of 3 messages" in err
    by_key = {}
    for stamp, partition, offset, key, value in records:
        assert stamp.startswith("CreateTime:")
        by_key.setdefault(key, []).append((partition, offset, value))
    assert by_key["alice"] == [(f"Partition:{alice}", "Offset:0", "first"), (f"Partition:{alice}", "Offset:1", "third")]

    code, out, _ = run(
        capsys, "--store", store, "consume", "t", "--partition", str(alice), "--offset", "1", "--timeout-ms", "200"
    )
    assert out.splitlines() == ["third"]
    code, out, _ = run(capsys, "--store", store, "consume", "t", "--from-beginning", "--max-messages", "1")
    assert len(out.splitlines()) == 1
    assert run(capsys, "--store", store, "consume", "t", "--offset", "1")[0] == 2  # --offset needs --partition

    code, out, _ = run(capsys, "--store", store, "offsets", "t")
    assert out.splitlines()[0].split() == ["TOPIC", "PARTITION", "EARLIEST", "LATEST", "RECORDS"]
    assert out.splitlines()[1 + alice].split() == ["t", str(alice), "0", "2", "2"]
    code, out, _ = run(capsys, "--store", store, "history")
    assert "create_topic" in out and "produce" in out and f"t-{alice}:0..1" in out

    code, out, err = run(
        capsys, "--store", store, "produce", "t", "--partition", "7", stdin="x\n", monkeypatch=monkeypatch
    )
    assert code == 6 and "partition 7 of topic 't' does not exist" in err  # before reading stdin
