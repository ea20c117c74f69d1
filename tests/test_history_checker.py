"""The history checker on hand-built histories: one clean, then the smallest history showing each anomaly."""

from __future__ import annotations

import json

import pytest

from tests.history_checker import OPERATION_KINDS, Report, check, load_events, operation_kind


def send(value: str, offset: int | None = None, outcome: str = "ok", txn: str | None = None, process: str = "w"):
    return {
        "type": "send",
        "process": process,
        "time": 0.0,
        "value": value,
        "topic": "t",
        "partition": 0,
        "offset": offset,
        "outcome": outcome,
        "txn": txn,
    }


def txn(name: str, outcome: str) -> dict:
    return {"type": "txn", "process": "w", "time": 0.0, "txn": name, "outcome": outcome}


def rec(value: str, offset: int) -> dict:
    return {"topic": "t", "partition": 0, "offset": offset, "value": value}


def poll(process: str, *records: dict) -> dict:
    return {"type": "poll", "process": process, "time": 0.0, "records": list(records)}


def assign(process: str) -> dict:
    return {"type": "assign", "process": process, "time": 0.0, "partitions": [["t", 0]]}


def commit(offset: int, outcome: str, time: float, start: float | None = None, process: str = "c1") -> dict:
    event = {
        "type": "commit",
        "process": process,
        "time": time,
        "group": "g",
        "offsets": {"t/0": offset},
        "outcome": outcome,
    }
    return event if start is None else {**event, "start": start}


def write(name: str, values: list[str], outcome: str = "ok", ranges: dict | None = None) -> list[dict]:
    """A write(df) as its worker records it: the rows before the call, then the outcome."""
    before = {"type": "write", "process": "w", "time": 0.0, "write": name, "topic": "t", "values": values}
    after = {"type": "write", "process": "w", "time": 1.0, "write": name, "outcome": outcome}
    if ranges is not None:
        after["ranges"] = ranges
    return [{**before, "outcome": "unknown"}, after]


def assert_only(report: Report, kind: str) -> None:
    """Exactly `kind` is reported: each anomaly is classified where it belongs and nowhere else."""
    assert {k: n for k, n in report.counts().items() if n} == {kind: len(getattr(report, kind))}, report.summary()
    assert not report.ok and f"{kind}: {len(getattr(report, kind))}" in report.summary()


def test_clean_history_has_no_anomaly():
    events = [
        send("a", 0),
        send("b", outcome="unknown"),  # unknown and stored
        send("c", outcome="unknown"),  # unknown and absent
        send("x", outcome="failed"),
        send("d", 2, txn="T1"),
        txn("T1", "committed"),
        send("e", 3, txn="T2"),  # offsets 3 and 4 (its abort marker) are hidden from read_committed
        txn("T2", "aborted"),
        send("f", txn="T3"),  # the producer died before ending T3
        send("h", 5),
        assign("c1"),
        poll("c1", rec("a", 0), rec("b", 1)),
        commit(2, "ok", time=1.0),
        poll("c1", rec("d", 2), rec("h", 5)),  # nothing stored at 3 or 4: not a skip
        commit(6, "failed", time=2.0),
        assign("c1"),  # rebalance: back to the committed offset 2
        poll("c1", rec("d", 2), rec("h", 5)),
        poll("c2", rec("a", 0), rec("b", 1)),
        {"type": "seek", "process": "c2", "time": 3.0, "topic": "t", "partition": 0, "offset": 0},
        poll("c2", rec("a", 0)),
        *write("W1", ["w1", "w2"], ranges={"t/0": [6, 8]}),
        *write("W2", ["w3"], outcome="failed"),
        *write("W3", ["w4", "w5"], outcome="unknown"),  # all of it landed
        *write("W4", ["w6"])[:1],  # the writer was killed during the call
        {"type": "maintain", "process": "m", "time": 4.0, "run": "m1", "outcome": "unknown"},
        {"type": "maintain", "process": "m", "time": 5.0, "run": "m1", "outcome": "ok"},
        {"type": "error", "process": "m", "time": 6.0, "operation": "maintain", "error": "StoreError", "message": "x"},
    ]
    final = [rec("a", 0), rec("b", 1), rec("d", 2), rec("h", 5), rec("w1", 6), rec("w2", 7), rec("w5", 8), rec("w4", 9)]
    report = check(events, final, final_committed={("g", "t", 0): 2}, plain_log=list(reversed(final)))
    assert report.ok, report.summary()
    assert report.committed_offsets == {("g", "t", 0): 2}
    assert report.stats == {
        "sends": {"committed": 2, "unknown": 2, "failed": 1},
        "values": {"committed": 5, "unknown": 6, "failed": 3},
        "txns": {"committed": 1, "aborted": 1, "unknown": 1},
        "writes": {"ok": 1, "failed": 1, "unknown": 2},
        "polls": 5,
        "polled_records": 9,
        "commits": {"ok": 1, "failed": 1},
        "maintenance": {"ok": 1},
        "errors": {"StoreError": 1},
        "final_log": 8,
    }


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (send("a", 0), "sends"),
        (send("a", outcome="unknown"), None),
        (send("a", 0, txn="T"), None),  # its transaction is the operation
        (txn("T", "committed"), "txn_commits"),
        (txn("T", "aborted"), "txn_aborts"),
        (txn("T", "unknown"), None),
        (poll("c", rec("a", 0)), "polls"),
        (commit(1, "ok", time=0.0), "offset_commits"),
        (commit(1, "failed", time=0.0), None),
        (write("W", ["a"])[1], "writes"),
        (write("W", ["a"])[0], None),
        ({"type": "maintain", "process": "m", "time": 0.0, "run": "m1", "outcome": "ok"}, "maintenance_runs"),
        ({"type": "assign", "process": "c", "time": 0.0, "partitions": []}, None),
    ],
)
def test_operation_kind(event, kind):
    assert operation_kind(event) == kind
    assert kind is None or kind in OPERATION_KINDS


@pytest.mark.parametrize(
    "events",
    [[send("v", 0)], [send("v", txn="T"), txn("T", "committed")]],
    ids=["acknowledged", "committed-txn"],
)
def test_lost_write(events):
    assert_only(check(events, []), "lost_writes")


@pytest.mark.parametrize(
    "events",
    [write("W", ["v", "u"], ranges={"t/0": [0, 2]}), [send("v", outcome="unknown"), poll("c", rec("v", 0))]],
    ids=["acknowledged-write", "polled-then-gone"],
)
def test_lost_write_of_a_write_or_of_a_polled_value(events):
    report = check(events, [rec("u", 1)] if events[0]["type"] == "write" else [])
    assert_only(report, "lost_writes")
    assert "'v'" in str(report.lost_writes[0])


@pytest.mark.parametrize(
    ("events", "final"),
    [
        ([send("v", outcome="unknown")], [rec("v", 0), rec("v", 1)]),
        ([send("v", outcome="unknown"), poll("c1", rec("v", 0)), poll("c2", rec("v", 1))], [rec("v", 0)]),
    ],
    ids=["stored-twice", "polled-at-two-offsets"],
)
def test_duplicate(events, final):
    assert_only(check(events, final), "duplicates")


@pytest.mark.parametrize(
    ("events", "final"),
    [
        ([send("v", outcome="unknown"), send("u", outcome="unknown"), poll("c", rec("u", 0))], [rec("v", 0)]),
        ([send("v", 3)], [rec("v", 0)]),
    ],
    ids=["two-values-at-one-offset", "acknowledged-elsewhere"],
)
def test_inconsistent_offsets(events, final):
    assert_only(check(events, final), "inconsistent_offsets")


@pytest.mark.parametrize(
    ("ranges", "final"),
    [
        ({"t/0": [0, 2]}, [rec("v", 0), rec("u", 2)]),  # u is outside the offsets the write was told
        ({"t/0": [0, 3]}, [rec("v", 0), rec("u", 1)]),  # three offsets for two rows
    ],
    ids=["row-outside-its-range", "range-of-the-wrong-size"],
)
def test_write_stored_elsewhere_than_it_was_told(ranges, final):
    assert_only(check(write("W", ["v", "u"], ranges=ranges), final), "inconsistent_offsets")


def test_failed_write_read():
    assert_only(check(write("W", ["v"], outcome="failed"), [rec("v", 0)]), "aborted_reads")


@pytest.mark.parametrize(
    "events",
    [
        [send("v", txn="T"), send("u", txn="T")],  # the producer died before ending T
        write("W", ["v", "u"], outcome="unknown"),
    ],
    ids=["transaction", "write"],
)
def test_torn_transaction(events):
    report = check(events, [rec("v", 0)])
    assert_only(report, "torn_transactions")
    assert report.torn_transactions[0].details["missing"] == ["u"]


@pytest.mark.parametrize(
    ("events", "final"),
    [
        ([send("v", outcome="failed"), poll("c", rec("v", 0))], []),
        ([send("v", 0, txn="T"), txn("T", "aborted")], [rec("v", 0)]),
        ([], [rec("v", 0)]),
    ],
    ids=["failed-send-polled", "aborted-txn-stored", "phantom"],
)
def test_aborted_read(events, final):
    report = check(events, final)
    assert_only(report, "aborted_reads")
    assert ("phantom" in str(report.aborted_reads[0])) == (events == [])


@pytest.mark.parametrize(
    "polls",
    [[poll("c", rec("b", 1)), poll("c", rec("a", 0))], [poll("c", rec("a", 0), rec("b", 1), rec("b", 1))]],
    ids=["across-polls", "within-a-poll"],
)
def test_non_monotonic_poll(polls):
    events = [send("a", outcome="unknown"), send("b", outcome="unknown"), *polls]
    assert_only(check(events, [rec("a", 0), rec("b", 1)]), "non_monotonic_polls")


@pytest.mark.parametrize(
    "events",
    [
        [send("a", 1), send("b", 0)],
        [send("a", 1, txn="T1"), txn("T1", "committed"), send("b", 0, txn="T2"), txn("T2", "committed")],
    ],
    ids=["acknowledged", "committed-txns"],
)
def test_non_monotonic_send(events):
    assert_only(check(events, [rec("b", 0), rec("a", 1)]), "non_monotonic_sends")


def test_an_assign_of_added_partitions_restarts_only_those():
    sends = [send(v, outcome="unknown") for v in "abxy"]
    a, b, x, y = rec("a", 0), rec("b", 1), {**rec("x", 0), "partition": 1}, {**rec("y", 1), "partition": 1}
    added = {"type": "assign", "process": "c", "time": 0.0, "added": True, "partitions": [["t", 1]]}
    # Back to the start of partition 1 after it was added: fine; back on partition 0, which it kept: not.
    assert check([*sends, poll("c", a, b, x, y), added, poll("c", x)], [a, b, x, y]).ok
    assert_only(check([*sends, poll("c", a, b, x, y), added, poll("c", a)], [a, b, x, y]), "non_monotonic_polls")


@pytest.mark.parametrize(
    ("commits", "final_committed", "anomalous"),
    [
        ([commit(5, "ok", time=1.0, start=0.5), commit(3, "ok", time=3.0, start=2.0, process="c2")], None, True),
        # The two calls overlap: they may have landed either way round.
        ([commit(5, "ok", time=2.5, start=0.5), commit(3, "ok", time=3.0, start=2.0, process="c2")], None, False),
        ([commit(5, "ok", time=1.0), commit(3, "ok", time=3.0)], None, False),  # no start: not ordered
        ([commit(5, "failed", time=1.0, start=0.5), commit(3, "ok", time=3.0, start=2.0)], None, False),
        ([commit(5, "ok", time=1.0, start=0.5)], {("g", "t", 0): 4}, True),  # the store lost a commit
        ([commit(5, "ok", time=1.0, start=0.5)], {}, True),
        ([commit(5, "ok", time=1.0, start=0.5)], {("g", "t", 0): 9}, False),
    ],
    ids=["after-return", "overlapping", "unordered", "failed-first", "final-below", "final-missing", "final-above"],
)
def test_non_monotonic_commits(commits, final_committed, anomalous):
    report = check(commits, [], final_committed=final_committed)
    if anomalous:
        assert_only(report, "non_monotonic_commits")
    else:
        assert report.ok, report.summary()


@pytest.mark.parametrize(
    "plain",
    [[rec("a", 0)], [rec("a", 0), rec("b", 1), rec("b", 1)], [rec("a", 0), rec("x", 1)]],
    ids=["missing-row", "extra-row", "other-value"],
)
def test_divergent_reads(plain):
    events = [send("a", 0), send("b", 1)]
    report = check(events, [rec("a", 0), rec("b", 1)], plain_log=plain)
    assert_only(report, "divergent_reads")
    assert report.divergent_reads[0].details["position"] == ("t", 0, 1)


def test_unknown_event_type_is_refused():
    with pytest.raises(ValueError, match="unknown type"):
        check([{"type": "sned", "process": "w", "time": 0.0}], [])


def test_poll_skip():
    events = [send(v, outcome="unknown") for v in "abc"] + [poll("c", rec("a", 0)), poll("c", rec("c", 2))]
    report = check(events, [rec("a", 0), rec("b", 1), rec("c", 2)])
    assert_only(report, "poll_skips")
    assert report.poll_skips[0].details["skipped"] == [1]


def test_load_events_drops_a_truncated_last_line(tmp_path):
    first, second = tmp_path / "w1.jsonl", tmp_path / "w2.jsonl"
    first.write_text(json.dumps(send("a", 0)) + "\n\n" + json.dumps(poll("c", rec("a", 0))) + '\n{"type": "se')
    # Killed in the middle of a multi-byte character.
    second.write_bytes(json.dumps(send("b", 1)).encode() + b'\n{"value": "\xc3')
    assert [e["type"] for e in load_events([first, second])] == ["send", "poll", "send"]
    first.write_text('{"type": "se\n' + json.dumps(send("a", 0)) + "\n")
    with pytest.raises(ValueError, match="line 1"):
        load_events([first])
