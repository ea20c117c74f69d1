"""kafka-consumer-groups' shape: flag forms, --all-groups, every reset spec, T:0,1, --dry-run by default
and --execute, --from-file / --export, Kafka's column names."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakelog.store import Store
from tests.cli.helpers import run

BASE = 1_700_000_000_000  # record timestamps: BASE + 1000 * offset


@pytest.fixture
def store(tmp_path):
    """Topic o (3 partitions, 10 records each at known times); group g committed 4/5/6, group h 1/1/1."""
    path = str(tmp_path / "s")
    log = Store.open(path)
    log.create_topic("o", partitions=3)
    with log.producer() as producer:
        for p in range(3):
            for i in range(10):
                producer.send("o", f"{p}-{i}", partition=p, timestamp=BASE + 1000 * i)
    for group, offsets in (("g", [4, 5, 6]), ("h", [1, 1, 1])):
        consumer = log.consumer(group, enable_auto_commit=False)
        consumer.assign([("o", p) for p in range(3)])
        consumer.commit({("o", p): offsets[p] for p in range(3)})
        consumer.close()
    return path


def committed(path: str, group: str) -> list[int | None]:
    found = Store.open(path, create=False).consumer(group).committed([("o", p) for p in range(3)])
    return [None if o is None else o.offset for _, o in sorted(found.items())]


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


def test_describe_list_and_delete_in_kafkas_flag_form(store, capsys, monkeypatch):
    s = ("--bootstrap-server", store)
    code, out, err = run(capsys, monkeypatch, "groups", "--describe", "--group", "g", *s)
    assert code == 0 and rows(out)[0] == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert rows(out)[1:] == [["g", "o", str(p), str(4 + p), "10", str(6 - p), "-", "-", "-"] for p in range(3)]
    assert "has no active members" in err
    code, out, _ = run(capsys, monkeypatch, "groups", "--describe", "--all-groups", *s)
    assert [r[0] for r in rows(out) if r and r[0] in ("g", "h")] == ["g"] * 3 + ["h"] * 3
    assert out.count("GROUP") == 2 and "\n\n" in out  # one table per group, a blank line between
    code, out, _ = run(capsys, monkeypatch, "groups", "--describe", "--group", "g", "--group", "h", "--state", *s)
    assert [r for r in rows(out) if r] == [
        ["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "GENERATION", "#MEMBERS"],
        ["g", "Empty", "0"],
        ["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "GENERATION", "#MEMBERS"],
        ["h", "Empty", "0"],
    ]
    code, out, _ = run(capsys, monkeypatch, "groups", "--describe", "--group", "g", "--members", *s)
    assert rows(out) == [["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]]
    assert rows(run(capsys, monkeypatch, "groups", "--list", *s)[1]) == [
        ["GROUP", "STATE", "MEMBERS"],
        ["g", "Empty", "0"],
        ["h", "Empty", "0"],
    ]
    code, out, _ = run(capsys, monkeypatch, "groups", "--delete", "--all-groups", *s)
    assert code == 0 and out == "Deletion of requested consumer groups ('g', 'h') was successful.\n"
    assert run(capsys, monkeypatch, "groups", "--describe", "--group", "g", *s)[0] == 6
    assert run(capsys, monkeypatch, "groups", "--delete", "--all-groups", *s)[1] == (
        "There are no consumer groups to delete.\n"
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (["--to-earliest"], [0, 0, 0]),
        (["--to-latest"], [10, 10, 10]),
        (["--to-current"], [4, 5, 6]),
        (["--to-offset", "7"], [7, 7, 7]),
        (["--to-offset", "99"], [10, 10, 10]),  # clamped into the log, as Kafka does
        (["--shift-by", "2"], [6, 7, 8]),
        (["--shift-by", "-5"], [0, 0, 1]),
        (["--shift-by", "5"], [9, 10, 10]),
        (["--to-datetime", datetime.fromtimestamp((BASE + 2500) / 1000, tz=UTC).isoformat()], [3, 3, 3]),
        (["--to-datetime", "2000-01-01T00:00:00"], [0, 0, 0]),
        (["--by-duration", "PT1H"], [10, 10, 10]),  # every record is older than an hour ago: the log end
        (["--by-duration", "P36500D"], [0, 0, 0]),
    ],
)
def test_each_reset_spec_dry_run_then_execute(store, capsys, monkeypatch, spec, expected):
    argv = ["groups", "--reset-offsets", "--group", "g", "--topic", "o", *spec, "--store", store]
    code, out, err = run(capsys, monkeypatch, *argv)
    assert code == 0 and "dry run, nothing committed" in err
    assert rows(out) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [
        ["g", "o", str(p), str(o)] for p, o in enumerate(expected)
    ]
    assert committed(store, "g") == [4, 5, 6]  # the dry run is the default
    code, _, err = run(capsys, monkeypatch, *argv, "--execute")
    assert code == 0 and "dry run" not in err
    assert committed(store, "g") == expected
    assert committed(store, "h") == [1, 1, 1]


def test_topic_partition_specs_all_groups_and_all_topics(store, capsys, monkeypatch):
    s = ("--store", store)
    reset = ("groups", "--reset-offsets")
    code, out, _ = run(
        capsys, monkeypatch, *reset, "--group", "g", "--topic", "o:0,2", "--to-offset", "8", "--execute", *s
    )
    assert code == 0 and [r[2] for r in rows(out)[1:]] == ["0", "2"]
    assert committed(store, "g") == [8, 5, 8]
    code, _, _ = run(capsys, monkeypatch, *reset, "--all-groups", "--topic", "o:1", "--to-earliest", "--execute", *s)
    assert code == 0 and committed(store, "g") == [8, 0, 8] and committed(store, "h") == [1, 0, 1]
    code, _, _ = run(capsys, monkeypatch, *reset, "--group", "h", "--all-topics", "--to-latest", "--execute", *s)
    assert code == 0 and committed(store, "h") == [10, 10, 10]
    code, _, err = run(capsys, monkeypatch, *reset, "--group", "g", "--topic", "o:3", "--to-latest", *s)
    assert code == 6 and "partition 3 of topic 'o' does not exist" in err
    code, _, err = run(capsys, monkeypatch, *reset, "--group", "g", "--topic", "nope", "--to-latest", *s)
    assert code == 6 and "topic 'nope' does not exist" in err


def test_shift_by_needs_a_committed_offset(store, capsys, monkeypatch):
    argv = ["groups", "reset-offsets", "--group", "new", "--topic", "o", "--shift-by", "1", "--store", store]
    code, _, err = run(capsys, monkeypatch, *argv)
    assert code == 2 and "cannot shift the offset of o-0 for group 'new': it has no committed offset" in err
    # No committed offset: --to-current gives the log end, as Kafka's does.
    argv = ["groups", "reset-offsets", "--group", "new", "--topic", "o", "--to-current", "--store", store]
    assert [r[-1] for r in rows(run(capsys, monkeypatch, *argv)[1])[1:]] == ["10", "10", "10"]


def test_export_and_from_file_round_trip(store, tmp_path, capsys, monkeypatch):
    s = ("--store", store)
    code, out, _ = run(
        capsys,
        monkeypatch,
        "groups",
        "--reset-offsets",
        "--group",
        "g",
        "--topic",
        "o",
        "--shift-by",
        "1",
        "--export",
        *s,
    )
    assert code == 0 and out == "o,0,5\no,1,6\no,2,7\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(out)
    argv = ["groups", "--reset-offsets", "--group", "h", "--from-file", str(plan), "--execute", *s]
    assert run(capsys, monkeypatch, *argv)[0] == 0
    assert committed(store, "h") == [5, 6, 7]
    # Several groups: group,topic,partition,offset lines.
    code, out, _ = run(
        capsys,
        monkeypatch,
        "groups",
        "--reset-offsets",
        "--all-groups",
        "--topic",
        "o:0",
        "--to-earliest",
        "--export",
        *s,
    )
    assert out == "g,o,0,0\nh,o,0,0\n"
    plan.write_text("g,o,2,3\nh,o,1,2\n")
    argv = ["groups", "--reset-offsets", "--all-groups", "--from-file", str(plan), "--execute", *s]
    assert run(capsys, monkeypatch, *argv)[0] == 0
    assert committed(store, "g") == [4, 5, 3] and committed(store, "h") == [5, 2, 7]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--group", "g", "--topic", "o"], "needs one of --to-earliest, --to-latest, --to-current"),
        (["--group", "g", "--to-latest"], "needs --topic T"),
        (["--topic", "o", "--to-latest"], "needs --group G (repeatable) or --all-groups"),
        (["--group", "g", "--topic", "o:x", "--to-latest"], "--topic partitions must be numbers"),
        (["--group", "g", "--topic", "o", "--by-duration", "1 hour"], "--by-duration must be an ISO 8601 duration"),
        (["--group", "g", "--topic", "o", "--to-datetime", "May 1"], "--to-datetime must be ISO 8601"),
        (["--group", "g", "--from-file", "/nonexistent.csv"], "--from-file: cannot read"),
        (["--group", "g", "--topic", "o", "--shift-by", "x"], "must be an integer"),
        (
            ["--group", "g", "--topic", "o", "--to-offset", "9223372036854775808"],
            "--to-offset 9223372036854775808 is outside -9223372036854775808..9223372036854775807",
        ),
        (
            ["--group", "g", "--topic", "o", "--shift-by", "-9223372036854775809"],
            "--shift-by -9223372036854775809 is outside -9223372036854775808..9223372036854775807",
        ),
    ],
)
def test_bad_reset_arguments_exit_2_before_the_store_is_opened(tmp_path, capsys, monkeypatch, argv, message):
    missing = tmp_path / "typo"
    code, _, err = run(capsys, monkeypatch, "groups", "--reset-offsets", *argv, "--store", str(missing))
    assert code == 2 and message in err and "Traceback" not in err
    assert not missing.exists()


def test_a_group_with_a_live_member_is_not_reset(store, capsys, monkeypatch):
    member = Store.open(store, create=False).consumer("g", client_id="worker", enable_auto_commit=False)
    member.subscribe(["o"])
    member.poll(timeout_ms=0)
    try:
        code, out, _ = run(capsys, monkeypatch, "groups", "--describe", "--group", "g", "--store", store)
        assert code == 0 and {r[-1] for r in rows(out)[1:]} == {"worker"}
        argv = ["groups", "--reset-offsets", "--group", "g", "--topic", "o", "--to-earliest", "--store", store]
        code, _, err = run(capsys, monkeypatch, *argv)
        assert code == 5 and "live member" in err
    finally:
        member.close()


def test_delete_offsets_deletes_only_the_partitions_named(store, capsys, monkeypatch):
    s = ("--store", store)
    code, out, _ = run(capsys, monkeypatch, "groups", "--delete-offsets", "--group", "g", "--topic", "o:0,1", *s)
    assert code == 0 and out.splitlines()[0] == "Request succeed for deleting offsets from group 'g'."
    assert rows(out)[1:] == [["TOPIC", "PARTITION", "STATUS"], ["o", "0", "Successful"], ["o", "1", "Successful"]]
    assert committed(store, "g") == [None, None, 6] and committed(store, "h") == [1, 1, 1]
    # Every partition of the topic: the group has nothing left, so it is gone (as in Kafka).
    assert run(capsys, monkeypatch, "groups", "delete-offsets", "--group", "h", "--topic", "o", *s)[0] == 0
    assert committed(store, "h") == [None, None, None]
    assert run(capsys, monkeypatch, "groups", "--describe", "--group", "h", *s)[0] == 6


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--topic", "o"], 2, "exactly one --group"),
        (["--group", "g", "--group", "h", "--topic", "o"], 2, "exactly one --group"),
        (["--group", "g"], 2, "needs --topic"),
        (["--group", "g", "--topic", "nope"], 6, "'nope' does not exist"),
        (["--group", "g", "--topic", "o:7"], 6, "o-7 does not exist"),
        (["--group", "missing", "--topic", "o"], 6, "'missing' does not exist"),
    ],
)
def test_delete_offsets_refuses_bad_input_and_changes_nothing(store, capsys, monkeypatch, argv, code, message):
    got, _, err = run(capsys, monkeypatch, "groups", "--delete-offsets", *argv, "--store", store)
    assert got == code and message in err and "Traceback" not in err
    assert committed(store, "g") == [4, 5, 6]


def test_offsets_of_a_topic_live_members_subscribe_to_are_not_deleted(store, capsys, monkeypatch):
    member = Store.open(store, create=False).consumer("g", client_id="worker", enable_auto_commit=False)
    member.subscribe(["o"])
    member.poll(timeout_ms=0)
    try:
        argv = ["groups", "--delete-offsets", "--group", "g", "--topic", "o:2", "--store", store]
        code, _, err = run(capsys, monkeypatch, *argv)
        assert code == 5 and "subscribed to it" in err
        assert committed(store, "g") == [4, 5, 6]
    finally:
        member.close()


def warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("WARN ")]


@pytest.mark.parametrize(
    ("spec", "expected", "warned"),
    [
        (["--to-offset", "-5"], [0, 0, 0], [(p, -5, "lower than earliest", 0) for p in range(3)]),
        (["--to-offset", "99"], [10, 10, 10], [(p, 99, "higher than latest", 10) for p in range(3)]),
        (["--shift-by", "5"], [9, 10, 10], [(2, 11, "higher than latest", 10)]),  # 10 is the end itself
        (["--shift-by", "-5"], [0, 0, 1], [(0, -1, "lower than earliest", 0)]),
        (["--to-offset", "7"], [7, 7, 7], []),
        (["--to-earliest"], [0, 0, 0], []),
    ],
)
def test_a_clamped_reset_prints_kafkas_warning_per_partition(store, capsys, monkeypatch, spec, expected, warned):
    argv = ["groups", "--reset-offsets", "--group", "g", "--topic", "o", *spec, "--execute", "--store", store]
    code, out, err = run(capsys, monkeypatch, *argv)
    assert code == 0 and rows(out)[1:] == [["g", "o", str(p), str(o)] for p, o in enumerate(expected)]
    # ConsumerGroupCommand.checkOffsetsRange's words, on stderr (stdout stays the table).
    assert warnings_of(err) == [
        f"WARN New offset ({asked}) is {which} offset for topic partition o-{p}. Value will be set to {to}"
        for p, asked, which, to in warned
    ]
    assert committed(store, "g") == expected
