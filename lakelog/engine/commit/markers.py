"""The per-partition facts lakelog keeps as Delta application transactions (``txn`` actions).

Every Delta snapshot and checkpoint keeps the newest version of each
``appId``, so these facts survive any Delta writer, checkpoint and log
cleanup, and no reader needs lakelog to see them:

* ``lakelog.end.<topic id>.<p>`` -- the partition's end offset (Kafka's log end
  offset), moved by every lakelog append and reservation;
* ``lakelog.start.<topic id>.<p>`` -- the log start offset retention or DeleteRecords set;
* ``lakelog.lost.<topic id>.<p>.<first>`` -- the end of a range a repair
  recorded as lost with its files;
* ``lakelog.aborted.<topic id>.<p>.<first>`` -- the end of a reserved range that
  was aborted (its offsets are never used; readers skip them);
* ``lakelog.rsv.<topic id>.<p>`` and ``lakelog.rsv.<topic id>.<p>.<slot>.first``
  / ``.end`` / ``.until`` -- offset reservations (:mod:`engine.commit.reservations`):
  how many slots the partition has, and each slot's range and deadline. A
  slot is pending while ``first < end`` and free once ``first == end``
  (resolving sets ``first`` to ``end``); the ids are reused, so they stay
  as few as the reservations ever pending at once on a partition.

A re-created topic has a new topic id, so its facts start over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lakelog.engine.topics import TopicPartition

RESERVATION_PREFIX = "lakelog.rsv."


def end_marker_id(topic_id: str, partition: int) -> str:
    """The Delta app id whose version is the committed end offset of a partition of the
    topic with id ``topic_id`` (a re-created topic has a new id, so its ends start over)."""
    return f"lakelog.end.{topic_id}.{partition}"


def start_marker_id(topic_id: str, partition: int) -> str:
    """The Delta app id whose version is the log start offset retention or DeleteRecords last
    set for a partition: rows below it are not records, whatever file holds them."""
    return f"lakelog.start.{topic_id}.{partition}"


def lost_marker_id(topic_id: str, partition: int, first: int) -> str:
    """The Delta app id whose version is the end of the offset range starting at ``first`` that
    a repair (``lakelog check --repair --drop-missing-files``) recorded as lost with its files."""
    return f"lakelog.lost.{topic_id}.{partition}.{first}"


def aborted_marker_id(topic_id: str, partition: int, first: int) -> str:
    """The Delta app id whose version is the end of the reserved range starting at ``first``
    that was aborted: a hole in the offsets that is not a loss (an aborted transaction's)."""
    return f"lakelog.aborted.{topic_id}.{partition}.{first}"


def slots_id(topic_id: str, partition: int) -> str:
    """The app id whose version is how many reservation slots the partition has."""
    return f"{RESERVATION_PREFIX}{topic_id}.{partition}"


def slot_id(topic_id: str, partition: int, slot: int, field: str) -> str:
    """The app id of one field (``first``, ``end``, ``until``) of a reservation slot."""
    return f"{RESERVATION_PREFIX}{topic_id}.{partition}.{slot}.{field}"


def is_reservation_id(app_id: str) -> bool:
    return app_id.startswith(RESERVATION_PREFIX)


@dataclass(frozen=True)
class Reservation:
    """Offsets [first, end) of ``tp`` taken by one writer until ``until_ms`` (slot ``slot``)."""

    tp: TopicPartition
    topic_id: str
    slot: int
    first: int
    end: int
    until_ms: int

    @property
    def count(self) -> int:
        return self.end - self.first

    @property
    def pending(self) -> bool:
        return self.first < self.end

    def first_id(self) -> str:
        return slot_id(self.topic_id, self.tp.partition, self.slot, "first")

    def until_id(self) -> str:
        return slot_id(self.topic_id, self.tp.partition, self.slot, "until")

    def ids(self) -> list[str]:
        return [slot_id(self.topic_id, self.tp.partition, self.slot, f) for f in ("first", "end", "until")]

    def same(self, other: Reservation) -> bool:
        """Whether ``other`` is this reservation (its deadline may have moved)."""
        return (self.topic_id, self.tp, self.slot, self.first, self.end) == (
            other.topic_id,
            other.tp,
            other.slot,
            other.first,
            other.end,
        )


def reservation_slots(app_version: Callable[[str], int], tp: TopicPartition, topic_id: str) -> list[Reservation]:
    """Every reservation slot of ``tp`` (pending or free), read through ``app_version``
    (an app id's version, -1 when it has none)."""
    found = []
    for k in range(max(app_version(slots_id(topic_id, tp.partition)), 0)):
        first, end, until = (app_version(slot_id(topic_id, tp.partition, k, f)) for f in ("first", "end", "until"))
        found.append(Reservation(tp, topic_id, k, first, end, until))
    return found
