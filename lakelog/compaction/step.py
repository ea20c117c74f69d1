"""A maintenance step as a change for the commit core: removes and adds in one Delta commit.

The step is committed by :meth:`engine.commit.Committer.commit_maintenance`,
which rebases it over commits that took its version first, as Delta's own
OPTIMIZE rebases on its conflict checker, unless one of them removed a file
the step removes (another maintenance run, a plain Delta OPTIMIZE, a topic
deletion: :class:`MaintenanceConflictError`, nothing of this step is
visible) or replaced its topic (:func:`engine.commit.conflicts.maintenance_verdict`).
Appends by producers and sinks never conflict with maintenance: they only
add files after the records maintenance touches, and maintenance never
removes a partition's newest file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from lakelog.compaction.files import LiveFile
from lakelog.engine.commit import Committer, MaintenanceChange, RetryPolicy
from lakelog.engine.commit.data_files import DataFile
from lakelog.engine.commit.info import TAG_CLIENT, TAG_DETAILS, TAG_OPERATION, TAG_TOPIC

# Delta's own names where Delta has the operation, so DESCRIBE HISTORY reads naturally.
# "sort" rewrites files whose offset ranges overlap in offset order: an OPTIMIZE to Delta.
DELTA_OPERATIONS = {"optimize": "OPTIMIZE", "sort": "OPTIMIZE", "compact": "LOG COMPACTION", "retention": "DELETE"}


@dataclass
class MaintenanceStep:
    """One step on one topic: files it removes, files it adds, and what it tells history."""

    operation: str  # sort | optimize | compact | retention
    topic: str
    topic_id: str
    removed: Sequence[LiveFile]
    added: Sequence[DataFile]
    details: dict = field(default_factory=dict)
    # The removed files grouped as they were replaced (one new file per group).
    bins: list[tuple[LiveFile, ...]] = field(default_factory=list)

    @property
    def data_change(self) -> bool:
        return self.operation not in ("optimize", "sort")

    def change(self, client_id: str) -> MaintenanceChange:
        """The step as the commit core takes it."""
        tags = {
            TAG_OPERATION: self.operation,
            TAG_CLIENT: client_id,
            TAG_TOPIC: self.topic,
            TAG_DETAILS: json.dumps(self.details, sort_keys=True, separators=(",", ":")),
        }
        now_ms = int(time.time() * 1000)
        return MaintenanceChange(
            DELTA_OPERATIONS[self.operation],
            self.topic,
            self.topic_id,
            [f.remove_action(now_ms, data_change=self.data_change) for f in self.removed],
            list(self.added),
            self.data_change,
            tags,
            {"predicate": json.dumps([f"topic = '{self.topic}'"]), "zOrderBy": "[]"},
            {
                "numRemovedFiles": len(self.removed),
                "numAddedFiles": len(self.added),
                "numRemovedBytes": sum(f.size for f in self.removed),
            },
            dict(self.details.get("log_start_offsets", {})) if self.operation == "retention" else {},
        )


def commit_step(committer: Committer, step: MaintenanceStep, read_version: int, *, policy: RetryPolicy) -> int:
    """Commit ``step`` planned at ``read_version``; returns the version it landed at.

    Raises MaintenanceConflictError when a concurrent commit removed one of
    the step's files or replaced its topic, CommitConflictError /
    DeliveryTimeoutError when versions kept being taken past ``policy`` (the
    step's new files are deleted again; nothing is visible), and
    CommitStateUnknownError when the outcome is unknown (the files are kept).
    """
    return committer.commit_maintenance(step.change(committer.client_id), read_version, policy)
