"""Consumer groups as the store keeps them: where a group assigns partitions.

* :mod:`engine.groups.classic` -- Kafka's classic group protocol as pure functions over a
  value (any protocol type, the leader's opaque assignments, static members, deadlines);
* :mod:`engine.groups.classic_coordinator` -- its requests over the store: read-modify-write
  Delta commits, waiting by re-reading, deadlines committed by whoever sees them;
* :mod:`engine.groups.consumer_protocol` -- Kafka's ConsumerProtocolSubscription and
  ConsumerProtocolAssignment bytes, which consumer-type members exchange;
* :mod:`engine.groups.assignors` -- Kafka's assignors (range, roundrobin, sticky,
  cooperative-sticky) as pure, deterministic functions, run by a leading lakelog consumer;
* :mod:`engine.groups.coordinator` -- a group's records in ``__consumer_offsets`` followed
  from the log, offset commits as Delta commits;
* :mod:`engine.groups.leases` -- liveness off the Delta log: a lease object per member
  under ``_lakelog/groups/``;
* :mod:`engine.groups.offsets_topic` -- the records of ``__consumer_offsets`` (offset
  commits and group state, keyed for compaction), group ids, offsets.

No process coordinates a group: every member (and ``lakelog serve``) commits the group's
changes itself, and the conflict rules of the commit core order them.
"""

from __future__ import annotations

# Only consumer_protocol imports kio (through engine.kio_import); nothing here loads it.
from lakelog.engine.groups.offsets_topic import OffsetAndMetadata

__all__ = ["OffsetAndMetadata"]
