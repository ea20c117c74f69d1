"""Kafka's consumer group protocol (KIP-848) over a store, with no coordinator process.

A consumer-type group is one :class:`engine.groups.consumer_group.ConsumerGroup`
record in ``__consumer_offsets`` beside (never together with members of) the
classic record of the same group id; each ConsumerGroupHeartbeat is a
read-modify-write of it in one Delta commit, planned against the latest
version (two racing, the loser re-plans against the winner's group), and a
heartbeat that changes nothing commits nothing. A member's session is its
lease under ``_lakelog/groups/`` (:mod:`engine.groups.leases`), renewed by
each heartbeat through any agent; whoever handles a heartbeat fences the
members it saw silent for their session timeout, and those past their
rebalance timeout with partitions still to revoke.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lakelog.engine.commit import TableState
from lakelog.engine.groups.classic_coordinator import ClassicCoordinator
from lakelog.engine.groups.consumer_group import (
    ASSIGNORS,
    GROUP_ID_NOT_FOUND,
    HEARTBEAT_INTERVAL_MS,
    INVALID_REQUEST,
    LEAVE_GROUP_MEMBER_EPOCH,
    NONE,
    SESSION_TIMEOUT_MS,
    ConsumerGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    TopicInfo,
    expire,
    heartbeat,
    validate,
)
from lakelog.engine.groups.coordinator import GROUP_POLICY, GroupRecordsBatch
from lakelog.engine.groups.leases import LeaseStore
from lakelog.engine.groups.offsets_topic import GroupRecords, consumer_group_key
from lakelog.engine.topics import TopicMetadata


def topic_infos(topics: Mapping[str, TopicMetadata]) -> dict[str, TopicInfo]:
    """The store's topics (not the internal ones) as the consumer protocol names them."""
    return {n: TopicInfo(t.topic_id, t.partitions) for n, t in topics.items() if not t.internal}


class ConsumerGroupCoordinator:
    """ConsumerGroupHeartbeat for the groups of one store, sharing the classic coordinator's
    group logs and committer (both kinds of record live in the group's partition). Thread-safe."""

    def __init__(
        self,
        classic: ClassicCoordinator,
        *,
        assignors: Sequence[str] = ASSIGNORS,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
    ) -> None:
        self._classic = classic
        self.assignors = tuple(assignors)
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms

    def records(self, group_id: str) -> GroupRecords:
        """The group's latest records (its offsets possibly stale)."""
        return self._classic.group_log(group_id).latest(offsets=False)

    def read(self, group_id: str) -> ConsumerGroup | None:
        """The group's consumer-type state, None when it has none."""
        return self.records(group_id).consumer

    def heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResponse:
        """A ConsumerGroupHeartbeat: its answer once the group's change (if any) is committed.
        Kafka's rules (:func:`engine.groups.consumer_group.heartbeat`); a group id whose
        classic group has members is GROUP_ID_NOT_FOUND, as is a consumer group that does not
        exist for a heartbeat other than a join (GMM.getOrMaybeCreateConsumerGroup)."""
        if not group_id:
            return HeartbeatResponse(
                INVALID_REQUEST, "GroupId can't be empty.", request.member_id, request.member_epoch
            )
        bad = validate(request, self.assignors)
        if bad is not None:
            return bad
        known = self.read(group_id)
        sessions = {m: v.session_timeout_ms for m, v in known.members.items()} if known is not None else {}
        silent = self._classic.silent(group_id, sessions) - {request.member_id}
        log = self._classic.group_log(group_id)
        answer: list[HeartbeatResponse] = []
        fenced: set[str] = set()

        def plan(records: GroupRecords, view: TableState, now_ms: int) -> list[tuple[bytes, bytes | None]]:
            classic = records.state
            current = records.consumer
            if classic is not None and not classic.empty:
                answer[:] = [HeartbeatResponse(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group", "")]
                return []
            if current is None and request.member_epoch != 0:
                answer[:] = [HeartbeatResponse(GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.", "")]
                return []
            current = current or ConsumerGroup(group_id)
            expired = expire(current, silent, now_ms)
            new, response = heartbeat(
                expired,
                request,
                topic_infos(view.topics),
                now_ms,
                assignors=self.assignors,
                session_timeout_ms=self.session_timeout_ms,
            )
            if response.error != NONE:
                new = expired  # the deadlines' fencing is committed even when this heartbeat is refused
            answer[:] = [response]
            fenced.clear()
            fenced.update(set(current.members) - set(new.members) - {request.member_id})
            if new == records.consumer:
                return []
            return [(consumer_group_key(group_id), new.to_json().encode())]

        writer = self._classic.writer(group_id)
        writer.append(GroupRecordsBatch(log, "consumer_group_heartbeat", plan, reads_offsets=False), GROUP_POLICY)
        response = answer[0]
        leases = LeaseStore(log.uri, group_id)
        for member_id in fenced:
            leases.remove(member_id)
        if response.error == NONE:
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                leases.remove(request.member_id)
            elif request.member_epoch >= 0:
                # A static member leaving for a while (-2) keeps its lease, which then goes stale:
                # its session timeout ends its membership unless its instance id comes back.
                leases.renew(request.member_id, request.instance_id)
        return response
