"""The store's commit history as lakelog describes it.

Each Delta commit becomes one :class:`HistoryEntry`: the version, when,
lakelog's operation name (from its tags; Delta's own operation name for
commits lakelog did not make, such as OPTIMIZE run from SQL), the client,
the idempotent producer / transactional id / streaming query that set
Delta's app transaction, and per partition the offsets the commit added and
removed (from the tags appends carry, else from the ``offset`` statistics of
the commit's ``add`` and ``remove`` actions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from lakelog.engine.commit.actions import AddFile, Commit, RemoveFile
from lakelog.engine.commit.info import (
    TAG_CLIENT,
    TAG_DETAILS,
    TAG_OPERATION,
    TAG_RANGES,
    TAG_TOPIC,
    lakelog_tags,
    parse_ranges,
)
from lakelog.engine.offsets import FileStats
from lakelog.engine.topics import TopicPartition

# Delta app transaction ids lakelog's writers set (engine/producer.py,
# transactions/producer.py, spark_connector/sink.py).
PRODUCER_APP_PREFIX = "lakelog-producer-"
TRANSACTION_APP_PREFIX = "lakelog-txn-"
SINK_APP_PREFIX = "lakelog-sink-"


@dataclass(frozen=True)
class PartitionChange:
    """What one commit did to one partition: ``added`` or ``removed`` files holding
    offsets ``start_offset`` .. ``end_offset - 1`` (``records`` of them; fewer than the
    span after log compaction). Offsets are None for files without statistics."""

    topic: str
    partition: int
    action: str
    start_offset: int | None
    end_offset: int | None
    records: int | None
    files: int


@dataclass(frozen=True)
class HistoryEntry:
    version: int
    timestamp: datetime | None
    operation: str
    delta_operation: str
    client_id: str | None
    topic: str | None
    ranges: list[tuple[str, int, int, int]] = field(default_factory=list)
    details: str | None = None
    producer_id: str | None = None
    transactional_id: str | None = None
    transaction_epoch: int | None = None
    query_id: str | None = None
    changes: list[PartitionChange] = field(default_factory=list)

    @property
    def timestamp_ms(self) -> int | None:
        return None if self.timestamp is None else int(self.timestamp.timestamp() * 1000)

    def touches(self, topic: str) -> bool:
        return (
            self.topic == topic
            or any(r[0] == topic for r in self.ranges)
            or any(c.topic == topic for c in self.changes)
        )

    def added(self) -> list[PartitionChange]:
        return [c for c in self.changes if c.action == "added"]

    def removed(self) -> list[PartitionChange]:
        return [c for c in self.changes if c.action == "removed"]


def history_entry(version: int, commit: Commit) -> HistoryEntry:
    """Describe one commit from its actions."""
    info = dict(commit.commit_info.values) if commit.commit_info is not None else {}
    files: dict[tuple[str, int, str], list[FileStats]] = {}
    for action, kind in [(a, "added") for a in commit.adds] + [(r, "removed") for r in commit.removes]:
        tp = action.tp
        if tp is None:
            continue
        stats = action.file_stats() if isinstance(action, AddFile) else _removed_stats(action, tp)
        files.setdefault((tp.topic, tp.partition, kind), []).append(stats)
    tags = lakelog_tags(info)
    delta_op = str(info.get("operation", "UNKNOWN"))
    millis = info.get("inCommitTimestamp") or info.get("timestamp")
    when = datetime.fromtimestamp(millis / 1000, tz=UTC) if millis else None
    ranges = parse_ranges(tags.get(TAG_RANGES))
    operation = tags.get(TAG_OPERATION) or delta_op.lower().replace(" ", "_")
    producer_id = transactional_id = epoch = query_id = None
    for app_id, app_version in commit.txns.items():
        if app_id.startswith(PRODUCER_APP_PREFIX):
            producer_id = app_id.removeprefix(PRODUCER_APP_PREFIX)
        elif app_id.startswith(TRANSACTION_APP_PREFIX):
            transactional_id = app_id.removeprefix(TRANSACTION_APP_PREFIX)
            epoch = app_version >> 32  # transactions/producer.py: epoch << 32 | sequence
        elif app_id.startswith(SINK_APP_PREFIX):
            query_id = app_id.removeprefix(SINK_APP_PREFIX)
    return HistoryEntry(
        version=version,
        timestamp=when,
        operation=operation,
        delta_operation=delta_op,
        client_id=tags.get(TAG_CLIENT),
        topic=tags.get(TAG_TOPIC),
        ranges=ranges,
        details=tags.get(TAG_DETAILS),
        producer_id=producer_id,
        transactional_id=transactional_id,
        transaction_epoch=epoch,
        query_id=query_id,
        changes=partition_changes(files, ranges),
    )


def _removed_stats(remove: RemoveFile, tp: TopicPartition) -> FileStats:
    """A removed file's offsets, from the statistics Delta allows on a remove (lakelog writes them)."""
    return AddFile(remove.path, remove.partition_values or {}, remove.size or 0, 0, True, remove.stats).file_stats()


def partition_changes(
    files: dict[tuple[str, int, str], list[FileStats]], ranges: list[tuple[str, int, int, int]]
) -> list[PartitionChange]:
    """Per (topic, partition, action) the offset span and record count of the files.

    An append's own ranges (its tags) win over statistics: they are exact
    even when a writer's files carry none.
    """
    tagged = {(t, p): (s, e) for t, p, s, e in ranges if e > s}
    changes = []
    for (topic, partition, action), stats in sorted(files.items()):
        if action == "added" and (topic, partition) in tagged:
            start, end = tagged.pop((topic, partition))
            changes.append(PartitionChange(topic, partition, action, start, end, end - start, len(stats)))
            continue
        lows = [f.min_offset for f in stats]
        highs = [f.max_offset for f in stats]
        counts = [f.num_records for f in stats]
        known = None not in lows and None not in highs
        changes.append(
            PartitionChange(
                topic,
                partition,
                action,
                min(lows) if known else None,  # type: ignore[type-var]
                max(highs) + 1 if known else None,  # type: ignore[type-var,operator]
                sum(counts) if None not in counts else None,  # type: ignore[arg-type]
                len(stats),
            )
        )
    return changes
