"""Kafka's DeleteRecords without a JVM: move partitions' log start offsets forward.

As Kafka's ``Admin.deleteRecords`` (``ReplicaManager.deleteRecords``,
``UnifiedLog.maybeIncrementLogStartOffset``): per partition the records below an offset stop
being records; -1 means the high watermark (here the last stable offset, the end readers
see); an offset past it is OFFSET_OUT_OF_RANGE; the log start never moves back, so asking
for an offset at or below it changes nothing and answers the current log start (the "low
watermark"). Internal topics are refused, as Kafka refuses them
(``ReplicaManager.deleteRecordsOnLocalLog``: "Cannot delete records of internal topic").

Where it is kept: one Delta commit per topic sets each moved partition's start marker
(:func:`engine.commit.markers.start_marker_id`, the app transaction retention sets too, kept
by every Delta snapshot and checkpoint) and removes the data files lying wholly below the new
start, as Kafka deletes the segments below its log start offset; the file holding the
partition's newest offset is never removed here (as retention never removes it; once appends
moved past it, ``lakelog maintain``'s retention step removes it), and a file the new start cuts
through stays, its rows below the start no longer read by any lakelog reader (plain
Delta readers still see them until retention or compaction removes that file). A commit
racing another that moved the same start further (another DeleteRecords, retention) is
planned again (:func:`engine.commit.conflicts.maintenance_verdict`), so the start never moves
back; appends racing it rebase as over any maintenance step.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakelog.engine.commit import MaintenanceChange, RetryPolicy, TableState
from lakelog.engine.commit.actions import RemoveFile
from lakelog.engine.commit.info import TAG_CLIENT, TAG_DETAILS, TAG_OPERATION, TAG_TOPIC
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import (
    InvalidOffsetError,
    InvalidTopicError,
    LakelogError,
    MaintenanceConflictError,
    OffsetOutOfRangeError,
)
from lakelog.engine.offsets import FileStats, PartitionBounds
from lakelog.engine.topics import TopicPartition, require_partition

HIGH_WATERMARK = -1
OPERATION = "delete_records"
# Plans of one topic lost to a commit that moved its starts or removed its files, before giving up.
_REPLANS = 20


@dataclass
class TopicDeletion:
    """The DeleteRecords commit of one topic: partitions whose start moves, files it removes."""

    topic: str
    topic_id: str
    starts: dict[int, int] = field(default_factory=dict)
    removes: list[FileStats] = field(default_factory=list)

    def change(self, client_id: str, now_ms: int) -> MaintenanceChange:
        """The deletion as the commit core takes it (Delta's operation DELETE, as retention's)."""
        details = {"log_start_offsets": dict(sorted(self.starts.items())), "files_deleted": len(self.removes)}
        return MaintenanceChange(
            "DELETE",
            self.topic,
            self.topic_id,
            [RemoveFile.of(f, now_ms, data_change=True) for f in self.removes],
            [],
            True,
            {
                TAG_OPERATION: OPERATION,
                TAG_CLIENT: client_id,
                TAG_TOPIC: self.topic,
                TAG_DETAILS: json.dumps(details, sort_keys=True, separators=(",", ":")),
            },
            {"predicate": json.dumps([f"topic = '{self.topic}'"])},
            {"numRemovedFiles": len(self.removes), "numRemovedBytes": sum(f.size or 0 for f in self.removes)},
            dict(self.starts),
        )


@dataclass
class DeletionPlan:
    """What a DeleteRecords request does at one version: per topic the commit to make, per
    partition the log start it answers, or the error it answers instead."""

    topics: dict[str, TopicDeletion] = field(default_factory=dict)
    low_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    errors: dict[TopicPartition, LakelogError] = field(default_factory=dict)


def check_offset_request(tp: Any, offset: Any) -> tuple[TopicPartition, int]:
    """``tp`` (a TopicPartition or a (topic, partition) pair) and ``offset`` (an int, -1 for
    the high watermark) as a DeleteRecords request; InvalidOffsetError naming what is wrong."""
    try:
        topic, partition = tp
    except (TypeError, ValueError):
        raise InvalidOffsetError(f"delete_records takes TopicPartition keys, got {tp!r}") from None
    if not isinstance(topic, str) or isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidOffsetError(f"delete_records takes TopicPartition keys, got {tp!r}")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidOffsetError(
            f"offset for {topic}-{partition} must be an int (-1: the high watermark), got {offset!r}"
        )
    return TopicPartition(topic, partition), offset


def plan_deletion(
    state: TableState,
    bounds: Callable[[TopicPartition], PartitionBounds],
    offsets: Mapping[TopicPartition, int],
) -> DeletionPlan:
    """Plan DeleteRecords of ``offsets`` against ``state`` (pure, given ``bounds`` of a
    partition in that state). A partition whose offset is at or below its log start moves
    nothing and answers that start; errors per partition: UnknownTopicOrPartitionError,
    InvalidTopicError (an internal topic), OffsetOutOfRangeError (below -1 or past the high
    watermark)."""
    plan = DeletionPlan()
    for tp, offset in sorted(offsets.items()):
        try:
            topic = require_partition(state.topics, tp.topic, tp.partition)
            if topic.internal:
                raise InvalidTopicError(f"records of internal topic {tp.topic!r} cannot be deleted")
            b = bounds(tp)
            wanted = b.end if offset == HIGH_WATERMARK else offset
            if wanted < 0 or wanted > b.end:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {tp} below offset {offset}: outside its log "
                    f"(log start offset {b.start}, high watermark {b.end})"
                )
        except LakelogError as exc:
            plan.errors[tp] = exc
            continue
        if wanted <= b.start:
            plan.low_watermarks[tp] = b.start
            continue
        deletion = plan.topics.setdefault(tp.topic, TopicDeletion(tp.topic, topic.topic_id))
        deletion.starts[tp.partition] = wanted
        deletion.removes += files_below(state.files_of(tp).ordered, wanted)
        plan.low_watermarks[tp] = wanted
    return plan


def files_below(ordered: tuple[FileStats, ...], start: int) -> list[FileStats]:
    """Of a partition's files with offset statistics (by first offset), those holding only
    offsets below ``start``, except a file holding the partition's newest offset (the end
    offset of a partition no lakelog append marked is derived from its files)."""
    if not ordered:
        return []
    newest = max(f.max_offset for f in ordered)  # type: ignore[type-var]
    return [f for f in ordered if f.max_offset < start and f.max_offset != newest]  # type: ignore[operator]


def delete_records(
    context: StoreContext,
    offsets: Mapping[Any, Any],
    *,
    partial: bool = False,
    policy: RetryPolicy | None = None,
) -> dict[TopicPartition, int | LakelogError]:
    """Delete the records of each partition below its offset (see the module docstring); per
    partition the log start offset afterwards (Kafka's low watermark).

    Without ``partial`` every partition is checked first and the first error (by partition)
    is raised before anything is committed; with it the partitions that fail get their
    error as their value and the others are committed. One Delta commit per topic whose
    start moves; a topic whose commit lost to one that moved its starts or removed its files
    is planned again. Raises InvalidOffsetError for a malformed request,
    MaintenanceConflictError after ~20 lost plans in a row, CommitConflictError /
    DeliveryTimeoutError when versions kept being taken past ``policy``,
    CommitStateUnknownError when a commit's outcome is unknown; topics committed before the
    failing one stay committed."""
    wanted = dict(check_offset_request(tp, offset) for tp, offset in offsets.items())
    policy = policy or RetryPolicy()
    committer = context.admin
    results: dict[TopicPartition, int | LakelogError] = {}
    state = context.log.latest()
    plan = plan_deletion(state, lambda tp: context.records.bounds(state, tp), wanted)
    if plan.errors and not partial:
        raise next(iter(plan.errors.values()))
    results.update(plan.errors)
    results.update(plan.low_watermarks)
    for name in sorted(plan.topics):
        mine = {tp: o for tp, o in wanted.items() if tp.topic == name and tp not in plan.errors}
        for attempt in range(_REPLANS + 1):
            state = context.log.latest()
            topic_plan = plan_deletion(state, lambda tp, state=state: context.records.bounds(state, tp), mine)
            if topic_plan.errors and not partial:
                raise next(iter(topic_plan.errors.values()))
            results.update(topic_plan.errors)
            results.update(topic_plan.low_watermarks)
            deletion = topic_plan.topics.get(name)
            if deletion is None:
                break  # another deletion (or retention) got there first
            try:
                committer.commit_maintenance(
                    deletion.change(committer.client_id, int(time.time() * 1000)), state.version, policy
                )
                break
            except MaintenanceConflictError:
                if attempt == _REPLANS:
                    raise
    return results
