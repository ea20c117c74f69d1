"""Jepsen-style checks of a recorded Kafka-like history (after jepsen.tests.kafka).

Worker processes record what they did and what they were told as JSON lines (see `load_events`); once every
worker has stopped, the whole store is read back with read_committed as `final_log`. `check` compares the two
and reports, per kind, every anomaly it can prove:

- lost_writes: a definitely committed value missing from the final log, or a value some consumer polled (so
  it was committed) missing from it while nothing else is stored where it was polled (so a history whose
  records were removed by retention or compaction reports those as lost; the other checks tolerate such
  removals);
- duplicates: a value observed at more than one position (or stored twice at one position);
- inconsistent_offsets: one position observed with two different values, a value acknowledged at one
  position but stored elsewhere, or a `write(df)` whose rows are not exactly at the offsets it was told;
- aborted_reads: a value read (polled or in the final log) whose send definitely did not commit, or that
  nobody sent at all (a phantom);
- torn_transactions: a transaction or `write(df)` of unknown outcome of which the final log holds some
  values but not all (each is one commit: all or nothing);
- non_monotonic_polls / poll_skips: a consumer's position moving backwards, or jumping over records the
  final log still holds, without an assign or seek in between;
- non_monotonic_sends: a producer's acknowledged offsets in a partition not increasing in send order;
- non_monotonic_commits: a group's committed offset for a partition going backwards: a successful commit
  that started after another one had returned commits a lower offset, or a successful commit is above the
  group's final committed offset (the history never resets offsets);
- divergent_reads: a second reading of the final table (a plain Delta reader) that differs from `final_log`.

Events (JSON objects with `type`, `process` and `time`):

- send: `value`, `topic`, `partition`, `offset`, `outcome` (ok / failed / unknown), `txn` (the transaction
  it belongs to, or null);
- txn: `txn`, `outcome` (committed / aborted / unknown);
- write: one `store.write(df)`, `write` naming it; recorded before the call with `topic`, `values` (every
  row's value) and outcome unknown, then with its `outcome` (ok / failed / unknown) and, when ok, `ranges`
  ({"topic/partition": [start, end)}). A write is all or nothing, like a transaction;
- poll: `records` ([{topic, partition, offset, value}]);
- assign: `partitions` ([[topic, partition]]); with `added` true only these partitions restart (the
  listener's on_partitions_assigned), else the process's whole assignment does;
- seek: `topic`, `partition`, `offset`;
- commit: `group`, `offsets` ({"topic/partition": next offset}), `outcome`, and optionally `start` (the time
  the call began; without it the commit is left out of the real-time order check);
- maintain: one maintenance run, `outcome` (ok / failed / unknown); counted only;
- error: an error a worker recovered from (`operation`, `error`, `message`); counted only.

An unknown outcome (send unknown, transaction unknown or never ended) is never an anomaly by itself: such a
value may legitimately be present once or absent. Everything here is a pure function of plain dicts; nothing
needs Spark.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

Position = tuple[str, int, int]  # (topic, partition, offset)
TopicPart = tuple[str, int]

# The fate of a value: whether its send definitely made it into the log, definitely did not, or may have.
COMMITTED, FAILED, UNKNOWN = "committed", "failed", "unknown"

_SEND_OUTCOMES = {"ok": COMMITTED, "failed": FAILED, "unknown": UNKNOWN}
_TXN_OUTCOMES = {"committed": COMMITTED, "aborted": FAILED, "unknown": UNKNOWN}
_WRITE_OUTCOMES = {"ok": "committed", "failed": "aborted", "unknown": "unknown"}
_EVENT_TYPES = {"send", "txn", "write", "poll", "assign", "seek", "commit", "maintain", "error"}

# What counts as one acknowledged operation of a history: an operation whose definite outcome its worker
# was told (an aborted transaction is one too; a poll counts when it returned records).
OPERATION_KINDS = ("sends", "txn_commits", "txn_aborts", "polls", "offset_commits", "writes", "maintenance_runs")


def operation_kind(event: dict) -> str | None:
    """The `OPERATION_KINDS` entry `event` completes, or None if it completes no acknowledged operation.

    An acknowledged plain send (a transactional send is acknowledged by its transaction), a committed or
    aborted transaction, a poll (polls are recorded only when they returned records), a successful offset
    commit, a successful `write(df)`, a successful maintenance run.
    """
    kind, outcome = event.get("type"), event.get("outcome")
    if kind == "send":
        return "sends" if outcome == "ok" and event.get("txn") is None else None
    if kind == "txn":
        return {"committed": "txn_commits", "aborted": "txn_aborts"}.get(outcome)
    if kind == "poll":
        return "polls"
    if kind == "commit":
        return "offset_commits" if outcome == "ok" else None
    if kind == "write":
        return "writes" if outcome == "ok" else None
    if kind == "maintain":
        return "maintenance_runs" if outcome == "ok" else None
    return None


def load_events(paths: Iterable[str | Path]) -> list[dict]:
    """Events of every JSON-lines file in `paths`, file after file, each file in its own line order.

    Blank lines are skipped. The last line of a file may be cut short, even inside a multi-byte character,
    because its worker may have been SIGKILLed while writing it; such a line is dropped. Any other line that
    is not a JSON object raises ValueError, since it means the recorder itself is broken. A missing file
    raises, so that a mistyped path cannot pass as an empty history.
    """
    events: list[dict] = []
    for path in paths:
        lines = [line for line in Path(path).read_bytes().splitlines() if line.strip()]
        for number, line in enumerate(lines, 1):
            try:
                event = json.loads(line.decode())
            except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
                if number == len(lines):
                    break
                raise ValueError(f"{path}: line {number} is not JSON: {line[:80]!r}") from None
            if not isinstance(event, dict):
                raise ValueError(f"{path}: line {number} is not a JSON object: {line[:80]!r}")
            events.append(event)
    return events


@dataclass(frozen=True)
class Anomaly:
    """One proven violation: a readable `message` and the facts behind it in `details`."""

    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


@dataclass
class Report:
    """Every anomaly found, one list per kind, plus the last committed consumer offsets and counts.

    `committed_offsets` maps (group, topic, partition) to the next offset of the latest (by event time) commit
    with outcome ok. `stats` holds the fates (committed, failed, unknown) of the values of plain sends and
    of all values (sends, transactions, writes), transactions and writes per outcome (one whose end was
    never recorded counts as unknown), polls, polled records, offset commits, maintenance runs and
    recovered errors per outcome or error name, and the final log size.
    """

    KINDS: ClassVar[tuple[str, ...]] = (
        "lost_writes",
        "duplicates",
        "inconsistent_offsets",
        "aborted_reads",
        "torn_transactions",
        "non_monotonic_polls",
        "non_monotonic_sends",
        "non_monotonic_commits",
        "poll_skips",
        "divergent_reads",
    )

    lost_writes: list[Anomaly] = field(default_factory=list)
    duplicates: list[Anomaly] = field(default_factory=list)
    inconsistent_offsets: list[Anomaly] = field(default_factory=list)
    aborted_reads: list[Anomaly] = field(default_factory=list)
    torn_transactions: list[Anomaly] = field(default_factory=list)
    non_monotonic_polls: list[Anomaly] = field(default_factory=list)
    non_monotonic_sends: list[Anomaly] = field(default_factory=list)
    non_monotonic_commits: list[Anomaly] = field(default_factory=list)
    poll_skips: list[Anomaly] = field(default_factory=list)
    divergent_reads: list[Anomaly] = field(default_factory=list)
    committed_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True iff no anomaly of any kind was found."""
        return not any(getattr(self, kind) for kind in self.KINDS)

    def counts(self) -> dict[str, int]:
        """Number of anomalies per kind, in `KINDS` order."""
        return {kind: len(getattr(self, kind)) for kind in self.KINDS}

    def summary(self, examples: int = 3) -> str:
        """Multi-line text: the verdict, the stats, then the count and first `examples` messages of each kind."""
        lines = [f"history check: {'ok' if self.ok else f'{sum(self.counts().values())} anomalies'}"]
        lines.append("stats: " + ", ".join(f"{key}={value}" for key, value in self.stats.items()))
        for kind, count in self.counts().items():
            lines.append(f"{kind}: {count}")
            lines += [f"  - {anomaly}" for anomaly in getattr(self, kind)[:examples]]
            if count > examples:
                lines.append(f"  ... and {count - examples} more")
        return "\n".join(lines)


def check(
    events: Iterable[dict],
    final_log: Iterable[dict],
    *,
    final_committed: Mapping[tuple[str, str, int], int] | None = None,
    plain_log: Iterable[dict] | None = None,
) -> Report:
    """Check a history against the final log; see the module docstring for what each kind means.

    `events` may interleave processes arbitrarily but must keep each process's own events in order.
    `final_log` is every record the store holds at the end, read with read_committed. `final_committed`,
    when given, is each (group, topic, partition)'s committed offset at the end, read from the store;
    `plain_log`, when given, is the same table read by another reader, compared with `final_log`. Raises
    ValueError on an event of unknown type or outcome rather than guessing what it meant.
    """
    events = list(events)
    for index, event in enumerate(events):
        if event.get("type") not in _EVENT_TYPES:
            raise ValueError(f"event #{index} has unknown type: {event!r}")
    final = [(_position(record), record["value"]) for record in final_log]
    report = Report()

    writes = _writes(events)
    txn_outcomes = _txn_outcomes(events)
    write_outcomes = {name: _WRITE_OUTCOMES[outcome] for name, outcome in _write_outcomes(events, writes).items()}
    unit_outcomes = {**txn_outcomes, **write_outcomes}
    # A write's rows are sends of one transaction named after the write: all of them commit or none.
    sends = [event for event in events if event["type"] == "send"]
    sends += [
        {**_send_of(write), "value": value, "txn": name} for name, write in writes.items() for value in write["values"]
    ]
    send_fates = [_send_fate(send, unit_outcomes) for send in sends]
    value_fates: dict[str, str] = {}
    for send, fate in zip(sends, send_fates, strict=True):
        value_fates[send["value"]] = _combine(value_fates.get(send["value"]), fate)

    # Every observation of a position: what it held and who saw it, to find positions with two values.
    holders: dict[Position, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    stored: dict[str, list[Position]] = defaultdict(list)  # value -> its positions in final_log, repeats kept
    polled: dict[str, set[tuple[str, Position]]] = defaultdict(set)  # value -> (process, position)
    acked: dict[str, set[tuple[str, Position]]] = defaultdict(set)  # value -> (process, position)
    for position, value in final:
        stored[value].append(position)
        holders[position][value].add("final_log")
    for event in events:
        if event["type"] == "poll":
            for record in event["records"]:
                polled[record["value"]].add((event["process"], _position(record)))
                holders[_position(record)][record["value"]].add(f"poll by {event['process']}")
    for send, fate in zip(sends, send_fates, strict=True):
        # Only a committed send's offset is a fact about the log: an aborted transaction's offset may be
        # reused by the store, and a failed or unknown send was never told one.
        if fate == COMMITTED and send.get("offset") is not None:
            position = _position(send)
            acked[send["value"]].add((send["process"], position))
            holders[position][send["value"]].add(f"ack to {send['process']}")

    for value, fate in value_fates.items():
        if fate == COMMITTED and value not in stored:
            report.lost_writes.append(Anomaly(f"{value!r} was committed but is not in the final log", {"value": value}))
    for value in sorted(polled.keys() - stored.keys()):
        # Where another value is stored at the position it was polled from, the offset is inconsistent.
        if value_fates.get(value) == UNKNOWN and all(
            set(holders[position]) <= {value} for _, position in polled[value]
        ):
            readers = ", ".join(f"{process} at {_fmt(position)}" for process, position in sorted(polled[value]))
            report.lost_writes.append(
                Anomaly(f"{value!r} was polled ({readers}) but is not in the final log", {"value": value})
            )

    for value in stored.keys() | polled.keys():
        in_log = Counter(stored.get(value, []))
        positions = set(in_log) | {position for _, position in polled.get(value, ())}
        repeated = sorted(position for position, count in in_log.items() if count > 1)
        if len(positions) > 1 or repeated:
            report.duplicates.append(
                Anomaly(
                    f"{value!r} is at {_fmt_all(positions)}"
                    + (f", stored more than once at {_fmt_all(repeated)}" if repeated else ""),
                    {"value": value, "positions": sorted(positions), "repeated": repeated},
                )
            )

    for position, values in holders.items():
        if len(values) > 1:
            seen = "; ".join(f"{value!r} ({', '.join(sorted(sources))})" for value, sources in values.items())
            report.inconsistent_offsets.append(
                Anomaly(
                    f"{_fmt(position)} holds {len(values)} values: {seen}",
                    {"position": position, "values": {value: sorted(sources) for value, sources in values.items()}},
                )
            )
    for value, acks in acked.items():
        for process, position in sorted(acks):
            if value in stored and position not in stored[value]:
                report.inconsistent_offsets.append(
                    Anomaly(
                        f"{value!r} was acknowledged to {process} at {_fmt(position)}"
                        f" but is stored at {_fmt_all(stored[value])}",
                        {"value": value, "acked": position, "stored": sorted(stored[value])},
                    )
                )
    _check_write_ranges(events, writes, stored, report)

    for value in stored.keys() | polled.keys():
        fate = value_fates.get(value)
        if fate not in (None, FAILED):
            continue
        where = [f"final log at {_fmt_all(stored[value])}"] if value in stored else []
        where += [f"polled by {process} at {_fmt(position)}" for process, position in sorted(polled.get(value, ()))]
        what = "was never sent (phantom)" if fate is None else "did not commit"
        report.aborted_reads.append(
            Anomaly(f"{value!r} {what} but was read: {'; '.join(where)}", {"value": value, "phantom": fate is None})
        )

    _check_atomicity(sends, unit_outcomes, stored, report)
    plain_values = {send["value"] for send in sends if send.get("txn") is None}
    _check_polls(events, final, report)
    _check_sends(sends, send_fates, report)
    _check_commits(events, final_committed, report)
    if plain_log is not None:
        _check_plain_read(final, plain_log, report)
    report.committed_offsets = _committed_offsets(events)
    report.stats = {
        "sends": dict(Counter(fate for value, fate in value_fates.items() if value in plain_values)),
        "values": dict(Counter(value_fates.values())),
        "txns": dict(Counter(txn_outcomes.values())),
        "writes": dict(Counter(_write_outcomes(events, writes).values())),
        "polls": sum(1 for event in events if event["type"] == "poll"),
        "polled_records": sum(len(event["records"]) for event in events if event["type"] == "poll"),
        "commits": dict(Counter(event["outcome"] for event in events if event["type"] == "commit")),
        "maintenance": dict(Counter(_maintenance_outcomes(events).values())),
        "errors": dict(Counter(event["error"] for event in events if event["type"] == "error")),
        "final_log": len(final),
    }
    # Sets were iterated above; sort so that two runs over the same history give the same report.
    for kind in ("duplicates", "aborted_reads", "torn_transactions"):
        getattr(report, kind).sort(key=lambda anomaly: str(anomaly.details["value"]))
    return report


def _writes(events: list[dict]) -> dict[str, dict]:
    """Each write(df) by name: the event recorded before it started (process, time, topic, values)."""
    writes: dict[str, dict] = {}
    for event in events:
        if event["type"] == "write":
            _lookup(_SEND_OUTCOMES, event)  # validates the outcome
            if "values" in event:
                writes.setdefault(event["write"], event)
    return writes


def _write_outcomes(events: list[dict], writes: dict[str, dict]) -> dict[str, str]:
    """Outcome ("ok", "failed" or "unknown") of every write; a later unknown never hides a definite one."""
    outcomes = dict.fromkeys(writes, "unknown")
    for event in events:
        if event["type"] == "write" and (event["outcome"] != "unknown" or event["write"] not in outcomes):
            outcomes[event["write"]] = event["outcome"]
    return outcomes


def _maintenance_outcomes(events: list[dict]) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for index, event in enumerate(events):
        if event["type"] == "maintain":
            name = event.get("run", f"#{index}")
            if event["outcome"] != "unknown" or name not in outcomes:
                outcomes[name] = event["outcome"]
    return outcomes


def _send_of(write: dict) -> dict:
    """The fields a send derived from one row of `write` shares with its other rows."""
    return {
        "type": "send",
        "process": write["process"],
        "time": write.get("time", 0.0),
        "topic": write["topic"],
        "partition": None,
        "offset": None,
        "outcome": "unknown",
    }


def _check_write_ranges(
    events: list[dict], writes: dict[str, dict], stored: dict[str, list[Position]], report: Report
) -> None:
    """A successful write was told each partition's offsets: its rows fill exactly those offsets."""
    for event in events:
        if event["type"] != "write" or event["outcome"] != "ok" or "ranges" not in event:
            continue
        name = event["write"]
        values = writes.get(name, {}).get("values")
        if values is None:
            continue  # the event naming its rows was lost with a truncated log line
        told: set[Position] = set()
        for where, (start, end) in event["ranges"].items():
            topic, _, partition = where.rpartition("/")
            told.update((topic, int(partition), offset) for offset in range(start, end))
        if len(told) != len(values):
            report.inconsistent_offsets.append(
                Anomaly(
                    f"write {name} of {len(values)} rows was told {len(told)} offsets",
                    {"write": name, "rows": len(values), "offsets": len(told)},
                )
            )
        outside = sorted(
            (value, position) for value in values for position in stored.get(value, []) if position not in told
        )
        for value, position in outside:
            report.inconsistent_offsets.append(
                Anomaly(
                    f"{value!r} of write {name} is stored at {_fmt(position)}, outside the offsets it was told",
                    {"write": name, "value": value, "stored": position},
                )
            )


def _check_atomicity(
    sends: list[dict], outcomes: dict[str, str], stored: dict[str, list[Position]], report: Report
) -> None:
    """A transaction or write of unknown outcome is in the final log whole or not at all."""
    units: dict[str, list[str]] = defaultdict(list)
    for send in sends:
        if send.get("txn") is not None and outcomes.get(send["txn"]) == "unknown":
            units[send["txn"]].append(send["value"])
    for name, values in units.items():
        present = [value for value in values if value in stored]
        if present and len(present) != len(values):
            missing = [value for value in values if value not in stored]
            report.torn_transactions.append(
                Anomaly(
                    f"{name} (outcome unknown) is only partly in the final log: {len(present)} of {len(values)}"
                    f" values, missing {missing[:3]!r}{' ...' if len(missing) > 3 else ''}",
                    {"value": name, "present": present, "missing": missing},
                )
            )


def _check_commits(
    events: list[dict], final_committed: Mapping[tuple[str, str, int], int] | None, report: Report
) -> None:
    """A group's committed offset per partition never goes backwards (nothing in a history resets it).

    Commits are ordered in real time only when one began after the other returned: overlapping commits of
    two processes may land either way round.
    """
    commits: dict[tuple[str, str, int], list[tuple[float, float | None, int, str]]] = defaultdict(list)
    for event in events:
        if event["type"] != "commit" or event["outcome"] != "ok":
            continue
        for name, offset in event["offsets"].items():
            topic, _, partition = name.rpartition("/")
            key = (event["group"], topic, int(partition))
            commits[key].append((event["time"], event.get("start"), offset, event["process"]))
            if final_committed is not None and offset > final_committed.get(key, -1):
                report.non_monotonic_commits.append(
                    Anomaly(
                        f"{event['process']} committed {offset} for {topic}/{partition} (group {event['group']}) but"
                        f" the group's final committed offset is {final_committed.get(key)}",
                        {"key": key, "offset": offset, "final": final_committed.get(key)},
                    )
                )
    for key, entries in commits.items():
        by_end = sorted(entries, key=lambda entry: entry[0])
        ends = [end for end, _, _, _ in by_end]
        best: list[tuple[int, float, str]] = []  # running maximum of (offset, end, process) in end order
        for end, _, offset, process in by_end:
            best.append(max(best[-1], (offset, end, process)) if best else (offset, end, process))
        for _, start, offset, process in entries:
            if start is None:
                continue  # not ordered against anything
            before = bisect_left(ends, start)
            if before and best[before - 1][0] > offset:
                high, high_end, high_process = best[before - 1]
                group, topic, partition = key
                report.non_monotonic_commits.append(
                    Anomaly(
                        f"{process} committed {offset} for {topic}/{partition} (group {group}) after {high_process}"
                        f" had committed {high} (returned at {high_end:.3f}, this one began at {start:.3f})",
                        {"key": key, "offset": offset, "earlier": high, "process": process},
                    )
                )


def _check_plain_read(final: list[tuple[Position, str]], plain_log: Iterable[dict], report: Report) -> None:
    """Both readings of the final table hold the same value at the same positions, as often."""
    expected = Counter(final)
    seen = Counter((_position(record), record["value"]) for record in plain_log)
    positions = {position for position, _ in (expected - seen) + (seen - expected)}
    for position in sorted(positions):
        lakelog = sorted(value for (where, value) in expected.elements() if where == position)
        plain = sorted(value for (where, value) in seen.elements() if where == position)
        report.divergent_reads.append(
            Anomaly(
                f"{_fmt(position)}: read_committed read {lakelog!r}, the plain read {plain!r}",
                {"position": position, "final_log": lakelog, "plain": plain},
            )
        )


def _txn_outcomes(events: list[dict]) -> dict[str, str]:
    """Outcome ("committed", "aborted" or "unknown") of every transaction attempt that a txn event or a send
    names; one whose end was never recorded is unknown."""
    outcomes = {event["txn"]: "unknown" for event in events if event["type"] == "send" and event.get("txn") is not None}
    for event in events:
        if event["type"] == "txn":
            _lookup(_TXN_OUTCOMES, event)  # validates the outcome
            # A later "unknown" (say, a recorder giving up waiting) must not hide a definite outcome.
            if event["outcome"] != "unknown" or event["txn"] not in outcomes:
                outcomes[event["txn"]] = event["outcome"]
    return outcomes


def _send_fate(send: dict, txn_outcomes: dict[str, str]) -> str:
    """A transactional send shares its transaction's fate; its own outcome says nothing about that."""
    if send.get("txn") is not None:
        return _TXN_OUTCOMES[txn_outcomes[send["txn"]]]
    return _lookup(_SEND_OUTCOMES, send)


def _combine(previous: str | None, fate: str) -> str:
    """Fate of a value sent more than once (values should be unique, but a retry must not cause false alarms):
    committed if any send committed, failed only if every send failed."""
    if previous is None:
        return fate
    if COMMITTED in (previous, fate):
        return COMMITTED
    return FAILED if previous == fate == FAILED else UNKNOWN


def _check_polls(events: list[dict], final: list[tuple[Position, str]], report: Report) -> None:
    """Consumer positions must strictly increase per process and partition, without jumping over stored records.

    Tracking of a process restarts at every assign (its position may go back to the committed offset): for
    the listed partitions only when the assign says they were `added`, else for all; and, for one
    partition, at a seek. The first poll after a restart is not compared with anything.
    """
    stored_offsets: dict[TopicPart, list[int]] = defaultdict(list)
    for (topic, partition, offset), _ in final:
        stored_offsets[(topic, partition)].append(offset)
    for offsets in stored_offsets.values():
        offsets.sort()

    last: dict[str, dict[TopicPart, tuple[int, str]]] = defaultdict(dict)  # process -> tp -> (offset, value)
    for event in events:
        process = event.get("process")
        if event["type"] == "assign" and event.get("added"):
            for topic, partition in event["partitions"]:
                last[process].pop((topic, partition), None)
        elif event["type"] == "assign":
            # Listed partitions restart, unlisted ones are forgotten: either way, nothing is remembered.
            last[process].clear()
        elif event["type"] == "seek":
            last[process].pop((event["topic"], event["partition"]), None)
        elif event["type"] == "poll":
            for record in event["records"]:
                topic, partition, offset = _position(record)
                previous = last[process].get((topic, partition))
                last[process][(topic, partition)] = (offset, record["value"])
                if previous is None:
                    continue
                before, before_value = previous
                details = {"process": process, "topic": topic, "partition": partition, "from": before, "to": offset}
                if offset <= before:
                    report.non_monotonic_polls.append(
                        Anomaly(
                            f"{process} polled {topic}/{partition}@{offset} ({record['value']!r})"
                            f" after @{before} ({before_value!r})",
                            details,
                        )
                    )
                    continue
                offsets = stored_offsets.get((topic, partition), [])
                skipped = offsets[bisect_right(offsets, before) : bisect_left(offsets, offset)]
                if skipped:
                    report.poll_skips.append(
                        Anomaly(
                            f"{process} polled {topic}/{partition}@{before} then @{offset},"
                            f" skipping {len(skipped)} stored record(s) from @{skipped[0]}",
                            {**details, "skipped": skipped},
                        )
                    )


def _check_sends(sends: list[dict], fates: list[str], report: Report) -> None:
    """Committed offsets must strictly increase in send order per process and partition.

    Non-transactional and transactional sends form separate sequences, as the two rules are stated
    separately; a process mixing both is not held to an order between them.
    """
    last: dict[tuple[str, str, int, bool], tuple[int, str]] = {}
    for send, fate in zip(sends, fates, strict=True):
        if fate != COMMITTED or send.get("offset") is None:
            continue
        transactional = send.get("txn") is not None
        key = (send["process"], send["topic"], send["partition"], transactional)
        previous = last.get(key)
        last[key] = (send["offset"], send["value"])
        if previous is not None and send["offset"] <= previous[0]:
            kind = "committed txn sends" if transactional else "acknowledged sends"
            report.non_monotonic_sends.append(
                Anomaly(
                    f"{send['process']}'s {kind} to {send['topic']}/{send['partition']}: {send['value']!r}"
                    f" got @{send['offset']} after {previous[1]!r} got @{previous[0]}",
                    {"process": send["process"], "values": [previous[1], send["value"]]},
                )
            )


def _committed_offsets(events: list[dict]) -> dict[tuple[str, str, int], int]:
    """Next offset of the latest successful commit per (group, topic, partition); equal times keep input order."""
    latest: dict[tuple[str, str, int], tuple[float, int, int]] = {}  # key -> (time, event index, offset)
    for index, event in enumerate(events):
        if event["type"] != "commit" or event["outcome"] != "ok":
            continue
        for name, offset in event["offsets"].items():
            # Split on the last "/" since a topic name may itself contain one.
            topic, _, partition = name.rpartition("/")
            key = (event["group"], topic, int(partition))
            # The event index is unique, so it alone breaks ties between equal times.
            candidate = (event.get("time", 0.0), index, offset)
            if key not in latest or candidate > latest[key]:
                latest[key] = candidate
    return {key: value[2] for key, value in latest.items()}


def _lookup(table: dict[str, str], event: dict) -> str:
    try:
        return table[event["outcome"]]
    except KeyError:
        raise ValueError(f"unexpected outcome in {event!r}") from None


def _position(record: dict) -> Position:
    return (record["topic"], int(record["partition"]), int(record["offset"]))


def _fmt(position: Position) -> str:
    topic, partition, offset = position
    return f"{topic}/{partition}@{offset}"


def _fmt_all(positions: Iterable[Position]) -> str:
    return ", ".join(_fmt(position) for position in sorted(positions))
