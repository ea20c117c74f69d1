"""Consumer groups as the store keeps them: where a group assigns partitions.

* :mod:`engine.groups.state` -- the group state machine as pure functions (join, sync,
  leave, expire, Kafka's eager and cooperative rebalances, static members);
* :mod:`engine.groups.assignors` -- Kafka's assignors (range, roundrobin, sticky,
  cooperative-sticky) as pure, deterministic functions;
* :mod:`engine.groups.coordinator` -- a group's records in ``__consumer_offsets`` followed
  from the log, group changes and offset commits as Delta commits;
* :mod:`engine.groups.leases` -- liveness off the Delta log: a lease object per member
  under ``_lakelog/groups/``, announcements of joining members;
* :mod:`engine.groups.offsets_topic` -- the records of ``__consumer_offsets`` (offset
  commits and group state, keyed for compaction), group ids, offsets.

No process coordinates a group: every member (and ``lakelog serve``) commits the group's
changes itself, and the conflict rules of the commit core order them.
"""

from __future__ import annotations

from lakelog.engine.groups.offsets_topic import OffsetAndMetadata

__all__ = ["OffsetAndMetadata"]
