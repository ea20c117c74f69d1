"""Consumer group administration against a real store: list, describe, reset offsets, delete, CLI."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from lakelog.cli import main
from lakelog.engine.admin import groups as group_admin
from lakelog.engine.admin.groups import (
    GroupListing,
    PartitionOffsets,
    delete_group,
    describe_group,
    list_groups,
    reset_offsets,
)
from lakelog.engine.errors import (
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InvalidConfigError,
    InvalidOffsetError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.groups.classic_coordinator import ClassicCoordinator
from lakelog.engine.topics import TopicPartition

pytestmark = pytest.mark.spark

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
BASE = 1_700_000_000_000  # record timestamps: BASE + i s for the i-th record of a partition
MEMBER = {"heartbeat_interval_ms": 1000, "session_timeout_ms": 10000, "auto_offset_reset": "earliest"}


def fill(store) -> None:
    """orders-0 holds 7 records, orders-1 3; group g committed 5 and 3 (lag 2 and 0)."""
    store.create_topic("orders", partitions=2)
    with store.producer(linger_ms=5) as producer:
        for i in range(5):
            producer.send("orders", f"a{i}", partition=0, timestamp=BASE + i * 1000)
        for i in range(3):
            producer.send("orders", f"b{i}", partition=1, timestamp=BASE + i * 1000)
    c = store.consumer("g", auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([P0, P1])  # manual assignment: commits for g without joining it
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 8 and time.monotonic() < deadline:
        got += c.poll(timeout_ms=200)
    assert len(got) == 8
    c.commit()
    c.close()
    with store.producer(linger_ms=5) as producer:
        for i in range(5, 7):
            producer.send("orders", f"a{i}", partition=0, timestamp=BASE + i * 1000)


def committed(store, group: str = "g") -> dict[TopicPartition, int | None]:
    """The group's committed offsets as a fresh consumer reads them back."""
    c = store.consumer(group)
    try:
        return {tp: (om.offset if om is not None else None) for tp, om in c.committed([P0, P1]).items()}
    finally:
        c.close()


def test_list_describe_and_reset_offsets(store):
    assert list_groups(store.context) == []  # no __consumer_offsets yet
    with pytest.raises(GroupIdNotFoundError, match="'nope'"):
        describe_group(store.context, "nope")
    fill(store)

    assert list_groups(store.context) == [GroupListing("g", "Empty", 0)]
    d = describe_group(store.context, "g")
    assert (d.group_id, d.state, d.generation, d.members) == ("g", "Empty", None, ())
    assert d.partitions == (
        PartitionOffsets("orders", 0, 5, 7, 2, None),
        PartitionOffsets("orders", 1, 3, 3, 0, None),
    )

    # Bad input fails before anything is computed or committed.
    with pytest.raises(UnknownTopicOrPartitionError, match="'nope'"):
        reset_offsets(store.context, "g", ["orders", "nope"], to="earliest")
    with pytest.raises(InvalidConfigError, match="middle"):
        reset_offsets(store.context, "g", ["orders"], to="middle")  # type: ignore[arg-type]
    with pytest.raises(InvalidOffsetError, match="int offset"):
        reset_offsets(store.context, "g", ["orders"], to="offset")
    assert committed(store) == {P0: 5, P1: 3}

    assert reset_offsets(store.context, "g", ["orders"], to="earliest", dry_run=True) == {P0: 0, P1: 0}
    assert committed(store) == {P0: 5, P1: 3}
    assert reset_offsets(store.context, "g", ["orders"], to="earliest") == {P0: 0, P1: 0}
    assert committed(store) == {P0: 0, P1: 0}
    assert reset_offsets(store.context, "g", ["orders"], to="latest") == {P0: 7, P1: 3}
    assert committed(store) == {P0: 7, P1: 3}
    # Clamped into [start, end] as Kafka does: orders-1 ends at 3.
    assert reset_offsets(store.context, "g", ["orders"], to="offset", value=4) == {P0: 4, P1: 3}
    assert committed(store) == {P0: 4, P1: 3}
    assert reset_offsets(store.context, "g", ["orders"], to="offset", value=-9) == {P0: 0, P1: 0}
    # orders-0: first record at or after BASE+2.5 s is offset 3; orders-1's are all older -> its end.
    assert reset_offsets(store.context, "g", ["orders"], to="datetime", value=BASE + 2500) == {P0: 3, P1: 3}
    assert committed(store) == {P0: 3, P1: 3}
    assert describe_group(store.context, "g").partitions[0] == PartitionOffsets("orders", 0, 3, 7, 4, None)
    assert list_groups(store.context) == [GroupListing("g", "Empty", 0)]


def test_reset_and_delete_are_refused_while_a_member_is_live(store, monkeypatch):
    fill(store)
    member = store.consumer("g", client_id="worker-1", enable_auto_commit=False, **MEMBER)
    try:
        # The member joins after reset_offsets' early check passed: the check
        # inside the commit must still see it and refuse.
        original = group_admin._plan_reset

        def plan_then_join(*args, **kwargs):
            planned = original(*args, **kwargs)
            member.subscribe(["orders"])
            member.poll(timeout_ms=0)
            return planned

        monkeypatch.setattr(group_admin, "_plan_reset", plan_then_join)
        with pytest.raises(GroupNotEmptyError, match=r"'g'.*1 live member"):
            reset_offsets(store.context, "g", ["orders"], to="earliest")
        monkeypatch.undo()

        assert list_groups(store.context) == [GroupListing("g", "Stable", 1)]
        d = describe_group(store.context, "g")
        assert d.state == "Stable" and d.generation is not None and d.generation >= 1 and d.assignor == "range"
        (m,) = d.members
        assert m.client_id == "worker-1" and set(m.assignment) == {P0, P1}
        assert [(p.committed, p.log_end_offset, p.lag, p.owner) for p in d.partitions] == [
            (5, 7, 2, m.member_id),
            (3, 3, 0, m.member_id),
        ]
        with pytest.raises(GroupNotEmptyError, match="1 live member"):
            reset_offsets(store.context, "g", ["orders"], to="latest", dry_run=True)
        with pytest.raises(GroupNotEmptyError, match=r"'g'.*1 live member"):
            delete_group(store.context, "g")
        assert committed(store) == {P0: 5, P1: 3}
        assert not any(e.operation in ("reset_offsets", "delete_group") for e in store.history_entries())
    finally:
        member.close()

    # The member left: its state record stays (no members), so the group is Empty.
    assert list_groups(store.context) == [GroupListing("g", "Empty", 0)]
    delete_group(store.context, "g")
    assert list_groups(store.context) == []
    assert committed(store) == {P0: None, P1: None}
    with pytest.raises(GroupIdNotFoundError, match="'g'"):
        describe_group(store.context, "g")
    with pytest.raises(GroupIdNotFoundError, match="'g'"):
        delete_group(store.context, "g")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_groups_cli(store, capsys):
    fill(store)
    s = ("--store", store.uri)

    code, out, _ = run(capsys, *s, "groups", "list")
    assert code == 0 and [line.split() for line in out.splitlines()] == [
        ["GROUP", "STATE", "MEMBERS"],
        ["g", "Empty", "0"],
    ]

    code, out, err = run(capsys, *s, "groups", "describe", "--group", "g")
    lines = [line.split() for line in out.splitlines()]
    assert code == 0 and lines[0] == [
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
    assert lines[1:] == [
        ["g", "orders", "0", "5", "7", "2", "-", "-", "-"],
        ["g", "orders", "1", "3", "3", "0", "-", "-", "-"],
    ]
    assert "has no active members" in err

    # kafka-consumer-groups --describe --members --verbose / --state, with a live member.
    member = store.consumer("g", client_id="worker-1", group_instance_id="w1", enable_auto_commit=False, **MEMBER)
    member.subscribe(["orders"])
    member.poll(timeout_ms=0)
    code, out, _ = run(capsys, *s, "groups", "describe", "--group", "g", "--members", "--verbose")
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == [
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "ASSIGNMENT",
    ]
    assert lines[1][2:] == ["w1", "-", "worker-1", "2", "orders(0,1)"]
    code, out, _ = run(capsys, *s, "groups", "describe", "--group", "g", "--state")
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "GENERATION", "#MEMBERS"],
        ["g", "range", "Stable", "1", "1"],
    ]
    code, out, err = run(capsys, *s, "groups", "describe", "--group", "g")
    assert "is Stable (generation 1)" in err and all(line.split()[-1] == "worker-1" for line in out.splitlines()[1:])
    member_id = member.group_client.member_id
    member.close()  # a static member does not leave: remove it by its instance id, as Kafka's admin does
    assert len(describe_group(store.context, "g").members) == 1
    assert ClassicCoordinator(store.context, "admin").leave("g", [("", "w1")]) == [(member_id, "none")]

    # Without --execute: a dry run that prints the plan and commits nothing.
    code, out, err = run(capsys, *s, "groups", "reset-offsets", "--group", "g", "--topic", "orders", "--to-earliest")
    assert code == 0 and "--execute" in err
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        ["g", "orders", "0", "0"],
        ["g", "orders", "1", "0"],
    ]
    assert committed(store) == {P0: 5, P1: 3}

    stamp = datetime.fromtimestamp((BASE + 2500) / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    code, out, _ = run(
        capsys, *s, "groups", "reset-offsets", "--group", "g", "--topic", "orders", "--to-datetime", stamp, "--execute"
    )
    assert code == 0 and [line.split()[-1] for line in out.splitlines()[1:]] == ["3", "3"]
    assert committed(store) == {P0: 3, P1: 3}
    code, _, _ = run(
        capsys, *s, "groups", "reset-offsets", "--group", "g", "--topic", "orders", "--to-offset", "4", "--execute"
    )
    assert code == 0 and committed(store) == {P0: 4, P1: 3}

    # Bad input: clear messages, the documented exit codes, nothing changed.
    code, _, err = run(
        capsys, *s, "groups", "reset-offsets", "--group", "g", "--topic", "nope", "--to-latest", "--execute"
    )
    assert code == 6 and "topic 'nope' does not exist" in err
    code, _, err = run(capsys, *s, "groups", "reset-offsets", "--group", "g", "--topic", "orders", "--execute")
    assert code == 2 and "needs one of --to-earliest, --to-latest" in err
    code, _, err = run(
        capsys, *s, "groups", "reset-offsets", "--group", "g", "--topic", "orders", "--to-datetime", "May 1"
    )
    assert code == 2 and "--to-datetime must be ISO 8601" in err
    with pytest.raises(SystemExit) as exc:  # argparse: the --to-* options exclude each other
        main([*s, "groups", "reset-offsets", "--group", "g", "--topic", "orders", "--to-earliest", "--to-latest"])
    assert exc.value.code == 2
    capsys.readouterr()
    assert committed(store) == {P0: 4, P1: 3}
    code, _, err = run(capsys, *s, "groups", "describe", "--group", "nope")
    assert code == 6 and "consumer group 'nope' does not exist" in err

    code, out, _ = run(capsys, *s, "groups", "delete", "--group", "g")
    assert code == 0 and "('g') was successful" in out
    assert run(capsys, *s, "groups", "list")[1].split() == ["GROUP", "STATE", "MEMBERS"]
    assert run(capsys, *s, "groups", "delete", "--group", "g")[0] == 6
