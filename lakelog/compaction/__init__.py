"""Table maintenance of a lakelog store -- not only compaction: it runs OPTIMIZE that keeps
offset order, Kafka's log compaction (``cleanup.policy=compact``), retention
(``cleanup.policy=delete``), VACUUM and Delta log hygiene, each as the topic's config asks.

* :mod:`compaction.maintain` -- ``maintain(store)``: per topic, plan and commit each step on a
  fresh view, then VACUUM and log cleanup; ``lakelog maintain`` is its command line;
* :mod:`compaction.plan` -- what maintenance would do to one partition (pure: retention
  victims, cleanable files, OPTIMIZE bins in offset order);
* :mod:`compaction.log_cleaner` -- which records log compaction keeps (Kafka's cleaner rule
  over Arrow columns);
* :mod:`compaction.rewrite` -- the data-moving half: rewriting one partition's files, in this
  process or as Spark tasks;
* :mod:`compaction.step` -- a step as one change for the commit core (removes and adds);
* :mod:`compaction.files` -- the live data files as maintenance sees them.

It sits above :mod:`lakelog.store` (it takes a store or a path) and uses only the engine.
"""

from __future__ import annotations

from lakelog.compaction.maintain import MaintenanceReport, TopicReport, maintain

__all__ = ["MaintenanceReport", "TopicReport", "maintain"]
