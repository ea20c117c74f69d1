"""Offset reservations: how a long write claims its offsets once, before its files exist.

Offsets live inside the data files, so a writer whose files take longer to
write than the gap between other commits (a Spark ``write(df)`` beside a
busy producer) would re-plan and rewrite them forever. Kafka's answer to a
long writer is the transaction: the last stable offset (LSO) holds
``read_committed`` readers at the first offset of the oldest open
transaction while other producers append after it. A reservation is that:

    reserve   one small commit: each partition's range [first, end) is taken
              (its end marker moves to ``end``: producers append after it)
      |
    write     the data files, numbered inside the ranges (Spark, pyarrow)
      |
    fill      one commit adds the files and resolves the reservation; it
              rebases over every other append (its offsets are its own), so
              the files are never rewritten
      |
    (abort)   a failed writer, or anybody once the deadline passed, resolves
              the reservation without files: an aborted range, skipped by
              readers as Kafka's consumers skip an aborted transaction

While a reservation is pending, readers end at its first offset (the
partition's last stable offset, :func:`stable_end`); a fill and an abort of
the same reservation exclude each other (both set its ``first`` id: the
loser's conflict rule re-plans and finds it resolved).

Where it is kept: Delta application transactions (``txn`` actions), which
every Delta snapshot and checkpoint keeps, so no reader needs lakelog to see
them and nothing shows in the table's rows. Each partition has numbered
slots, reused once resolved, so the number of ids stays bounded by how many
reservations were ever pending at once on a partition:

* ``lakelog.rsv.<topic id>.<partition>`` -- how many slots the partition has;
* ``lakelog.rsv.<topic id>.<partition>.<slot>.first`` / ``.end`` -- the range;
  the slot is pending while ``first < end`` and free once ``first == end``
  (resolving sets ``first`` to ``end``: both only ever grow);
* ``lakelog.rsv.<topic id>.<partition>.<slot>.until`` -- the deadline (ms
  since the epoch, the writer's clock; a heartbeat moves it).

Deadlines compare wall clocks of different machines. That only decides when
a dead writer's range is given up: a live writer whose reservation was
aborted early fails its fill with :class:`ReservationLostError` and nothing
of it is visible; no offset is ever given twice either way.

Everything here is pure (functions of a :class:`TableState`); the commits
are :class:`engine.commit.committer.Committer`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from lakelog.engine.commit.actions import Commit, Txn
from lakelog.engine.commit.conflicts import REBASE, Resolution, Verdict
from lakelog.engine.commit.markers import (
    Reservation,
    aborted_marker_id,
    end_marker_id,
    reservation_slots,
    slots_id,
)
from lakelog.engine.commit.state import TableState
from lakelog.engine.topics import TopicPartition, topics_from_properties

# Kafka's transaction.timeout.ms default: how long a reservation lives without a heartbeat.
DEFAULT_TIMEOUT_MS = 60_000
# The most reservations pending at once on one partition.
MAX_SLOTS = 64


def plan_reservations(
    state: TableState,
    ends: Mapping[TopicPartition, int],
    counts: Mapping[TopicPartition, int],
    until_ms: int,
    now_ms: int,
) -> tuple[list[Reservation], list[Txn]]:
    """Reservations of ``counts[tp]`` offsets from ``ends[tp]`` for each partition with records,
    and the txn actions that take them (slots, ranges, deadlines and the new end markers).

    Raises ValueError when a partition already has :data:`MAX_SLOTS` pending reservations.
    """
    reservations: list[Reservation] = []
    actions: list[Txn] = []
    for tp, count in sorted(counts.items()):
        if count <= 0:
            continue
        topic = state.topics[tp.topic]
        slots = reservation_slots(state.apps.get, tp, topic.topic_id)
        free = [r.slot for r in slots if r.first >= r.end]
        if free:
            slot = free[0]
        elif len(slots) < MAX_SLOTS:
            slot = len(slots)
            actions.append(Txn(slots_id(topic.topic_id, tp.partition), slot + 1, now_ms))
        else:
            raise ValueError(f"{tp} already has {MAX_SLOTS} pending reservations")
        first = ends[tp]
        reservation = Reservation(tp, topic.topic_id, slot, first, first + count, until_ms)
        reservations.append(reservation)
        actions += [
            Txn(app_id, value, now_ms)
            for app_id, value in zip(reservation.ids(), (first, first + count, until_ms), strict=True)
        ]
        actions.append(Txn(end_marker_id(topic.topic_id, tp.partition), first + count, now_ms))
    return reservations, actions


def resolve_actions(reservations: Iterable[Reservation], now_ms: int, *, aborted: bool = False) -> list[Txn]:
    """The txn actions that resolve ``reservations``: each slot's first offset moves to its
    end, which frees the slot; an aborted range is also recorded as such
    (:func:`engine.commit.markers.aborted_marker_id`), so that ``lakelog check`` and any
    Delta reader can tell it from a loss."""
    actions = [Txn(r.first_id(), r.end, now_ms) for r in reservations]
    if aborted:
        actions += [Txn(aborted_marker_id(r.topic_id, r.tp.partition, r.first), r.end, now_ms) for r in reservations]
    return actions


def extend_actions(reservations: Iterable[Reservation], until_ms: int, now_ms: int) -> list[Txn]:
    """The txn actions that move ``reservations``' deadline to ``until_ms`` (a heartbeat)."""
    return [Txn(r.until_id(), until_ms, now_ms) for r in reservations]


def all_pending(state: TableState) -> list[Reservation]:
    """Every pending reservation of the table, by partition and first offset."""
    return [
        r
        for name, topic in sorted(state.topics.items())
        for p in range(topic.partitions)
        for r in state.pending_reservations(TopicPartition(name, p))
    ]


def holds(state: TableState, reservation: Reservation) -> bool:
    """Whether ``reservation`` is still pending in ``state`` exactly as it was taken."""
    return any(r.same(reservation) for r in state.pending_reservations(reservation.tp))


def expired(state: TableState, now_ms: int) -> list[Reservation]:
    """The pending reservations whose deadline passed by ``now_ms``."""
    return [r for r in all_pending(state) if r.until_ms < now_ms]


def fill_verdict(winner: Commit, reservations: Collection[Reservation], app_ids: Collection[str]) -> Verdict:
    """A fill of ``reservations`` (setting ``app_ids`` too) after ``winner``: re-plan when the
    winner resolved one of them, set one of the app ids, changed the protocol or deleted
    or re-created one of their topics; else rebase -- its offsets are its own."""
    if winner.protocol is not None:
        return Verdict(Resolution.REPLAN, "it changed the table protocol")
    relied = {r.first_id() for r in reservations} | set(app_ids)
    taken = sorted(relied & set(winner.txns))
    if taken:
        return Verdict(Resolution.REPLAN, f"it set application transaction {taken[0]}")
    if winner.metadata is not None:
        topics = topics_from_properties(winner.metadata.configuration)
        for r in reservations:
            found = topics.get(r.tp.topic)
            if found is None or found.topic_id != r.topic_id:
                return Verdict(Resolution.REPLAN, f"it deleted or re-created topic {r.tp.topic!r}")
    return REBASE


def release_verdict(winner: Commit, reservations: Collection[Reservation]) -> Verdict:
    """An abort or heartbeat of ``reservations`` after ``winner``: re-plan when the winner
    resolved one of them or moved a deadline (the decision may have changed); else rebase."""
    if winner.protocol is not None:
        return Verdict(Resolution.REPLAN, "it changed the table protocol")
    relied = {i for r in reservations for i in (r.first_id(), r.until_id())}
    taken = sorted(relied & set(winner.txns))
    if taken:
        return Verdict(Resolution.REPLAN, f"it set application transaction {taken[0]}")
    return REBASE
