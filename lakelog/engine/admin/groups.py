"""Consumer group administration: Kafka's AdminClient group calls and ``kafka-consumer-groups``.

Everything here reads ``__consumer_offsets`` as it is stored (no broker
keeps groups in memory): a group's state and committed offsets are the
latest values of its keys, folded with :func:`engine.groups.offsets_topic.fold_groups`.

Changes (resetting offsets, deleting a group) are appended to the group's
partition of ``__consumer_offsets`` like any offset commit, through a
:class:`engine.groups.coordinator.GroupRecordsBatch` whose plan checks that
the group has no live members. The check runs inside every commit attempt
against the group's records at that attempt's Delta version, and the commit
is re-planned when another commit appended to that partition: a member
joining concurrently (its join is a commit to the same partition) makes ours
re-plan, and the re-plan sees the member and refuses. So a reset or delete
never lands on a group that had a live member when it committed.

"Live" means a member of the group's state whose lease
(:mod:`engine.groups.leases`) was renewed within its session timeout: members
that stopped count as gone even before another member removes them, as
Kafka's coordinator would have expired them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from lakelog.engine.admin.list_offsets import beginning_offsets, end_offsets, offsets_for_times
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.commit.state import TableState
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import (
    GroupIdNotFoundError,
    GroupNotEmptyError,
    GroupSubscribedToTopicError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidRecordError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.groups.classic import EMPTY, ClassicGroup, ClassicMember
from lakelog.engine.groups.consumer_group import ConsumerGroup
from lakelog.engine.groups.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from lakelog.engine.groups.coordinator import GROUP_POLICY, GroupLog, GroupRecordsBatch, offset_records
from lakelog.engine.groups.leases import LeaseStore, fresh
from lakelog.engine.groups.offsets_topic import (
    MIN_LONG,
    GroupRecords,
    OffsetAndMetadata,
    check_group_id,
    check_offset,
    consumer_group_key,
    fold_groups,
    group_key,
    offset_key,
)
from lakelog.engine.records import check_lookup_timestamp
from lakelog.engine.topics import OFFSETS_TOPIC, TopicPartition, require_topic

ResetTarget = Literal["earliest", "latest", "datetime", "offset"]
RESET_TARGETS: tuple[str, ...] = ("earliest", "latest", "datetime", "offset")

# Kafka's ConsumerGroupState names: the group state machine's own (Stable, PreparingRebalance,
# CompletingRebalance) while a member is live, Empty once none is.

log = logging.getLogger("lakelog.group_admin")

# Group changes retry like the coordinator's own (GROUP_POLICY): members'
# heartbeats to the same partition conflict often but briefly.
_POLICY = GROUP_POLICY


@dataclass(frozen=True)
class GroupListing:
    """One group as ``list_groups`` reports it."""

    group_id: str
    state: str  # Kafka's group state: Stable, PreparingRebalance, CompletingRebalance, Empty
    members: int  # live members
    protocol_type: str = "consumer"  # a Kafka client's classic-protocol group: its protocol type
    group_type: str = "classic"  # or "consumer": a KIP-848 group (group.protocol=consumer)


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    assignment: tuple[TopicPartition, ...]
    instance_id: str | None = None  # group.instance.id of a static member
    last_heartbeat_ms: int | None = None  # when its lease was last renewed


@dataclass(frozen=True)
class PartitionOffsets:
    """A partition the group has a committed offset for or has assigned to a live member."""

    topic: str
    partition: int
    committed: int | None  # None: no committed offset
    log_end_offset: int | None  # None: the topic no longer exists
    lag: int | None  # log_end_offset - committed; None when either is unknown
    owner: str | None  # member id of the live member it is assigned to

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # Stable, PreparingRebalance, CompletingRebalance or Empty (consumer type: Assigning, Reconciling)
    generation: int | None  # None when the group has only offsets (never had members); consumer type: group epoch
    assignor: str | None  # consumer type: the server-side assignor it uses
    members: tuple[MemberDescription, ...]  # live members, by member id
    partitions: tuple[PartitionOffsets, ...]  # by topic, partition
    group_type: str = "classic"  # or "consumer" (KIP-848)
    assignment_epoch: int | None = None  # consumer type: the epoch of its target assignment


def _now_ms() -> int:
    return int(time.time() * 1000)


def _exists(group: GroupRecords) -> bool:
    return group.state is not None or group.consumer is not None or bool(group.offsets)


def _consumer_type(group: GroupRecords) -> ConsumerGroup | None:
    """The group's consumer-type (KIP-848) state when it is of that type: it has members, or
    neither kind of record has (and it has a consumer-type record)."""
    consumer = group.consumer
    if consumer is None or (not consumer.members and group.state is not None and group.state.members):
        return None
    return consumer


def _sessions(group: GroupRecords) -> dict[str, int]:
    """Every member of the group (of either type) -> its session timeout (ms)."""
    consumer = _consumer_type(group)
    if consumer is not None:
        return {m: v.session_timeout_ms for m, v in consumer.members.items()}
    if group.state is None:
        return {}
    return {m: v.session_timeout_ms for m, v in group.state.members.items()}


def _live(context: StoreContext, group: GroupRecords, now_ms: int) -> set[str]:
    """Members whose leases are fresh (members of the stored state that stopped renewing are gone)."""
    sessions = _sessions(group)
    if not sessions:
        return set()
    return fresh(LeaseStore(context.uri, group.group_id).read(), sessions, now_ms)


def _state_name(group: GroupRecords, live: set[str]) -> str:
    consumer = _consumer_type(group)
    if consumer is not None:
        return consumer.state if live else EMPTY
    return group.state.state if live and group.state is not None else EMPTY


def _protocol_type(group: GroupRecords) -> str:
    state = group.state
    if _consumer_type(group) is not None:
        return PROTOCOL_TYPE
    return state.protocol_type if state is not None and state.protocol_type and state.members else PROTOCOL_TYPE


def _group_type(group: GroupRecords) -> str:
    return "consumer" if _consumer_type(group) is not None else "classic"


def _consumer_assignment(state: ClassicGroup, member: ClassicMember) -> tuple[TopicPartition, ...]:
    """The partitions of a consumer-protocol member's assignment; () for other protocol types
    (Streams' and Connect's are theirs to read) and bytes that are not a consumer assignment."""
    if state.protocol_type != PROTOCOL_TYPE:
        return ()
    try:
        return tuple(sorted(decode_assignment(member.assignment)))
    except InvalidRecordError:
        return ()


def _subscribed_topics(state: ClassicGroup, member: ClassicMember) -> set[str]:
    """The topics a consumer-protocol member subscribes to (none for other protocol types)."""
    if state.protocol_type != PROTOCOL_TYPE:
        return set()
    try:
        return set(decode_subscription(member.metadata(state.protocol or member.protocols[0][0])).topics)
    except (InvalidRecordError, IndexError):
        return set()


def _require_inactive(context: StoreContext, group: GroupRecords, now_ms: int, action: str) -> None:
    """Raise GroupNotEmptyError if the group has live members (Kafka: the group must be inactive)."""
    live = len(_live(context, group, now_ms))
    if live:
        raise GroupNotEmptyError(
            f"cannot {action} group {group.group_id!r}: it has {live} live member(s); "
            "stop its consumers (or wait for their sessions to time out) first"
        )


def _offsets_partitions(context: StoreContext) -> int | None:
    """Partition count of ``__consumer_offsets``, or None if it was never created."""
    topic = context.latest_topics().get(OFFSETS_TOPIC)
    return None if topic is None else topic.partitions


def _group_log(context: StoreContext, group_id: str, partitions: int) -> GroupLog:
    return GroupLog(context.log, PartitionReader(context.uri), group_id, partitions)


def _read_group(context: StoreContext, group_id: str) -> GroupRecords:
    """The group's latest records (empty if ``__consumer_offsets`` does not exist)."""
    partitions = _offsets_partitions(context)
    if partitions is None:
        return GroupRecords(group_id)
    return _group_log(context, group_id, partitions).latest()


# -- reading -------------------------------------------------------------------


def list_groups(context: StoreContext) -> list[GroupListing]:
    """Every group with a state record or committed offsets, sorted by group id.

    Reads all partitions of ``__consumer_offsets`` at one Delta version.
    Deleted groups (all keys tombstoned) are not listed; [] when the topic
    does not exist yet.
    """
    state = context.log.latest()
    if OFFSETS_TOPIC not in state.topics:
        return []
    reader = PartitionReader(context.uri)
    groups: dict[str, GroupRecords] = {}
    for tp in sorted(tp for tp in state.partitions if tp.topic == OFFSETS_TOPIC):
        table = reader.read(state.files_of(tp), tp, 0)
        records = zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)
        # A group's records all live in its one partition, so folding each
        # partition on its own and merging loses nothing.
        groups.update(fold_groups(records))
    now_ms = _now_ms()
    listings = []
    for group_id, group in sorted(groups.items()):
        if not _exists(group):
            continue
        live = _live(context, group, now_ms)
        listings.append(
            GroupListing(group_id, _state_name(group, live), len(live), _protocol_type(group), _group_type(group))
        )
    return listings


def describe_group(context: StoreContext, group_id: str) -> GroupDescription:
    """The group's generation, live members and per-partition offsets and lag.

    Partitions listed: those with a committed offset and those assigned to a
    live member. Lag is the log end offset minus the committed offset (None
    without a committed offset, or when the topic was deleted). Raises
    GroupIdNotFoundError when the group has neither a state record nor
    committed offsets.
    """
    check_group_id(group_id, "group id")
    group = _read_group(context, group_id)
    if not _exists(group):
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    now_ms = _now_ms()
    state = group.state
    alive = _live(context, group, now_ms)
    leases = LeaseStore(context.uri, group_id).read() if alive else {}
    consumer = _consumer_type(group)
    if consumer is not None:
        return _describe_consumer_type(context, group, consumer, alive, leases)
    members = (
        tuple(
            MemberDescription(
                m.member_id,
                m.client_id,
                _consumer_assignment(state, m),
                m.instance_id,
                leases[m.member_id].modified_ms if m.member_id in leases else None,
            )
            for m in sorted(state.members.values(), key=lambda m: m.member_id)
            if m.member_id in alive
        )
        if state is not None
        else ()
    )
    partitions = _partition_offsets(context, group, members)
    return GroupDescription(
        group_id,
        _state_name(group, alive),
        state.generation if state is not None else None,
        state.protocol if state is not None else None,
        members,
        partitions,
    )


def _describe_consumer_type(
    context: StoreContext, group: GroupRecords, consumer: ConsumerGroup, alive: set[str], leases: dict
) -> GroupDescription:
    """describe_group of a consumer-type (KIP-848) group: its group epoch as the generation, the
    server-side assignor, each live member's assigned partitions (by the topics' current names)."""
    names = {t.topic_id: n for n, t in context.latest_topics().items()}
    members = tuple(
        MemberDescription(
            m.member_id,
            m.client_id,
            tuple(sorted(TopicPartition(names[t], p) for t, ps in m.assigned.items() if t in names for p in ps)),
            m.instance_id,
            leases[m.member_id].modified_ms if m.member_id in leases else None,
        )
        for m in sorted(consumer.members.values(), key=lambda m: m.member_id)
        if m.member_id in alive
    )
    return GroupDescription(
        group.group_id,
        _state_name(group, alive),
        consumer.group_epoch,
        consumer.preferred_assignor(context.settings.serve["group.consumer.assignors"]),
        members,
        _partition_offsets(context, group, members),
        "consumer",
        consumer.assignment_epoch,
    )


def _partition_offsets(
    context: StoreContext, group: GroupRecords, members: tuple[MemberDescription, ...]
) -> tuple[PartitionOffsets, ...]:
    """Per partition committed or assigned to a live member: its offset, end and lag."""
    owners = {tp: m.member_id for m in members for tp in m.assignment}
    topics = context.latest_topics()
    # Offsets committed for an earlier topic of the same name (deleted, created again) are not this topic's.
    offsets = {
        tp: o
        for tp, o in group.offsets.items()
        if not (o.topic_id and tp.topic in topics and topics[tp.topic].topic_id != o.topic_id)
    }
    tps = sorted(set(offsets) | set(owners))
    existing = set(topics)
    ends: dict[str, dict[int, int]] = {}
    for topic in sorted({tp.topic for tp in tps} & existing):
        with contextlib.suppress(UnknownTopicOrPartitionError):  # deleted since we listed the topics
            ends[topic] = end_offsets(context, topic)
    partitions = []
    for tp in tps:
        committed = offsets[tp].offset if tp in offsets else None
        end = ends.get(tp.topic, {}).get(tp.partition)
        lag = end - committed if end is not None and committed is not None else None
        partitions.append(PartitionOffsets(tp.topic, tp.partition, committed, end, lag, owners.get(tp)))
    return tuple(partitions)


# -- changing --------------------------------------------------------------------


def _to_ms(value: object) -> int:
    """Milliseconds since the epoch from an int (ms) or a datetime.

    A naive datetime is UTC, as the producer reads record timestamps, so a
    reset to the time a record was stamped with finds it (Kafka's tool would
    take the local zone).
    """
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        # Before the epoch no record can be older: the same as the epoch itself.
        return max(0, int(value.timestamp() * 1000))
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOffsetError(f"a reset to a datetime needs ms since the epoch or a datetime, got {value!r}")
    return check_lookup_timestamp(value, "a reset to a datetime")


_SET_TO = "Value will be set to "


def clamp_to_log(tp: TopicPartition, offset: int, start: int, end: int) -> tuple[int, str | None]:
    """``offset`` clamped into the log's [``start``, ``end``], as kafka-consumer-groups clamps a
    reset, and the warning Kafka's tool logs when that moved it (ConsumerGroupCommand's
    checkOffsetsRange, word for word), else None."""
    if offset > end:
        return end, f"New offset ({offset}) is higher than latest offset for topic partition {tp}. {_SET_TO}{end}"
    if offset < start:
        return start, f"New offset ({offset}) is lower than earliest offset for topic partition {tp}. {_SET_TO}{start}"
    return offset, None


def _plan_reset(context: StoreContext, topics: list[str], to: str, value: object) -> dict[TopicPartition, int]:
    """New offsets for every partition of ``topics``, as kafka-consumer-groups computes them."""
    result: dict[TopicPartition, int] = {}
    for topic in topics:
        # Start before end: both only grow, so start <= end holds across the two reads.
        start = beginning_offsets(context, topic)
        end = end_offsets(context, topic)
        if to == "earliest":
            chosen = start
        elif to == "latest":
            chosen = end
        elif to == "offset":
            assert isinstance(value, int)
            chosen = {}
            for p in end:
                chosen[p], warning = clamp_to_log(TopicPartition(topic, p), value, start[p], end[p])
                if warning is not None:
                    log.warning("%s", warning)
        else:
            ms = _to_ms(value)
            found = offsets_for_times(context, topic, dict.fromkeys(end, ms))
            # A partition whose records are all older has no such offset: Kafka uses its end.
            chosen = {p: (hit.offset if hit is not None else end[p]) for p, hit in found.items()}
        result.update({TopicPartition(topic, p): chosen[p] for p in sorted(end)})
    return result


def reset_offsets(
    context: StoreContext,
    group_id: str,
    topics: Iterable[str],
    *,
    to: ResetTarget,
    value: int | datetime | None = None,
    dry_run: bool = False,
) -> dict[TopicPartition, int]:
    """Set the group's committed offset of every partition of ``topics``; returns the new offsets.

    ``to``: "earliest" (log start offset), "latest" (log end offset),
    "datetime" (``value`` ms or datetime: the first offset at or after it,
    the end offset where every record is older), "offset" (``value``, any
    Java long, clamped into [log start, log end] as Kafka does, with Kafka's
    warning logged for each partition it moved). With ``dry_run`` the
    offsets are computed and returned, nothing is committed.

    All offsets are committed in one Delta commit, or none. Raises
    GroupNotEmptyError while the group has live members (checked inside the
    commit, so a member joining concurrently makes it refuse rather than
    race), UnknownTopicOrPartitionError for an unknown topic,
    InvalidConfigError / InvalidOffsetError for bad arguments. A group that
    does not exist yet is created with these offsets, as in Kafka.
    """
    check_group_id(group_id, "group id")
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names:
        raise InvalidConfigError("reset_offsets needs at least one topic")
    if to not in RESET_TARGETS:
        raise InvalidConfigError(f"reset target {to!r} is not one of {', '.join(RESET_TARGETS)}")
    if to in ("earliest", "latest") and value is not None:
        raise InvalidConfigError(f"a reset to {to} takes no value, got {value!r}")
    if to == "offset":
        # Any Java long, as Kafka's --to-offset: clamped into the log below.
        if value is None:
            raise InvalidOffsetError("a reset to an offset needs an int offset, got None")
        check_offset(value, "a reset to an offset", low=MIN_LONG)
    if to == "datetime":
        _to_ms(value)  # fail on a bad value before any work
    known = context.latest_topics()
    for name in names:
        require_topic(known, name)

    # Checked before computing anything (a datetime lookup is a Spark job), and
    # so that a dry run is refused too, like Kafka's; the binding check is the
    # one inside the commit below.
    _require_inactive(context, _read_group(context, group_id), _now_ms(), "reset the offsets of")
    offsets = _plan_reset(context, list(dict.fromkeys(names)), to, value)
    if dry_run:
        return offsets

    alter_group_offsets(context, group_id, offsets)
    return offsets


def list_group_offsets(context: StoreContext, group_id: str) -> dict[TopicPartition, int]:
    """The group's committed offsets, as Kafka's ``AdminClient.listConsumerGroupOffsets`` (empty for a
    group that never committed)."""
    check_group_id(group_id, "group id")
    return {tp: o.offset for tp, o in _read_group(context, group_id).offsets.items()}


def require_inactive_group(context: StoreContext, group_id: str, action: str = "reset the offsets of") -> None:
    """Raise GroupNotEmptyError if the group has live members now (a check before planning; the
    binding one is inside :func:`alter_group_offsets`' commit)."""
    check_group_id(group_id, "group id")
    _require_inactive(context, _read_group(context, group_id), _now_ms(), action)


def alter_group_offsets(context: StoreContext, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Commit ``offsets`` as the group's committed offsets, as Kafka's
    ``AdminClient.alterConsumerGroupOffsets``: all in one Delta commit, or none.

    Raises GroupNotEmptyError while the group has live members (checked inside the commit, so a
    member joining concurrently makes it refuse rather than race) and UnknownTopicOrPartitionError
    when a topic is unknown or was deleted meanwhile. A group that does not exist yet is created with
    these offsets, as in Kafka. Offsets are taken as given (callers clamp them into the log); one
    that is not an int in 0..2**63-1 is InvalidOffsetError, before anything is read or written."""
    check_group_id(group_id, "group id")
    for tp, offset in offsets.items():
        check_offset(offset, f"offset for {tp}")
    names = sorted({tp.topic for tp in offsets})
    partitions = context.ensure_offsets_topic()
    log = _group_log(context, group_id, partitions)
    chosen = {tp: OffsetAndMetadata(offset) for tp, offset in offsets.items()}

    def plan(group: GroupRecords, view: TableState, now_ms: int) -> list[tuple[bytes, bytes | None]]:
        _require_inactive(context, group, now_ms, "reset the offsets of")
        for name in names:
            require_topic(view.topics, name)  # deleted since the offsets were computed
        # Generation -1 and no member: an admin commit, like a manual-assign consumer's.
        return list(offset_records(group_id, chosen, -1, None, now_ms, view.topics))

    writer = context.committer(f"lakelog-group-admin-{os.getpid()}")
    writer.append(GroupRecordsBatch(log, "reset_offsets", plan), _POLICY)


def delete_offsets(context: StoreContext, group_id: str, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Delete the group's committed offsets of ``partitions``, as Kafka's OffsetDelete
    (``AdminClient.deleteConsumerGroupOffsets``, KIP-496): tombstones in one commit, or
    nothing. Returns the partitions whose offsets were deleted (a partition without a
    committed offset is left as it is, as Kafka answers it without an error).

    Raises GroupIdNotFoundError when the group has neither state nor offsets,
    GroupSubscribedToTopicError when a live member is subscribed to one of the topics
    (both checked inside the commit), UnknownTopicOrPartitionError for a partition that
    does not exist.
    """
    check_group_id(group_id, "group id")
    wanted = sorted(set(partitions))
    topics = context.latest_topics()
    for tp in wanted:
        meta = topics.get(tp.topic)
        if meta is None or meta.internal or not 0 <= tp.partition < meta.partitions:
            raise UnknownTopicOrPartitionError(f"{tp} does not exist")
    offsets_partitions = _offsets_partitions(context)
    if offsets_partitions is None:
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    log = _group_log(context, group_id, offsets_partitions)
    deleted: list[TopicPartition] = []

    def plan(group: GroupRecords, view: TableState, now_ms: int) -> list[tuple[bytes, bytes | None]]:
        if not _exists(group):
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
        live = _live(context, group, now_ms)
        state = group.state
        consumer = _consumer_type(group)
        if consumer is not None:
            topics = {t for m in live if m in consumer.members for t in consumer.members[m].subscribed_topic_names}
        else:
            members = state.members if state is not None else {}
            topics = {t for m in live if m in members for t in _subscribed_topics(state, members[m])}  # type: ignore[arg-type]
        subscribed = sorted(topics & {tp.topic for tp in wanted})
        if subscribed:
            raise GroupSubscribedToTopicError(
                f"cannot delete the offsets of group {group_id!r} for topic {subscribed[0]!r}: "
                f"{len(live)} live member(s) are subscribed to it; stop them first"
            )
        deleted[:] = [tp for tp in wanted if tp in group.offsets]
        return [(offset_key(group_id, tp), None) for tp in deleted]

    writer = context.committer(f"lakelog-group-admin-{os.getpid()}")
    writer.append(GroupRecordsBatch(log, "delete_offsets", plan), _POLICY)
    return list(deleted)


def delete_group(context: StoreContext, group_id: str) -> None:
    """Delete the group: tombstones for its state and all its committed offsets, in one commit.

    Raises GroupIdNotFoundError when the group has neither state nor offsets,
    GroupNotEmptyError while it has live members (both checked inside the
    commit against the records it replaces; nothing is written then).
    """
    check_group_id(group_id, "group id")
    partitions = _offsets_partitions(context)
    if partitions is None:  # no group ever existed; do not create the topic to say so
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    log = _group_log(context, group_id, partitions)

    def plan(group: GroupRecords, view: TableState, now_ms: int) -> list[tuple[bytes, bytes | None]]:
        if not _exists(group):
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
        _require_inactive(context, group, now_ms, "delete")
        records: list[tuple[bytes, bytes | None]] = [(offset_key(group_id, tp), None) for tp in sorted(group.offsets)]
        if group.state is not None:
            records.append((group_key(group_id), None))
        if group.consumer is not None:
            records.append((consumer_group_key(group_id), None))
        return records

    writer = context.committer(f"lakelog-group-admin-{os.getpid()}")
    writer.append(GroupRecordsBatch(log, "delete_group", plan), _POLICY)
    LeaseStore(context.uri, group_id).remove_all()
