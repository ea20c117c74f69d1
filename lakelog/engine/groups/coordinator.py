"""The group coordinator without a broker: group changes and offset commits as Delta commits.

Each operation appends records to the group's partition of
``__consumer_offsets`` through the commit core (:class:`engine.commit.Committer`).
Its plan reads the group's records up to the partition's end offset, and
the core's conflict rule re-plans an append whenever a winner appended to
one of its partitions: two operations on one group racing, the loser
re-reads the group and re-plans (its ``prepare`` runs again). What an
operation checks (generation, membership) therefore cannot change between
the check and the commit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

import pyarrow as pa

from lakelog.engine.arrow_columns import array
from lakelog.engine.commit import Committer, RetryPolicy, TableLog, TableState
from lakelog.engine.commit.data_files import OFFSETS_LABEL, holds_only_offsets
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import UnknownTopicOrPartitionError
from lakelog.engine.groups.classic import ClassicGroup, check_offset_commit
from lakelog.engine.groups.consumer_group import ConsumerGroup
from lakelog.engine.groups.consumer_group import check_offset_commit as check_consumer_commit
from lakelog.engine.groups.leases import LeaseStore, fresh
from lakelog.engine.groups.offsets_topic import (
    GroupRecords,
    OffsetAndMetadata,
    check_group_id,
    check_offset,
    is_consumer_group_record,
    is_group_record,
    offset_key,
    offset_value,
    partition_for_group,
)
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.topics import OFFSETS_TOPIC, TopicMetadata, TopicPartition


class GroupLog:
    """One group's latest records, folded incrementally from its ``__consumer_offsets`` partition.

    Offsets there only grow in commit order, so reading the records past the
    last one folded is enough to stay current. Membership alone (what every
    poll of every member checks) skips the files holding only offset commits
    (:func:`engine.commit.data_files.holds_only_offsets`): members commit offsets far
    more often than the group changes. Thread-safe.
    """

    def __init__(self, reader: TableLog, records: PartitionReader, group_id: str, partitions: int) -> None:
        self.group_id = check_group_id(group_id, "group id")
        self.uri = reader.uri
        self.tp = TopicPartition(OFFSETS_TOPIC, partition_for_group(group_id, partitions))
        self._reader = reader
        self._records = records
        self._lock = threading.Lock()
        self._folded = GroupRecords(group_id)  # every record below _next
        self._next = 0
        # The newest group record seen by either read, and where membership reads go on from.
        self._state: ClassicGroup | None = None
        self._state_at = -1
        self._consumer: ConsumerGroup | None = None  # the consumer-type (KIP-848) state
        self._consumer_at = -1
        self._state_next = 0

    def latest(self, state: TableState | None = None, *, offsets: bool = True) -> GroupRecords:
        """The group's state and (with ``offsets``) its committed offsets as of ``state``
        (default: the latest version), a copy. Without ``offsets`` the offsets returned
        may be stale."""
        state = state if state is not None else self._reader.latest()
        with self._lock:
            files = state.files_of(self.tp)
            if offsets:
                self._fold(self._records.read(files, self.tp, self._next), everything=True)
            else:
                start = max(self._state_next, self._next)
                wanted = [f for f in files.covering(start, files.end) if not holds_only_offsets(f.path)]
                if wanted:
                    self._fold(self._records.read(wanted, self.tp, start, files.end), everything=False)
                if files.end is not None:
                    # Every record below the end was looked at (or sits in a file of offsets
                    # only): the next read starts there, not at the last group record, so
                    # the offset commits since the last group change are not listed again.
                    self._state_next = max(self._state_next, files.end)
            return GroupRecords(self.group_id, self._state, dict(self._folded.offsets), self._consumer)

    def _fold(self, table: pa.Table, *, everything: bool) -> None:
        if not table.num_rows:
            return
        offsets = table.column("offset").to_pylist()
        for offset, key, value in zip(
            offsets, table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True
        ):
            if everything:
                self._folded.apply(key, value)
            if offset > self._state_at and is_group_record(key, self.group_id):
                self._state = None if value is None else ClassicGroup.from_json(value.decode())
                self._state_at = offset
            elif offset > self._consumer_at and is_consumer_group_record(key, self.group_id):
                self._consumer = None if value is None else ConsumerGroup.from_json(value.decode())
                self._consumer_at = offset
        if everything:
            self._next = offsets[-1] + 1
        else:
            self._state_next = offsets[-1] + 1


def record_rows(tp: TopicPartition, start: int, records: list[tuple[bytes, bytes | None]], now_ms: int) -> pa.Table:
    """Log rows for ``records`` (key, value) in ``tp`` from offset ``start``."""
    n = len(records)
    return pa.table(
        {
            "topic": array([tp.topic] * n, pa.string()),
            "partition": array([tp.partition] * n, pa.int32()),
            "offset": array(range(start, start + n), pa.int64()),
            "timestamp": array([now_ms * 1000] * n, pa.timestamp("us", tz="UTC")),
            "timestamp_type": array([0] * n, pa.int32()),
            "key": array([k for k, _ in records], pa.binary()),
            "value": array([v for _, v in records], pa.binary()),
            "headers": pa.nulls(n, LOG_ARROW_SCHEMA.field("headers").type),
            "producer_id": array([-1] * n, pa.int64()),
            "producer_epoch": array([-1] * n, pa.int32()),
            "sequence": array([-1] * n, pa.int32()),
        },
        schema=LOG_ARROW_SCHEMA,
    )


class GroupRecordsBatch:
    """Records for the group's partition, planned from the group's latest records in each attempt.

    ``plan(group, view, now_ms)`` returns the (key, value) records to append
    (raising a FatalError to refuse), and may set ``self.outcome`` for the caller.
    """

    app_transactions = ()
    commit_when_empty = False

    def __init__(
        self,
        log: GroupLog,
        operation: str,
        plan: Callable[[GroupRecords, TableState, int], list[tuple[bytes, bytes | None]]],
        *,
        reads_offsets: bool = True,
        file_label: str = "",
    ) -> None:
        """``reads_offsets=False``: ``plan`` looks at the group's state only (its offsets may
        be stale). ``file_label`` names the files (:data:`engine.commit.data_files.OFFSETS_LABEL`
        for batches of offset commits only)."""
        self.operation = operation
        self.file_label = file_label
        self._log = log
        self._plan = plan
        self._reads_offsets = reads_offsets
        self._records: list[tuple[bytes, bytes | None]] = []
        self._now_ms = 0

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        self._now_ms = int(time.time() * 1000)
        self._records = self._plan(self._log.latest(view, offsets=self._reads_offsets), view, self._now_ms)
        return {self._log.tp: len(self._records)} if self._records else {}

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        """Checks run in ``plan``, against the group's records."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        return [self._log.tp]

    def build(self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int):
        return record_rows(self._log.tp, ends.get(self._log.tp, 0), self._records, self._now_ms)


def live_members(log: GroupLog, state: ClassicGroup, now_ms: int) -> set[str]:
    """Members of ``state`` whose leases were renewed within their session timeout (one look)."""
    if not state.members:
        return set()
    leases = LeaseStore(log.uri, log.group_id).read()
    return fresh(leases, {m: v.session_timeout_ms for m, v in state.members.items()}, now_ms)


def check_group_commit(
    log: GroupLog,
    group: GroupRecords,
    generation: int,
    member_id: str | None,
    now_ms: int,
    *,
    instance_id: str | None = None,
    transactional: bool = False,
    api_version: int = 9,
) -> None:
    """Refuse an offset commit Kafka's coordinator would refuse, nothing committed then
    (:func:`engine.groups.classic.check_offset_commit`): a member must be in the group's current
    generation; a commit without a member (``member_id`` None, generation -1) only while the
    group has no member whose lease is fresh. In a consumer-type group with members, the
    generation is the member epoch (:func:`engine.groups.consumer_group.check_offset_commit`;
    ``api_version``: the OffsetCommit's, which must be 9 or above for its members)."""
    consumer = group.consumer
    if consumer is not None and not consumer.empty:
        check_consumer_commit(consumer, member_id, generation, api_version, transactional=transactional)
        return
    state = group.state
    live = None if state is None or member_id is not None else live_members(log, state, now_ms)
    check_offset_commit(state, member_id, instance_id, generation, transactional=transactional, live=live)


def partition_counts(view: TableState) -> dict[str, int]:
    return {name: t.partitions for name, t in view.topics.items() if not t.internal}


# Group changes from admin tools and streaming queries: members' commits to the same partition
# keep taking versions under load, so the bound is time (as Kafka's default.api.timeout.ms).
GROUP_POLICY = RetryPolicy(retries=1 << 30, backoff_ms=20, backoff_max_ms=500, timeout_ms=60_000)


def commit_offsets(
    writer: Committer,
    log: GroupLog,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    generation: int,
    member_id: str | None,
    policy: RetryPolicy,
    instance_id: str | None = None,
    api_version: int = 9,
) -> None:
    """Commit ``offsets`` for the group if the member may (:func:`check_group_commit`: a member
    of the current generation; a consumer without membership only while the group has no
    live member).

    Raises CommitFailedError (UnknownMemberIdError), FencedInstanceIdError (nothing committed) otherwise.
    """

    def plan(group: GroupRecords, view: TableState, now_ms: int) -> list[tuple[bytes, bytes | None]]:
        check_group_commit(log, group, generation, member_id, now_ms, instance_id=instance_id, api_version=api_version)
        return offset_records(log.group_id, offsets, generation, member_id, now_ms, view.topics)

    writer.append(GroupRecordsBatch(log, "offset_commit", plan, reads_offsets=False, file_label=OFFSETS_LABEL), policy)


def check_offsets_to_commit(
    offsets: Mapping[TopicPartition, OffsetAndMetadata], topics: Mapping[str, TopicMetadata]
) -> None:
    """Raise UnknownTopicOrPartitionError, as Kafka's OffsetCommit and TxnOffsetCommit answer, for
    a partition that does not exist in ``topics``, and InvalidOffsetError for an offset that is not an
    int in 0..2**63-1 (:func:`engine.groups.offsets_topic.check_offset`)."""
    for tp, o in offsets.items():
        topic = topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < topic.partitions:
            raise UnknownTopicOrPartitionError(f"cannot commit an offset for {tp}: the partition does not exist")
        check_offset(o.offset, f"offset to commit for {tp}")


def offset_records(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    generation: int,
    member_id: str | None,
    now_ms: int,
    topics: Mapping[str, TopicMetadata],
) -> list[tuple[bytes, bytes]]:
    """The (key, value) records that commit ``offsets`` (used inside transactions too), each
    stamped with its topic's id. Raises UnknownTopicOrPartitionError, as Kafka answers, for a
    partition that does not exist in ``topics``."""
    check_offsets_to_commit(offsets, topics)
    return [
        (
            offset_key(group_id, tp),
            offset_value(
                replace(
                    o,
                    commit_timestamp=now_ms,
                    generation=generation,
                    member_id=member_id,
                    topic_id=topics[tp.topic].topic_id,
                )
            ),
        )
        for tp, o in sorted(offsets.items())
    ]
