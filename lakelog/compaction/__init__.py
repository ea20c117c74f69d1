"""Table maintenance of a lakelog store: OPTIMIZE that keeps offset order, Kafka
log compaction (``cleanup.policy=compact``), retention (``cleanup.policy=delete``),
VACUUM and Delta log hygiene. ``compaction.maintain`` runs what each topic's
config asks for; ``lakelog maintain`` is its command line.
"""

from __future__ import annotations

from lakelog.compaction.maintain import MaintenanceReport, TopicReport, maintain

__all__ = ["MaintenanceReport", "TopicReport", "maintain"]
