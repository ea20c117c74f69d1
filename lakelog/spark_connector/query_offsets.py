"""A streaming query's ``groupId``: its offsets committed to the consumer group after each batch.

Spark's Kafka source keeps offsets only in the query's checkpoint, so no
Kafka tool can show how far behind a query is. Here every micro-batch the
query completes also commits its end offsets to ``__consumer_offsets`` as
a consumer group without members would (Kafka's rule for a manually
assigned consumer: allowed only while the group has no live members), so
``lakelog groups describe`` shows the query's lag. The checkpoint stays the
source of truth for where the query resumes.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakelog.engine.commit import Committer, TableLog
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.context import ensure_offsets_topic
from lakelog.engine.groups.coordinator import GROUP_POLICY, GroupLog, commit_offsets
from lakelog.engine.groups.offsets_topic import OffsetAndMetadata
from lakelog.engine.topics import TopicPartition

POLICY = GROUP_POLICY


class GroupOffsetsCommitter:
    """Commits a query's end offsets for ``group_id``. Kept by the source between batches."""

    def __init__(self, uri: str, group_id: str) -> None:
        self.group_id = group_id
        self._committer = Committer(TableLog(uri), client_id=f"lakelog-stream-{group_id}")
        self._records = PartitionReader(self._committer.uri)
        self._log: GroupLog | None = None

    def _group_log(self) -> GroupLog:
        if self._log is None:
            partitions = ensure_offsets_topic(self._committer, POLICY)
            self._log = GroupLog(self._committer.log, self._records, self.group_id, partitions)
        return self._log

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (next offset to read per partition).

        Raises CommitFailedError when the group has live members (a consumer
        group and a query must not share a group id).
        """
        committed = {tp: OffsetAndMetadata(offset) for tp, offset in offsets.items()}
        commit_offsets(self._committer, self._group_log(), committed, -1, None, POLICY)
