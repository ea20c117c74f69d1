"""Administration of a store without a JVM, over its :class:`engine.context.StoreContext`.

* :mod:`engine.admin.groups` -- kafka-consumer-groups: list, describe, reset offsets,
  delete groups and their offsets;
* :mod:`engine.admin.list_offsets` -- Kafka's ListOffsets: log start and end offsets, the
  offsets of times, the largest timestamp;
* :mod:`engine.admin.check` -- ``lakelog check``: prove the store's invariant, repair what
  is safe to repair;
* :mod:`engine.admin.history` -- every commit as lakelog's history entries;
* :mod:`engine.admin.time_travel` -- the Delta version a time-travel read pins.

Topic administration is planned in :mod:`engine.topic_changes` (the seam auto-creates
topics with it) and offered by :class:`lakelog.store.Store`.
"""

from __future__ import annotations

from lakelog.engine.admin.list_offsets import OffsetAndTimestamp

__all__ = ["OffsetAndTimestamp"]
