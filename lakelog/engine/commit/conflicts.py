"""What a commit does when another commit took the version it wanted: the conflict rules.

Each rule is a pure function of the winning commit and what the losing
commit relied on, and answers *rebase* (commit the same actions at the next
version: nothing it relied on changed) or *re-plan* (plan again on the new
state). The rules are narrower than Delta's own conflict checker
(``ConflictChecker`` in delta-io/delta and delta-rs, which looks at read
predicates over partitions) because lakelog knows what each commit relies on:

* an append relies on each partition's end offset (its records are numbered
  from it), its application transaction ids and the topic metadata. It
  re-plans when a winner added records at or past one of its planned start
  offsets (or a file without offset statistics) in one of its partitions,
  moved such a partition's end marker past it (an offset reservation takes
  offsets without a file), set one of its app ids, or changed metadata or
  protocol. A winner that
  only rearranged a partition's records (OPTIMIZE, log compaction,
  retention: they never remove a partition's newest records) leaves its end
  offset where it was, so the append rebases over it;
* a topic change (create, alter, grow, delete) relies on the metadata it
  replaces, and a deletion on every file of its topic;
* a maintenance step relies on the files it removes and its topic's
  identity, and one that moves log start offsets (retention, DeleteRecords) on
  no winner having moved one of them further (the start never moves back); it
  rebases over appends, as Delta's OPTIMIZE does.

The rules of a reservation's own commits (the commit adding its files, an
abort, a heartbeat) are in :mod:`engine.commit.reservations`.

Foreign writers (Spark SQL OPTIMIZE, delta-rs, a plain append) are winners
like any other: their commits are judged by the same rules.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from lakelog.engine.commit.actions import Commit
from lakelog.engine.topics import TopicPartition, topics_from_properties


class Resolution(enum.Enum):
    REBASE = "rebase"  # commit the same actions at the next version
    REPLAN = "replan"  # plan again against the new state
    CONFLICT = "conflict"  # the change is no longer valid at all (a maintenance step lost)


@dataclass(frozen=True)
class Verdict:
    resolution: Resolution
    reason: str = ""


REBASE = Verdict(Resolution.REBASE)


def _replan(reason: str) -> Verdict:
    return Verdict(Resolution.REPLAN, reason)


def append_verdict(
    winner: Commit,
    ends: Mapping[TopicPartition, int],
    app_ids: Collection[str],
    end_markers: Mapping[str, int] | None = None,
) -> Verdict:
    """An append that numbered partition ``tp``'s records from ``ends[tp]`` and sets or
    reads ``app_ids``, after ``winner`` took its version. ``end_markers`` maps the end
    marker id of each of its partitions to that start: a winner that moved one past it
    (a reservation takes offsets without adding a file) makes it re-plan too."""
    if winner.protocol is not None:
        return _replan("it changed the table protocol")
    if winner.metadata is not None:
        return _replan("it changed the table metadata (topics)")
    taken = sorted(set(app_ids) & set(winner.txns))
    if taken:
        return _replan(f"it set application transaction {taken[0]}")
    for marker, start in (end_markers or {}).items():
        moved = winner.txns.get(marker)
        if moved is not None and moved > start:
            return _replan(f"it took offsets up to {moved} ({marker})")
    for add in winner.adds:
        tp = add.tp
        if tp is None or tp not in ends:
            continue
        stats = add.file_stats()
        if not stats.has_offset_stats:
            return _replan(f"it added a file without offset statistics to {tp}")
        if stats.num_records and stats.max_offset >= ends[tp]:  # type: ignore[operator]
            return _replan(f"it appended offsets up to {stats.max_offset} to {tp}")
    return REBASE


def topic_change_verdict(winner: Commit, deleting: str | None = None) -> Verdict:
    """A topic metadata change (deleting topic ``deleting``, if set) after ``winner``."""
    if winner.protocol is not None or winner.metadata is not None:
        return _replan("it changed the table metadata (topics)")
    if deleting is not None:
        for action in (*winner.adds, *winner.removes):
            if action.tp is not None and action.tp.topic == deleting:
                return _replan(f"it changed the files of topic {deleting!r}")
    return REBASE


def record_verdict(winner: Commit) -> Verdict:
    """A commit recording an operation done outside the log (its commitInfo alone: VACUUM
    START/END) after ``winner``: it changes nothing, so it rebases over anything but a
    protocol change (after which the table must be checked again before it is written)."""
    if winner.protocol is not None:
        return _replan("it changed the table protocol")
    return REBASE


def maintenance_verdict(
    winner: Commit,
    removes: Collection[str],
    topic: str,
    topic_id: str,
    start_markers: Mapping[str, int] | None = None,
) -> Verdict:
    """A maintenance step of ``topic`` (id ``topic_id``) removing the (decoded) paths
    ``removes`` and setting the start markers ``start_markers`` (marker id -> log start),
    after ``winner``: CONFLICT when the winner removed one of those files, replaced the
    topic, or moved one of those log starts past the step's (landing it would move the
    start back); else rebase."""
    if winner.protocol is not None:
        return Verdict(Resolution.CONFLICT, "it changed the table protocol")
    for marker, start in (start_markers or {}).items():
        moved = winner.txns.get(marker)
        if moved is not None and moved > start:
            return Verdict(Resolution.CONFLICT, f"it moved the log start to {moved} ({marker})")
    wanted = set(removes)
    for remove in winner.removes:
        if unquote(remove.path) in wanted:
            return Verdict(Resolution.CONFLICT, f"it removed {remove.path}")
    if winner.metadata is not None:
        found = topics_from_properties(winner.metadata.configuration).get(topic)
        if found is None or found.topic_id != topic_id:
            return Verdict(Resolution.CONFLICT, f"it deleted or re-created topic {topic!r}")
    return REBASE
