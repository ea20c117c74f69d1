"""Jepsen-style checks of a recorded Kafka-like history (after jepsen.tests.kafka).

Worker processes record what they did and what they were told as JSON lines (see `load_events`); once every
worker has stopped, the whole store is read back with read_committed as `final_log`. `check` compares the two
and reports, per kind, every anomaly it can prove:

- lost_writes: a definitely committed value missing from the final log (so a history whose records were
  removed by retention or compaction reports those as lost; the other checks tolerate such removals);
- duplicates: a value observed at more than one position (or stored twice at one position);
- inconsistent_offsets: one position observed with two different values, or a value acknowledged at one
  position but stored elsewhere;
- aborted_reads: a value read (polled or in the final log) whose send definitely did not commit, or that
  nobody sent at all (a phantom);
- non_monotonic_polls / poll_skips: a consumer's position moving backwards, or jumping over records the
  final log still holds, without an assign or seek in between;
- non_monotonic_sends: a producer's acknowledged offsets in a partition not increasing in send order.

An unknown outcome (send unknown, transaction unknown or never ended) is never an anomaly by itself: such a
value may legitimately be present once or absent. Everything here is a pure function of plain dicts; nothing
needs Spark.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

Position = tuple[str, int, int]  # (topic, partition, offset)
TopicPart = tuple[str, int]

# The fate of a value: whether its send definitely made it into the log, definitely did not, or may have.
COMMITTED, FAILED, UNKNOWN = "committed", "failed", "unknown"

_SEND_OUTCOMES = {"ok": COMMITTED, "failed": FAILED, "unknown": UNKNOWN}
_TXN_OUTCOMES = {"committed": COMMITTED, "aborted": FAILED, "unknown": UNKNOWN}
_EVENT_TYPES = {"send", "txn", "poll", "assign", "seek", "commit"}


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
    with outcome ok. `stats` holds sends per outcome, transactions per outcome (a transaction whose end was
    never recorded counts as unknown), polls, polled records and the final log size.
    """

    KINDS: ClassVar[tuple[str, ...]] = (
        "lost_writes",
        "duplicates",
        "inconsistent_offsets",
        "aborted_reads",
        "non_monotonic_polls",
        "non_monotonic_sends",
        "poll_skips",
    )

    lost_writes: list[Anomaly] = field(default_factory=list)
    duplicates: list[Anomaly] = field(default_factory=list)
    inconsistent_offsets: list[Anomaly] = field(default_factory=list)
    aborted_reads: list[Anomaly] = field(default_factory=list)
    non_monotonic_polls: list[Anomaly] = field(default_factory=list)
    non_monotonic_sends: list[Anomaly] = field(default_factory=list)
    poll_skips: list[Anomaly] = field(default_factory=list)
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


def check(events: Iterable[dict], final_log: Iterable[dict]) -> Report:
    """Check a history against the final log; see the module docstring for what each kind means.

    `events` may interleave processes arbitrarily but must keep each process's own events in order.
    `final_log` is every record the store holds at the end, read with read_committed. Raises ValueError
    on an event of unknown type or outcome rather than guessing what it meant.
    """
    events = list(events)
    for index, event in enumerate(events):
        if event.get("type") not in _EVENT_TYPES:
            raise ValueError(f"event #{index} has unknown type: {event!r}")
    final = [(_position(record), record["value"]) for record in final_log]
    report = Report()

    txn_outcomes = _txn_outcomes(events)
    sends = [event for event in events if event["type"] == "send"]
    send_fates = [_send_fate(send, txn_outcomes) for send in sends]
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

    _check_polls(events, final, report)
    _check_sends(sends, send_fates, report)
    report.committed_offsets = _committed_offsets(events)
    report.stats = {
        "sends": dict(Counter(send["outcome"] for send in sends)),
        "txns": dict(Counter(txn_outcomes.values())),
        "polls": sum(1 for event in events if event["type"] == "poll"),
        "polled_records": sum(len(event["records"]) for event in events if event["type"] == "poll"),
        "final_log": len(final),
    }
    # Sets were iterated above; sort so that two runs over the same history give the same report.
    for kind in ("duplicates", "aborted_reads"):
        getattr(report, kind).sort(key=lambda anomaly: str(anomaly.details["value"]))
    return report


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

    Tracking of a process restarts at every assign (its position may go back to the committed offset) and,
    for one partition, at a seek. The first poll after a restart is not compared with anything.
    """
    stored_offsets: dict[TopicPart, list[int]] = defaultdict(list)
    for (topic, partition, offset), _ in final:
        stored_offsets[(topic, partition)].append(offset)
    for offsets in stored_offsets.values():
        offsets.sort()

    last: dict[str, dict[TopicPart, tuple[int, str]]] = defaultdict(dict)  # process -> tp -> (offset, value)
    for event in events:
        process = event.get("process")
        if event["type"] == "assign":
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
