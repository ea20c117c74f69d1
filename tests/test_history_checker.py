"""The history checker on hand-built histories: one clean, then the smallest history showing each anomaly."""

from __future__ import annotations

import json

import pytest

from tests.history_checker import Report, check, load_events


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


def commit(offset: int, outcome: str, time: float) -> dict:
    return {
        "type": "commit",
        "process": "c1",
        "time": time,
        "group": "g",
        "offsets": {"t/0": offset},
        "outcome": outcome,
    }


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
    ]
    report = check(events, [rec("a", 0), rec("b", 1), rec("d", 2), rec("h", 5)])
    assert report.ok, report.summary()
    assert report.committed_offsets == {("g", "t", 0): 2}
    assert report.stats == {
        "sends": {"ok": 5, "unknown": 2, "failed": 1},
        "txns": {"committed": 1, "aborted": 1, "unknown": 1},
        "polls": 5,
        "polled_records": 9,
        "final_log": 4,
    }


@pytest.mark.parametrize(
    "events",
    [[send("v", 0)], [send("v", txn="T"), txn("T", "committed")]],
    ids=["acknowledged", "committed-txn"],
)
def test_lost_write(events):
    assert_only(check(events, []), "lost_writes")


@pytest.mark.parametrize(
    ("events", "final"),
    [
        ([send("v", outcome="unknown")], [rec("v", 0), rec("v", 1)]),
        ([send("v", outcome="unknown"), poll("c1", rec("v", 0)), poll("c2", rec("v", 1))], []),
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
