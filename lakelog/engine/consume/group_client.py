"""The consumer side of the group protocol: one member of a consumer group, as Kafka's
``ConsumerCoordinator`` is the member side of Kafka's.

A :class:`GroupClient` joins its group, renews its lease from a heartbeat thread, runs a
round of the protocol when asked (:meth:`GroupClient.run_protocol`: join, revoke and sync,
take the new assignment), removes silent members and leaves. The group itself -- who is a
member, the generation, the assignment -- lives in the store (:mod:`engine.groups`): joins,
syncs, leaves and expiries are Delta commits to ``__consumer_offsets``, leases are objects
under ``_lakelog/groups/`` (:mod:`engine.groups.leases`).

What it asks of the consumer it serves is :class:`GroupMember`: the subscription, the
partitions it owns, giving some up (the consumer commits their positions and runs its
rebalance listener) and taking new ones. :class:`engine.consume.consumer.Consumer` runs a
round from ``poll``; ``lakelog serve`` (``kafka_endpoint.group_members``) runs rounds for the
Kafka clients it holds as members.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from lakelog.engine.commit import Committer, RetryPolicy, TableState
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import FencedInstanceIdError, LakelogError
from lakelog.engine.groups.coordinator import GroupLog, change_group, partition_counts
from lakelog.engine.groups.leases import LeaseStore, Liveness
from lakelog.engine.groups.state import GroupState, Member, expire, join, join_all, leave, overdue, sync
from lakelog.engine.topics import TopicPartition, resolve_topic_names

log = logging.getLogger(__name__)

# How often a waiting poll looks at the log while the member's group forms or rebalances
# (a look at a log with no new commit is one failed open).
REBALANCE_LOOK_S = 0.005
# Longest a joining member leaves its join to a member that announced itself earlier.
JOIN_FOLLOW_S = 0.25


class GroupMember(Protocol):
    """What the group client needs of the consumer it is the member side of."""

    def subscription(self) -> list[str] | re.Pattern[str] | None:
        """The topics subscribed to (None: no subscription, nothing to run)."""

    def assignment(self) -> set[TopicPartition]:
        """The partitions the consumer owns now."""

    def revoke(self, partitions: set[TopicPartition], *, lost: bool) -> None:
        """Give up ``partitions`` (revoked, or ``lost`` when another may own them already)."""

    def assign(self, partitions: set[TopicPartition]) -> None:
        """Take ``partitions`` (new ones of this member's assignment; maybe none)."""

    def fenced(self) -> None:
        """A newer instance of the same ``group.instance.id`` joined: the consumer is closed."""


class GroupClient:
    """One member of ``group_id``, for one consumer. ``run_protocol`` runs in the consumer's
    thread (rebalance callbacks run there, as in Kafka); a heartbeat thread renews the lease.
    ``member_id`` and ``generation`` may be read from any thread."""

    def __init__(
        self,
        context: StoreContext,
        group_id: str,
        client_id: str,
        config: Mapping[str, Any],
        policy: RetryPolicy,
        records: PartitionReader,
        member: GroupMember,
    ) -> None:
        self._context = context
        self.group_id = group_id
        self.client_id = client_id
        self._config = config
        self._policy = policy
        self._records = records
        self._member = member
        self._writer: Committer | None = None
        self._group_log: GroupLog | None = None
        # The table version the group protocol last looked at: the group changes only by commits.
        self._protocol_version = -1
        # Whether that look found the group forming or rebalancing (a waiting poll looks often).
        self.rebalancing = False
        # Membership, shared with the heartbeat thread.
        self._lock = threading.Lock()
        self._member_id: str | None = None
        self._instance_id: str | None = config["group.instance.id"] or None
        self._generation = -1
        self._leases: LeaseStore | None = None
        self._lease_renewed = time.monotonic()
        self._heartbeat_error: BaseException | None = None
        self._last_poll = time.monotonic()
        self._stop = threading.Event()
        self._heartbeats: threading.Thread | None = None

    # -- what others read -----------------------------------------------------------

    @property
    def member_id(self) -> str | None:
        """This member's id in the group; None before it joined and after it left or was removed."""
        with self._lock:
            return self._member_id

    @property
    def generation(self) -> int:
        """The group generation of this member's assignment (-1 when not a member)."""
        with self._lock:
            return self._generation

    def metadata(self) -> tuple[int, str | None]:
        """(generation, member id), read together: what an offset commit carries."""
        with self._lock:
            return self._generation, self._member_id

    def state(self) -> GroupState | None:
        """The group as the latest version of the table holds it (None: never formed)."""
        return self.group_log().latest(self._context.log.latest(), offsets=False).state

    # -- what the consumer tells it ---------------------------------------------------

    def polled(self) -> None:
        """The consumer is polling: it is alive as far as ``max.poll.interval.ms`` goes."""
        self._last_poll = time.monotonic()

    def rejoin(self) -> None:
        """Look at the group at the next round even if the table did not move (a changed
        subscription rejoins there)."""
        self._protocol_version = -1

    # -- the store's side ---------------------------------------------------------------

    def writer(self) -> Committer:
        """The committer of this member's group changes and offset commits (creates
        ``__consumer_offsets`` first if needed)."""
        if self._writer is None:
            self._context.ensure_offsets_topic()
            self._writer = self._context.committer(self.client_id)
        return self._writer

    def group_log(self) -> GroupLog:
        """The group's records in ``__consumer_offsets`` (created first if needed)."""
        if self._group_log is None:
            partitions = self._context.ensure_offsets_topic()
            self._group_log = GroupLog(self._context.log, self._records, self.group_id, partitions)
        return self._group_log

    def _lease_store(self) -> LeaseStore:
        if self._leases is None:
            self._leases = LeaseStore(self._context.uri, self.group_id)
        return self._leases

    def _subscribed_topics(self, view_topics: Mapping[str, Any]) -> tuple[str, ...]:
        spec = self._member.subscription()
        if isinstance(spec, re.Pattern):
            return tuple(resolve_topic_names(spec, view_topics))
        return tuple(t for t in spec or () if t in view_topics)

    def _as_member(self, view_topics: Mapping[str, Any]) -> Member:
        return Member(
            self._member_id or "",
            self.client_id,
            self._subscribed_topics(view_topics),
            self._config["session.timeout.ms"],
            self._config["max.poll.interval.ms"],
            self._instance_id,
        )

    def _change(self, operation: str, change: Any) -> GroupState:
        return change_group(self.writer(), self.group_log(), operation, change, self._policy)

    # -- a round of the protocol ----------------------------------------------------------

    def run_protocol(self) -> None:
        """One round of Kafka's consumer coordinator, in the polling thread: join, revoke and
        sync, take a new assignment. Callbacks run here. Raises what the heartbeat thread
        met since the last round, FencedInstanceIdError when a newer instance of this
        member's ``group.instance.id`` joined, and what a group commit raises."""
        if self._heartbeat_error is not None:
            error, self._heartbeat_error = self._heartbeat_error, None
            raise error
        if self._member.subscription() is None:
            return
        if self._member_id is None:
            self._join()
        view = self._context.log.latest()
        if view.version == self._protocol_version and not self._lease_lapsed():
            return  # no commit since the last complete round: the group is as it was
        group = self.group_log().latest(view, offsets=False).state or GroupState(self.group_log().group_id)
        member_id = self._member_id
        assert member_id is not None
        me = group.members.get(member_id)
        if me is None or self._lease_lapsed():
            self._lose_membership(group)
            self.rebalancing = True  # it joins again at the next look
            return
        wanted = self._as_member(view.topics)
        counts = {t: n for t, n in partition_counts(view).items() if t in wanted.topics}
        if wanted.topics != me.topics or counts != {t: n for t, n in group.partition_counts.items() if t in counts}:
            # A changed subscription (a pattern matched a new topic) or a grown topic rebalances.
            group = self._change(
                "join_group", lambda st, now, v: join(st, self._as_member(v.topics), now, partition_counts(v))
            )
        to_revoke = set(group.to_revoke(member_id))
        if to_revoke:
            self._member.revoke(to_revoke & self._member.assignment(), lost=False)
            group = self._change("sync_group", lambda st, now, v: sync(st, member_id, to_revoke))
        assigned = set(group.assigned(member_id))
        owned = self._member.assignment()
        if group.generation != self._generation or assigned != owned:
            if owned - assigned:
                # Taken without a revocation of ours (we were removed and joined again): lost.
                self._member.revoke(owned - assigned, lost=True)
            added = assigned - self._member.assignment()
            with self._lock:
                self._generation = group.generation
            self._member.assign(added)
            if added or owned != assigned:
                log.info("%s: generation %d, assigned %s", member_id, group.generation, sorted(assigned))
        self.rebalancing = group.rebalancing
        self._protocol_version = view.version

    def _join(self) -> None:
        with self._lock:
            self._member_id = f"{self.client_id}-{uuid.uuid4()}"
            self._generation = -1
        member_id = self._member_id
        leases = self._lease_store()
        leases.renew(member_id, self._instance_id)
        self._lease_renewed = time.monotonic()
        assignor = self._config["partition.assignment.strategy"]
        leases.announce(self._as_member(self._context.log.latest().topics))

        def change(state: GroupState, now_ms: int, view: TableState) -> GroupState:
            # Members announced as joining come in with this join: one rebalance for all.
            others = [m for m in leases.announced(now_ms) if m.member_id != member_id]
            return join_all(state, [self._as_member(view.topics), *others], now_ms, partition_counts(view), assignor)

        try:
            self._follow_earlier_join(leases, member_id)
            self._change("join_group", change)  # commits nothing if that join admitted us
        finally:
            leases.withdraw(member_id)
        self._start_heartbeats()

    def _follow_earlier_join(self, leases: LeaseStore, member_id: str) -> None:
        """Members starting together: leave the join to the one announced first, whose join
        admits every member announced by the time it is planned (one rebalance for all); the
        others' joins would only lose the version to it and be planned again, costing every
        member time while the group forms. Returns once the group holds this member, once
        that member's join landed without it (announced too late: it joins itself), or after
        JOIN_FOLLOW_S (that member may have died before joining)."""
        first = leases.first_announced(int(time.time() * 1000))
        if first is None or first == member_id:
            return
        deadline = time.monotonic() + JOIN_FOLLOW_S
        while time.monotonic() < deadline:
            state = self.group_log().latest(offsets=False).state
            if state is not None and (member_id in state.members or first in state.members):
                return
            time.sleep(REBALANCE_LOOK_S)

    def _lease_lapsed(self) -> bool:
        """Whether this member must assume the others removed it: its lease was not renewed for
        its session timeout, less one heartbeat of margin (they wait the whole timeout)."""
        cfg = self._config
        limit = (cfg["session.timeout.ms"] - cfg["heartbeat.interval.ms"]) / 1000
        return time.monotonic() - self._lease_renewed > limit

    def _lose_membership(self, group: GroupState) -> None:
        """We are not (or may no longer be) a member: our partitions are lost; join again."""
        member_id = self._member_id
        self._member.revoke(self._member.assignment(), lost=True)
        self._stop_heartbeats()
        with self._lock:
            self._member_id = None
            self._generation = -1
        if self._instance_id is not None:
            holder = group.member_for_instance(self._instance_id)
            if holder is not None and holder.member_id != member_id:
                self._member.fenced()
                raise FencedInstanceIdError(
                    f"group.instance.id {self._instance_id!r} joined group {self.group_id!r} under member id "
                    f"{holder.member_id}; this instance ({member_id}) is fenced and closed"
                )
        log.warning(
            "%s: no longer a member of group %s; its partitions are lost, joining again", member_id, self.group_id
        )

    # -- the heartbeat thread ---------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        if self._heartbeats is not None and self._heartbeats.is_alive():
            return
        self._stop.clear()
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, name=f"{self.client_id}-hb", daemon=True)
        self._heartbeats.start()

    def _stop_heartbeats(self) -> None:
        self._stop.set()
        if self._heartbeats is not None and self._heartbeats is not threading.current_thread():
            self._heartbeats.join()
        self._heartbeats = None

    def _heartbeat_loop(self) -> None:
        """Renew the lease; remove members whose leases went silent or who owe a revocation past
        their rebalance timeout (Kafka's coordinator does both). No Delta commit unless someone
        is removed."""
        cfg = self._config
        interval = cfg["heartbeat.interval.ms"] / 1000
        liveness = Liveness(time.monotonic())
        while not self._stop.wait(interval):
            if time.monotonic() - self._last_poll > cfg["max.poll.interval.ms"] / 1000:
                log.warning("%s: no poll within max.poll.interval.ms, leaving the group", self._member_id)
                self.leave(stop_thread=False)
                return
            member_id = self._member_id
            if member_id is None:
                return
            try:
                self._lease_store().renew(member_id, self._instance_id)
                self._lease_renewed = time.monotonic()
                self._expire_silent(liveness, member_id)
            except LakelogError as exc:
                log.warning("%s: heartbeat failed: %s", member_id, exc)
            except OSError as exc:
                log.warning("%s: renewing the lease failed: %s", member_id, exc)
            except Exception as exc:  # the store is gone (closing); the poll thread learns of it
                self._heartbeat_error = exc
                return

    def _expire_silent(self, liveness: Liveness, member_id: str) -> None:
        group = self.group_log().latest(offsets=False).state
        if group is None or member_id not in group.members:
            return
        others = {m: v.session_timeout_ms for m, v in group.members.items() if m != member_id}
        now = time.monotonic()
        liveness.observe(self._lease_store().read(), others, now)
        gone = set(liveness.silent(others, now)) | set(overdue(group, int(time.time() * 1000)))
        gone.discard(member_id)
        if gone:
            log.info("%s: removing silent member(s) %s from group %s", member_id, sorted(gone), self.group_id)
            self._change("expire_members", lambda st, now_ms, v: expire(st, gone, now_ms, partition_counts(v)))

    # -- leaving ----------------------------------------------------------------------------

    def leave(self, stop_thread: bool = True) -> None:
        """Leave the group and drop the lease (the consumer revoked first, in its own thread).
        A static member does not leave: its partitions wait for it for session.timeout.ms
        (KIP-345). A failure is logged: the others will time the member out."""
        if stop_thread:
            self._stop_heartbeats()
        with self._lock:
            member_id, self._member_id = self._member_id, None
            self._generation = -1
        if member_id is None:
            return
        if self._instance_id is not None:
            return

        def change(state: GroupState, now_ms: int, view: Any) -> GroupState:
            return leave(state, member_id, now_ms, partition_counts(view))

        try:
            self._change("leave_group", change)
            self._lease_store().remove(member_id)
        except LakelogError as exc:  # the others will time the member out
            log.warning("%s: leaving group %s failed: %s", member_id, self.group_id, exc)
