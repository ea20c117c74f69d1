"""Kafka's classic group protocol over a store, with no coordinator process.

A group is one :class:`engine.groups.classic.ClassicGroup` record in
``__consumer_offsets``; each request is a read-modify-write of it in one
Delta commit (two racing, the loser re-plans against the winner's group, the
commit core's conflict rule). A JoinGroup or SyncGroup that must wait for the
others -- the rest of the round, the leader's assignments -- waits here by
reading the group again with a short backoff, in whichever agent or process
the client reached; and whoever, waiting or heartbeating, sees a deadline
pass (the round's rebalance timeout, a SyncGroup owed, a member's session
timeout) commits what Kafka's coordinator would do then. A member's session
is its lease under ``_lakelog/groups/`` (:mod:`engine.groups.leases`),
renewed by its JoinGroup, SyncGroup and Heartbeat through any agent: so a
member whose agent dies keeps its membership, through another agent, until
its own session timeout.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from lakelog.engine.commit import Committer, RetryPolicy, TableState
from lakelog.engine.context import StoreContext
from lakelog.engine.groups.classic import (
    INCONSISTENT_GROUP_PROTOCOL,
    NONE,
    REBALANCE_IN_PROGRESS,
    ClassicGroup,
    JoinRequest,
    JoinResponse,
    JoinResult,
    SyncRequest,
    advance,
    heartbeat,
    join,
    join_outcome,
    join_response,
    leave,
    member_error,
    next_deadline,
    static_rejoin_response,
    sync,
    sync_outcome,
)
from lakelog.engine.groups.coordinator import GROUP_POLICY, GroupLog, GroupRecordsBatch, commit_offsets
from lakelog.engine.groups.leases import LeaseStore, Liveness
from lakelog.engine.groups.offsets_topic import GroupRecords, OffsetAndMetadata, group_key
from lakelog.engine.topics import TopicPartition

T = TypeVar("T")

# How long a waiting JoinGroup/SyncGroup first sleeps between looks at the group, and at most.
LOOK_S = 0.02
LOOK_MAX_S = 0.25


def _now_ms() -> int:
    return int(time.time() * 1000)


class ClassicCoordinator:
    """The classic protocol's requests for the groups of one store. Thread-safe: each request
    runs in its caller's thread (an agent answers many at once). ``stopping`` set: waiting
    requests return at once (REBALANCE_IN_PROGRESS: the client asks again elsewhere)."""

    def __init__(
        self,
        context: StoreContext,
        client_id: str,
        *,
        initial_delay_ms: int | None = None,
        policy: RetryPolicy = GROUP_POLICY,
        stopping: threading.Event | None = None,
    ) -> None:
        self._context = context
        self._client_id = client_id
        # The store's group.initial.rebalance.delay.ms unless given.
        self._initial_delay_ms = (
            context.settings.group_initial_rebalance_delay_ms if initial_delay_ms is None else initial_delay_ms
        )
        self._policy = policy
        self.stopping = stopping or threading.Event()
        self._lock = threading.Lock()
        self._writer: Committer | None = None
        self._logs: dict[str, GroupLog] = {}
        self._liveness: dict[str, Liveness] = {}  # what this process saw of each group's leases

    # -- the store -----------------------------------------------------------------------------

    def group_log(self, group_id: str) -> GroupLog:
        """The group's records in ``__consumer_offsets`` (created first if needed)."""
        return self._group_log(group_id)

    def writer(self, group_id: str) -> Committer:
        """The committer of the group's changes and offset commits (``__consumer_offsets`` is
        created first if needed)."""
        self._group_log(group_id)
        assert self._writer is not None
        return self._writer

    def renew(self, group_id: str, member_id: str, instance_id: str | None) -> None:
        """Renew the member's session (its lease); raises as :meth:`LeaseStore.renew`."""
        self._leases(group_id).renew(member_id, instance_id)

    def _group_log(self, group_id: str) -> GroupLog:
        with self._lock:
            found = self._logs.get(group_id)
            if found is None:
                partitions = self._context.ensure_offsets_topic()
                found = GroupLog(self._context.log, self._context.records, group_id, partitions)
                self._logs[group_id] = found
            if self._writer is None:
                self._writer = self._context.committer(self._client_id)
            return found

    def read(self, group_id: str) -> ClassicGroup:
        """The group as the latest version of the table holds it (an empty one if none)."""
        return self._records(group_id).state or ClassicGroup(group_id)

    def _records(self, group_id: str) -> GroupRecords:
        return self._group_log(group_id).latest(offsets=False)

    def _change(
        self, group_id: str, operation: str, change: Callable[[ClassicGroup, GroupRecords, int], tuple[ClassicGroup, T]]
    ) -> tuple[ClassicGroup, T]:
        """Commit ``change`` of the group's latest value (nothing when it changes nothing)."""
        log = self._group_log(group_id)
        result: list[tuple[ClassicGroup, T]] = []

        def plan(group: GroupRecords, view: TableState, now_ms: int) -> list[tuple[bytes, bytes | None]]:
            current = group.state or ClassicGroup(group_id)
            result[:] = [change(current, group, now_ms)]
            new = result[0][0]
            if new == current:
                return []
            return [(group_key(group_id), new.to_json().encode())]

        assert self._writer is not None
        self._writer.append(GroupRecordsBatch(log, operation, plan, reads_offsets=False), self._policy)
        return result[0]

    def _leases(self, group_id: str) -> LeaseStore:
        return LeaseStore(self._context.uri, group_id)

    def _expired(self, group: ClassicGroup) -> set[str]:
        """Members whose leases this process saw unchanged for their session timeout."""
        return self.silent(group.group_id, {m: v.session_timeout_ms for m, v in group.members.items()})

    def silent(self, group_id: str, members: Mapping[str, int]) -> set[str]:
        """Of ``members`` (member id -> session timeout ms), those whose leases this process saw
        unchanged for their session timeout (one listing of the group's leases)."""
        now = time.monotonic()
        with self._lock:
            liveness = self._liveness.setdefault(group_id, Liveness())
        leases = self._leases(group_id).read() if members else {}
        with self._lock:
            liveness.observe(leases, members, now)
            return set(liveness.silent(members, now))

    def tick(self, group_id: str, group: ClassicGroup | None = None) -> ClassicGroup:
        """Commit what time did to the group (expired sessions, a round or a SyncGroup past its
        deadline), if anything; the group after it."""
        group = group if group is not None else self.read(group_id)
        expired = self._expired(group)
        deadline = next_deadline(group)
        now_ms = _now_ms()
        lapsed = any(until <= now_ms for until in group.pending.values())
        if not expired and not lapsed and (deadline is None or deadline > now_ms):
            return group
        changed, _ = self._change(group_id, "group_deadlines", lambda g, r, now: (advance(g, now, expired), None))
        return changed

    # -- the requests ----------------------------------------------------------------------------

    def join_start(self, group_id: str, request: JoinRequest) -> tuple[ClassicGroup, JoinResult, int]:
        """Commit a JoinGroup: (the group after it, its result, the generation it joined at, for
        :meth:`join_check`). A member that joined has its session (lease) started."""
        new_id = f"{request.instance_id or request.client_id}-{uuid.uuid4()}"
        joined: list[int] = []

        def change(group: ClassicGroup, records: GroupRecords, now_ms: int) -> tuple[ClassicGroup, JoinResult]:
            joined[:] = [group.generation]
            if records.consumer is not None and not records.consumer.empty:
                # A consumer-type (KIP-848) group with members. Kafka 4 lets a classic member into
                # it (GMM.classicGroupJoin -> classicGroupJoinToConsumerGroup); lakelog does not mix
                # protocols in one group and answers what Kafka answers a group of another type.
                return group, JoinResult(INCONSISTENT_GROUP_PROTOCOL, request.member_id)
            return join(group, request, new_id, now_ms, self._initial_delay_ms)

        group, result = self._change(group_id, "join_group", change)
        if result.error == NONE:
            self._leases(group_id).renew(result.member_id, request.instance_id)
        return group, result, joined[0]

    def join_check(self, group_id: str, member_id: str, joined_generation: int) -> JoinResponse | None:
        """The answer of a JoinGroup that waits since ``joined_generation``, None while its round
        is in progress (committing what deadlines did meanwhile)."""
        return join_outcome(self.tick(group_id), member_id, joined_generation)

    def join(self, group_id: str, request: JoinRequest) -> JoinResponse:
        """JoinGroup: answers at once (MEMBER_ID_REQUIRED, an error, the current generation) or
        once the round it joined completed; REBALANCE_IN_PROGRESS when ``stopping``."""
        group, result, joined = self.join_start(group_id, request)
        if result.error != NONE:
            return JoinResponse(result.error, result.member_id)
        member_id = result.member_id
        if result.static_rejoin:
            return static_rejoin_response(group, member_id, result.previous_leader, request.supports_skip_assignment)
        if not result.wait:
            return join_response(group, member_id)
        return self._wait(
            group_id,
            group,
            member_id,
            request.instance_id,
            request.session_timeout_ms,
            lambda g: join_outcome(g, member_id, joined),
            lambda: JoinResponse(REBALANCE_IN_PROGRESS, member_id),
        )

    def sync_start(self, group_id: str, request: SyncRequest) -> tuple[ClassicGroup, str]:
        """Commit a SyncGroup (the leader's: its assignments); the group after it and its error."""
        group, error = self._change(group_id, "sync_group", lambda g, r, now: sync(g, request))
        if error == NONE:
            self._leases(group_id).renew(request.member_id, request.instance_id)
        return group, error

    def sync_check(self, group_id: str, member_id: str, generation: int) -> tuple[str, bytes] | None:
        """(error, assignment) of a SyncGroup of ``generation``, None while the leader's has not
        arrived (committing what deadlines did meanwhile)."""
        return sync_outcome(self.tick(group_id), member_id, generation)

    def sync(self, group_id: str, request: SyncRequest) -> tuple[str, bytes, ClassicGroup]:
        """SyncGroup: (error, assignment, the group) once the leader's assignments are stored."""
        group, error = self.sync_start(group_id, request)
        if error != NONE:
            return error, b"", group
        member = group.members.get(request.member_id)
        session = member.session_timeout_ms if member is not None else 10_000
        error, assignment = self._wait(
            group_id,
            group,
            request.member_id,
            request.instance_id,
            session,
            lambda g: sync_outcome(g, request.member_id, request.generation),
            lambda: (REBALANCE_IN_PROGRESS, b""),
        )
        return error, assignment, self.read(group_id)

    def _wait(
        self,
        group_id: str,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        session_timeout_ms: int,
        outcome: Callable[[ClassicGroup], T | None],
        stopped: Callable[[], T],
    ) -> T:
        """Look at the group until ``outcome`` is decided, keeping the waiting member's session
        alive and committing what deadlines do meanwhile."""
        look = LOOK_S
        renewed = time.monotonic()
        leases = self._leases(group_id)
        while True:
            found = outcome(group)
            if found is not None:
                return found
            if self.stopping.wait(look):
                return stopped()
            look = min(LOOK_MAX_S, look * 1.5)
            if time.monotonic() - renewed > session_timeout_ms / 3000:
                leases.renew(member_id, instance_id)
                renewed = time.monotonic()
            group = self.tick(group_id)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> str:
        """Heartbeat: renews the member's session (its lease; no Delta commit) and answers
        Kafka's error; commits what deadlines did to the group, seen on the way."""
        group = self.read(group_id)
        if member_error(group, member_id, instance_id) == NONE:
            self._leases(group_id).renew(member_id, instance_id)
        group = self.tick(group_id, group)
        return heartbeat(group, member_id, instance_id, generation)

    def leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]) -> list[tuple[str, str]]:
        """LeaveGroup: (member id, error) per member, in request order."""
        _, errors = self._change(group_id, "leave_group", lambda g, r, now: leave(g, leaving, now))
        leases = self._leases(group_id)
        for member_id, error in errors:
            if error == NONE and member_id:
                leases.remove(member_id)
        return errors

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        generation: int,
        member_id: str | None,
        instance_id: str | None,
        api_version: int = 9,
    ) -> None:
        """OffsetCommit, checked as :func:`engine.groups.coordinator.check_group_commit` does
        (``generation``: the member epoch in a consumer-type group). Raises UnknownMemberIdError,
        FencedInstanceIdError, CommitFailedError, StaleMemberEpochError, UnsupportedVersionError
        (nothing committed)."""
        log = self._group_log(group_id)
        assert self._writer is not None
        commit_offsets(self._writer, log, offsets, generation, member_id, self._policy, instance_id, api_version)
