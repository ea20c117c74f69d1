"""The consumer side of the group protocol: one member of a consumer group, as Kafka's
``ConsumerCoordinator`` is the member side of Kafka's.

A lakelog consumer is an ordinary member of Kafka's classic group protocol
(:mod:`engine.groups.classic`), the same group Kafka's clients join through
``lakelog serve``: it joins with protocol type ``consumer``, one protocol per
``partition.assignment.strategy`` entry with Kafka's ConsumerProtocolSubscription
bytes (:mod:`engine.groups.consumer_protocol`), and when it is the leader it
computes the assignment with lakelog's assignor of the chosen protocol
(:mod:`engine.groups.assignors`) and hands every member its
ConsumerProtocolAssignment. So Python, librdkafka and Java members share one
group, whoever leads it. The group lives in the store; JoinGroup and SyncGroup
are Delta commits (:mod:`engine.groups.classic_coordinator`), and a member
waits for their outcome without blocking its ``poll``: each round
(:meth:`GroupClient.run_protocol`) looks whether it is decided.

Eager protocols (range, roundrobin, sticky): a member revokes everything before
it joins again. Cooperative-sticky (KIP-429), as Java's ConsumerCoordinator: the
leader leaves partitions that move out of the first assignment, their owners
revoke them and join again, the next round hands them over. A heartbeat
thread renews the member's lease (its session) and commits what deadlines do
(members whose sessions expired, a round past its rebalance timeout).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from lakelog.engine.client_config import parse_strategies
from lakelog.engine.commit import Committer, RetryPolicy
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import (
    FencedInstanceIdError,
    InconsistentGroupProtocolError,
    InvalidRecordError,
    LakelogError,
)
from lakelog.engine.groups.assignors import Subscription, assign, cooperative_round, is_cooperative
from lakelog.engine.groups.classic import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    JoinRequest,
    JoinResponse,
    SyncRequest,
    heartbeat,
    join_response,
)
from lakelog.engine.groups.classic_coordinator import ClassicCoordinator
from lakelog.engine.groups.consumer_protocol import (
    PROTOCOL_TYPE,
    MemberSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from lakelog.engine.groups.coordinator import GroupLog, partition_counts
from lakelog.engine.topics import TopicPartition, resolve_topic_names

log = logging.getLogger(__name__)

# How often a waiting poll looks at the log while the member's group forms or rebalances
# (a look at a log with no new commit is one failed open).
REBALANCE_LOOK_S = 0.005

# Where the member is in the protocol (Kafka's AbstractCoordinator.MemberState, plus "to join").
UNJOINED = "unjoined"  # must send a JoinGroup
JOINING = "joining"  # its JoinGroup waits for the round to complete
SYNCING = "syncing"  # its SyncGroup waits for the leader's assignments
STABLE = "stable"


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
        self._member = member
        self._strategies = parse_strategies(config["partition.assignment.strategy"])
        self.coordinator = ClassicCoordinator(context, client_id, policy=policy)
        # The table version the protocol last looked at while stable: the group changes only by commits.
        self._protocol_version = -1
        # Whether the member is not stable: it must join, or is joining or syncing (a waiting poll looks often).
        self.rebalancing = False
        self._phase = UNJOINED
        self._joined_generation = -1
        self._sync_generation = -1
        self._protocol: str | None = None
        self._topics: tuple[str, ...] = ()  # the subscription it joined with
        self._counts: dict[str, int] = {}  # leader: partition counts its assignment was made for
        self._leader = False
        # Membership, shared with the heartbeat thread.
        self._lock = threading.Lock()
        self._member_id: str | None = None
        self._instance_id: str | None = config["group.instance.id"] or None
        self._generation = -1
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

    def commit_metadata(self) -> tuple[int, str | None]:
        """(generation, member id) for an offset commit from the consumer's thread: while its
        JoinGroup waits, the generation of the round it joined once that completed (the
        JoinGroup's answer, which a Java member commits with too)."""
        generation, member_id = self.metadata()
        if self._phase == JOINING and member_id is not None and self._joined_generation != -2:
            answer = self.coordinator.join_check(self.group_id, member_id, self._joined_generation)
            if answer is not None and answer.error == NONE:
                return answer.generation, member_id
        return generation, member_id

    def state(self) -> ClassicGroup:
        """The group as the latest version of the table holds it."""
        return self.coordinator.read(self.group_id)

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
        return self.coordinator.writer(self.group_id)

    def group_log(self) -> GroupLog:
        """The group's records in ``__consumer_offsets`` (created first if needed)."""
        return self.coordinator.group_log(self.group_id)

    def _subscribed_topics(self, view_topics: Mapping[str, Any]) -> tuple[str, ...]:
        spec = self._member.subscription()
        if isinstance(spec, re.Pattern):
            return tuple(sorted(resolve_topic_names(spec, view_topics)))
        return tuple(sorted(t for t in spec or () if t in view_topics))

    # -- a round of the protocol ----------------------------------------------------------

    def run_protocol(self) -> None:
        """One look at the group protocol, in the polling thread: join, sync, take a new
        assignment, as far as the group has decided; callbacks run here. Raises what the
        heartbeat thread met since the last round, FencedInstanceIdError when a newer instance
        of this member's ``group.instance.id`` joined, and what a group commit raises."""
        if self._heartbeat_error is not None:
            error, self._heartbeat_error = self._heartbeat_error, None
            raise error
        if self._member.subscription() is None:
            return
        if self._phase == STABLE and not self._must_rejoin():
            return
        if self._phase == UNJOINED:
            self._join()
        if self._phase == JOINING:
            self._joining()
        if self._phase == SYNCING:
            self._syncing()
        self.rebalancing = self._phase != STABLE

    @property
    def mid_rebalance(self) -> bool:
        """Whether this member sent a JoinGroup whose generation it has not synced yet (Java's
        rebalanceInProgress(): PREPARING_REBALANCE or COMPLETING_REBALANCE)."""
        return self._phase in (JOINING, SYNCING)

    def _must_rejoin(self) -> bool:
        """Stable: whether the group (or the subscription, or a topic's partition count) asks
        this member to join again. Sets the phase to UNJOINED when it does."""
        view = self._context.log.latest()
        if view.version == self._protocol_version and not self._lease_lapsed():
            return False
        if self._lease_lapsed():
            self._lose("its lease lapsed", reset_member=True)
            return True
        group = self.coordinator.read(self.group_id)
        member_id = self._member_id
        assert member_id is not None
        error = heartbeat(group, member_id, self._instance_id, self._generation)
        if error == FENCED_INSTANCE_ID:
            self._fence(group)
        if error in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            self._lose(f"the group answers {error}", reset_member=error == UNKNOWN_MEMBER_ID)
            return True
        if error == REBALANCE_IN_PROGRESS or self._subscribed_topics(view.topics) != self._topics:
            self._prepare_rejoin()
            return True
        if self._leader and self._wanted_counts(group, view) != self._counts:
            self._prepare_rejoin()  # the leader sees a topic grow: a new assignment (Kafka's metadata check)
            return True
        self._protocol_version = view.version
        return False

    def _wanted_counts(self, group: ClassicGroup, view: Any) -> dict[str, int]:
        topics: set[str] = set()
        for m in group.members.values():
            topics.update(_subscription(m.metadata(group.protocol)).topics)
        return {t: n for t, n in partition_counts(view).items() if t in topics}

    def _prepare_rejoin(self) -> None:
        """Kafka's onJoinPrepare: eager protocols give up everything first (the listener runs,
        positions are committed); cooperative-sticky keeps what it owns."""
        if self._protocol is None or not is_cooperative(self._protocol):
            self._member.revoke(self._member.assignment(), lost=False)
        self._phase = UNJOINED

    def _join(self) -> None:
        view = self._context.log.latest()
        self._topics = self._subscribed_topics(view.topics)
        owned = sorted(self._member.assignment())
        protocols = tuple(
            (name, encode_subscription(self._topics, owned, self._generation)) for name in self._strategies
        )
        request = JoinRequest(
            member_id=self._member_id or "",
            client_id=self.client_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=protocols,
            session_timeout_ms=self._config["session.timeout.ms"],
            rebalance_timeout_ms=self._config["max.poll.interval.ms"],
            instance_id=self._instance_id,
            client_host="/lakelog",
            # An in-process member never loses a JoinGroup answer: it takes its id at once.
            requires_known_member_id=False,
        )
        _, result, joined = self.coordinator.join_start(self.group_id, request)
        if result.error == UNKNOWN_MEMBER_ID:
            self._lose("the group does not know it", reset_member=True)
            return
        if result.error == FENCED_INSTANCE_ID:
            self._fence(self.coordinator.read(self.group_id))
        if result.error != NONE:
            raise InconsistentGroupProtocolError(
                f"group {self.group_id!r} refused consumer {self.client_id!r}: {result.error}; its members use "
                f"another protocol type, or none of partition.assignment.strategy {self._strategies} is one "
                "every member offers"
            )
        with self._lock:
            self._member_id = result.member_id
        self._lease_renewed = time.monotonic()
        self._joined_generation = joined if result.wait else -2
        self._phase = JOINING
        self._start_heartbeats()

    def _joining(self) -> None:
        member_id = self._member_id
        assert member_id is not None
        if self._joined_generation == -2:  # answered at once: the current generation
            answer: JoinResponse | None = join_response(self.coordinator.read(self.group_id), member_id)
        else:
            answer = self.coordinator.join_check(self.group_id, member_id, self._joined_generation)
        if answer is None:
            return
        if answer.error != NONE:
            self._lose(f"its JoinGroup got {answer.error}", reset_member=answer.error == UNKNOWN_MEMBER_ID)
            return
        self._protocol = answer.protocol
        self._leader = answer.leader == member_id
        with self._lock:
            self._generation = answer.generation  # as Java's: commits from here on are of this generation
        assignments: dict[str, bytes] = {}
        if self._leader and answer.members:
            assignments = self._assign(answer)
        request = SyncRequest(
            member_id, self._instance_id, answer.generation, PROTOCOL_TYPE, answer.protocol, assignments
        )
        group, error = self.coordinator.sync_start(self.group_id, request)
        if error != NONE:
            self._after_sync_error(error, group)
            return
        self._sync_generation = answer.generation
        self._phase = SYNCING

    def _assign(self, answer: JoinResponse) -> dict[str, bytes]:
        """The leader's assignment (Kafka's ConsumerCoordinator.onLeaderElected) with lakelog's
        assignor of the chosen protocol; cooperative-sticky leaves moving partitions out."""
        protocol = answer.protocol or self._strategies[0]
        subscriptions = []
        for member_id, instance_id, metadata in answer.members:
            sub = _subscription(metadata)
            subscriptions.append(Subscription(member_id, sub.topics, sub.owned, sub.generation, instance_id))
        view = self._context.log.latest()
        wanted = {t for s in subscriptions for t in s.topics}
        counts = {t: n for t, n in partition_counts(view).items() if t in wanted}
        self._counts = counts
        target = assign(protocol, subscriptions, counts)
        if is_cooperative(protocol):
            target, _ = cooperative_round(target, {s.member_id: s.owned for s in subscriptions})
        log.info("%s leads group %s (%s): %s", answer.member_id, self.group_id, protocol, target)
        return {m: encode_assignment(tps) for m, tps in target.items()}

    def _syncing(self) -> None:
        member_id = self._member_id
        assert member_id is not None
        found = self.coordinator.sync_check(self.group_id, member_id, self._sync_generation)
        if found is None:
            return
        error, data = found
        if error != NONE:
            self._after_sync_error(error, None)
            return
        try:
            assigned = decode_assignment(data)
        except InvalidRecordError as exc:
            log.warning("%s: unreadable assignment from the group's leader (%s): none taken", member_id, exc)
            assigned = set()
        # The new generation first, and stable: positions of revoked partitions are committed in
        # it (Java's ConsumerCoordinator revokes in onJoinComplete, stable by then).
        with self._lock:
            self._generation = self._sync_generation
        self._phase = STABLE
        self.rebalancing = False
        owned = self._member.assignment()
        revoked = owned - assigned
        if revoked:
            self._member.revoke(revoked, lost=False)
        self._member.assign(assigned - self._member.assignment())
        log.info("%s: generation %d, assigned %s", member_id, self._sync_generation, sorted(assigned))
        self._protocol_version = -1
        if revoked and self._protocol is not None and is_cooperative(self._protocol):
            self._phase = UNJOINED  # KIP-429: having revoked, join again so they move on

    def _after_sync_error(self, error: str, group: ClassicGroup | None) -> None:
        if error == FENCED_INSTANCE_ID:
            self._fence(group or self.coordinator.read(self.group_id))
        if error == REBALANCE_IN_PROGRESS:
            self._prepare_rejoin()
            return
        self._lose(f"its SyncGroup got {error}", reset_member=error == UNKNOWN_MEMBER_ID)

    def _lease_lapsed(self) -> bool:
        """Whether this member must assume the others removed it: its lease was not renewed for
        its session timeout, less one heartbeat of margin (they wait the whole timeout)."""
        cfg = self._config
        limit = (cfg["session.timeout.ms"] - cfg["heartbeat.interval.ms"]) / 1000
        return time.monotonic() - self._lease_renewed > limit

    def _lose(self, why: str, *, reset_member: bool) -> None:
        """Not (or maybe no longer) a member of the generation: its partitions are lost
        (another may own them already); join again."""
        member_id = self._member_id
        self._member.revoke(self._member.assignment(), lost=True)
        with self._lock:
            if reset_member:
                self._member_id = None
            self._generation = -1
        self._phase = UNJOINED
        self._protocol_version = -1
        log.warning("%s: %s; its partitions of group %s are lost, joining again", member_id, why, self.group_id)

    def _fence(self, group: ClassicGroup) -> None:
        holder = group.member_for_instance(self._instance_id) if self._instance_id is not None else None
        member_id = self._member_id
        self._member.revoke(self._member.assignment(), lost=True)
        self._stop_heartbeats()
        with self._lock:
            self._member_id = None
            self._generation = -1
        self._member.fenced()
        raise FencedInstanceIdError(
            f"group.instance.id {self._instance_id!r} joined group {self.group_id!r} under member id "
            f"{holder.member_id if holder else '?'}; this instance ({member_id}) is fenced and closed"
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
        """Renew the lease; commit what deadlines did to the group (members silent past their
        session, a round past its rebalance timeout), as Kafka's coordinator does. No Delta
        commit unless something changed."""
        cfg = self._config
        interval = cfg["heartbeat.interval.ms"] / 1000
        while not self._stop.wait(interval):
            if time.monotonic() - self._last_poll > cfg["max.poll.interval.ms"] / 1000:
                log.warning("%s: no poll within max.poll.interval.ms, leaving the group", self._member_id)
                self.leave(stop_thread=False)
                return
            member_id = self._member_id
            if member_id is None:
                return
            try:
                self.coordinator.renew(self.group_id, member_id, self._instance_id)
                self._lease_renewed = time.monotonic()
                self.coordinator.tick(self.group_id)
            except LakelogError as exc:
                log.warning("%s: heartbeat failed: %s", member_id, exc)
            except OSError as exc:
                log.warning("%s: renewing the lease failed: %s", member_id, exc)
            except Exception as exc:  # the store is gone (closing); the poll thread learns of it
                self._heartbeat_error = exc
                return

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
        self._phase = UNJOINED
        if member_id is None or self._instance_id is not None:
            return
        try:
            self.coordinator.leave(self.group_id, [(member_id, None)])
        except LakelogError as exc:  # the others will time the member out
            log.warning("%s: leaving group %s failed: %s", member_id, self.group_id, exc)


def _subscription(metadata: bytes) -> MemberSubscription:
    """A member's subscription; one that cannot be read subscribes to nothing (it gets nothing)."""
    try:
        return decode_subscription(metadata)
    except InvalidRecordError as exc:
        log.warning("a member's subscription cannot be read (%s): it is assigned nothing", exc)
        return MemberSubscription(())
