"""A consumer group's membership and assignment as plain values: Kafka's group protocol, brokerless.

Kafka's group coordinator is a broker; here the group's state is one record
in ``__consumer_offsets`` (latest value wins) and every change to it is a
read-modify-write in one Delta commit to the group's partition, so two
changes racing are ordered by the log and the loser re-plans against the
winner's state (the commit core's conflict rule). The functions below are
that state machine: pure, so the same rules serve lakelog's consumers and,
later, Kafka clients' JoinGroup/SyncGroup/Heartbeat/LeaveGroup.

What a member does, and when (:mod:`engine.consume.consumer` drives it from ``poll``):

* **join** (:func:`join`): a new member, a changed subscription or a
  partition count that grew starts a rebalance. A static member
  (``group.instance.id``) that comes back under a new member id takes its
  old place and assignment without one (KIP-345).
* **revoke, then sync** (:func:`sync`): during a rebalance each member must
  give up the partitions in ``revoking`` -- all of them with the eager
  assignors (range, roundrobin, sticky), only those that move elsewhere with
  cooperative-sticky (KIP-429) -- after its ``on_partitions_revoked`` ran
  and its positions were committed; its sync records that.
* **complete**: the sync that leaves no member with partitions to revoke
  assigns the target assignment and starts the next generation. So a
  partition is given to a new member only after its previous owner revoked
  it (or left, or was expired): one owner per partition at a time, and a
  clean join or leave redelivers nothing.
* **leave** / **expire**: a member that leaves, or whose lease went stale for
  its ``session.timeout.ms`` (liveness lives off the Delta log, in
  :mod:`engine.groups.leases`), is removed; its partitions are free at once
  (a member that finds itself removed calls ``on_partitions_lost`` and does
  not read them again). A member that does not sync within its rebalance
  timeout (``max.poll.interval.ms``) is expired too, as Kafka's coordinator
  removes members that do not rejoin in time.

Offsets may only be committed by a member of the current generation for
partitions it owns or is revoking (:func:`check_commit`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from lakelog.engine.client_config import parse_strategy
from lakelog.engine.errors import CommitFailedError, FencedInstanceIdError
from lakelog.engine.groups.assignors import Subscription, assign, cooperative_round, is_cooperative
from lakelog.engine.topics import TopicPartition

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"  # eager: members revoke everything, then sync
COMPLETING_REBALANCE = "CompletingRebalance"  # cooperative: owners of moving partitions revoke them
STABLE = "Stable"
DEAD = "Dead"  # a group with no state record (deleted): shown, never stored


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    topics: tuple[str, ...]  # subscribed topic names (a pattern is resolved by the member)
    session_timeout_ms: int
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms
    instance_id: str | None = None  # group.instance.id: a static member

    def to_dict(self) -> dict:
        return {
            "member_id": self.member_id,
            "client_id": self.client_id,
            "instance_id": self.instance_id,
            "topics": list(self.topics),
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Member:
        return cls(
            data["member_id"],
            data["client_id"],
            tuple(data["topics"]),
            data["session_timeout_ms"],
            data.get("rebalance_timeout_ms", 300_000),
            data.get("instance_id"),
        )


TPs = tuple[TopicPartition, ...]


def _tps(items: Iterable[TopicPartition]) -> TPs:
    return tuple(sorted(set(items)))


@dataclass(frozen=True)
class GroupState:
    group_id: str
    generation: int = 0  # bumped each time a rebalance completes
    assignor: str = "range"  # the group's partition.assignment.strategy
    members: Mapping[str, Member] = field(default_factory=dict)
    # What each member owns right now: it may read and commit these.
    assignment: Mapping[str, TPs] = field(default_factory=dict)
    # During a rebalance: what each member must still give up before it is synced.
    revoking: Mapping[str, TPs] = field(default_factory=dict)
    # Cooperative rebalances: the assignment the group moves to once revocations are done.
    target: Mapping[str, TPs] | None = None
    # Eager rebalances: what each member gave up, so a sticky assignor can give it back
    # (Kafka's StickyAssignor carries it in the member's subscription user data).
    previous: Mapping[str, TPs] = field(default_factory=dict)
    state: str = EMPTY
    rebalance: int = 0  # id of the rebalance in progress (or the last one)
    rebalance_started_ms: int = 0
    # Partition counts the assignment was computed for: growing a topic rebalances.
    partition_counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.members

    @property
    def rebalancing(self) -> bool:
        return self.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE)

    def assigned(self, member_id: str) -> TPs:
        return self.assignment.get(member_id, ())

    def to_revoke(self, member_id: str) -> TPs:
        return self.revoking.get(member_id, ())

    def owner(self, tp: TopicPartition) -> str | None:
        return next((m for m, tps in self.assignment.items() if tp in tps), None)

    def member_for_instance(self, instance_id: str) -> Member | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    # -- storage ----------------------------------------------------------------

    def to_json(self) -> str:
        def pairs(tps: Iterable[TopicPartition]) -> list[list]:
            return [[tp.topic, tp.partition] for tp in tps]

        return json.dumps(
            {
                "group": self.group_id,
                "generation": self.generation,
                "assignor": self.assignor,
                "state": self.state,
                "rebalance": self.rebalance,
                "rebalance_started_ms": self.rebalance_started_ms,
                "members": [
                    {
                        **m.to_dict(),
                        "assignment": pairs(self.assigned(m.member_id)),
                        "revoking": pairs(self.to_revoke(m.member_id)),
                        "target": None if self.target is None else pairs(self.target.get(m.member_id, ())),
                        "previous": pairs(self.previous.get(m.member_id, ())),
                    }
                    for m in sorted(self.members.values(), key=lambda m: m.member_id)
                ],
                "partition_counts": dict(sorted(self.partition_counts.items())),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> GroupState:
        data = json.loads(text)
        members, assignment, revoking, target, previous = {}, {}, {}, {}, {}
        has_target = False
        for m in data["members"]:
            mid = m["member_id"]
            members[mid] = Member.from_dict(m)
            assignment[mid] = tuple(TopicPartition(t, p) for t, p in m["assignment"])
            if m.get("revoking"):
                revoking[mid] = tuple(TopicPartition(t, p) for t, p in m["revoking"])
            if m.get("previous"):
                previous[mid] = tuple(TopicPartition(t, p) for t, p in m["previous"])
            if m.get("target") is not None:
                has_target = True
                target[mid] = tuple(TopicPartition(t, p) for t, p in m["target"])
        state = data.get("state") or (STABLE if members else EMPTY)
        return cls(
            group_id=data["group"],
            generation=data["generation"],
            assignor=data["assignor"],
            members=members,
            assignment=assignment,
            revoking=revoking,
            target=target if has_target else None,
            previous=previous,
            state=state,
            rebalance=data.get("rebalance", 0),
            rebalance_started_ms=data.get("rebalance_started_ms", 0),
            partition_counts=data.get("partition_counts", {}),
        )


def _subscriptions(state: GroupState, members: Mapping[str, Member]) -> list[Subscription]:
    return [
        Subscription(
            m.member_id,
            m.topics,
            _tps([*state.assigned(m.member_id), *state.previous.get(m.member_id, ())]),
            state.generation,
            m.instance_id,
        )
        for m in members.values()
    ]


def _wanted_counts(members: Mapping[str, Member], partition_counts: Mapping[str, int]) -> dict[str, int]:
    wanted = {t for m in members.values() for t in m.topics}
    return {t: n for t, n in partition_counts.items() if t in wanted}


def _rebalance(
    state: GroupState, members: Mapping[str, Member], partition_counts: Mapping[str, int], now_ms: int
) -> GroupState:
    """Start a rebalance of ``members`` (the group's new membership); completes at once when
    nobody has anything to revoke."""
    members = dict(members)
    counts = _wanted_counts(members, partition_counts)
    assignment = {m: state.assigned(m) for m in members}
    moved = replace(
        state,
        members=members,
        assignment=assignment,
        rebalance=state.rebalance + 1,
        rebalance_started_ms=now_ms,
        partition_counts=counts,
    )
    if not members:
        return replace(moved, assignment={}, revoking={}, target=None, state=EMPTY, generation=state.generation + 1)
    if is_cooperative(state.assignor):
        target = assign(state.assignor, _subscriptions(moved, members), counts)
        _, revoking = cooperative_round(target, assignment)
        moved = replace(moved, target=target, revoking={m: tps for m, tps in revoking.items() if tps})
        moved = replace(moved, state=COMPLETING_REBALANCE)
    else:
        moved = replace(moved, target=None, revoking={m: tps for m, tps in assignment.items() if tps})
        moved = replace(moved, state=PREPARING_REBALANCE)
    return _maybe_complete(moved)


def _maybe_complete(state: GroupState) -> GroupState:
    """Assign and start the next generation once no member has anything left to revoke."""
    if any(state.revoking.values()):
        return state
    if state.target is not None:
        target = state.target
    else:
        target = assign(state.assignor, _subscriptions(state, state.members), state.partition_counts)
    return replace(
        state,
        assignment={m: _tps(target.get(m, ())) for m in state.members},
        revoking={},
        target=None,
        previous={},
        state=STABLE if state.members else EMPTY,
        generation=state.generation + 1,
    )


def join(
    state: GroupState, member: Member, now_ms: int, partition_counts: Mapping[str, int], assignor: str = "range"
) -> GroupState:
    """The state after ``member`` joins (or rejoins, or changed its subscription).

    An empty group takes the joining member's assignor. A static member whose
    ``instance_id`` is known replaces its old member id, keeping its
    assignment; no rebalance unless its subscription changed. A member already
    in the group with the same subscription changes nothing (idempotent).
    """
    return join_all(state, [member], now_ms, partition_counts, assignor)


def join_all(
    state: GroupState,
    members: Sequence[Member],
    now_ms: int,
    partition_counts: Mapping[str, int],
    assignor: str = "range",
) -> GroupState:
    """The state after all of ``members`` joined at once: one rebalance for all of them, as
    Kafka's coordinator gathers the JoinGroup requests that arrive while it prepares a
    rebalance. Each member is admitted as :func:`join` admits it; the empty group takes
    ``assignor``."""
    if state.empty:
        state = replace(state, assignor=parse_strategy(assignor), assignment={}, revoking={}, target=None)
    rebalance = False
    for member in members:
        state, changed = _admit(state, member)
        rebalance = rebalance or changed
    if rebalance:
        return _rebalance(state, state.members, partition_counts, now_ms)
    return _refresh_counts(state, now_ms, partition_counts)


def _admit(state: GroupState, member: Member) -> tuple[GroupState, bool]:
    """``state`` with ``member`` in it, and whether that needs a rebalance."""
    previous = state.members.get(member.member_id)
    if previous is not None and previous.topics == member.topics:
        return state, False
    members = dict(state.members)
    if member.instance_id is not None and previous is None:
        old = state.member_for_instance(member.instance_id)
        if old is not None:
            # KIP-345: the same static member under a new id takes over its place.
            members.pop(old.member_id)
            members[member.member_id] = member

            def renamed(by_member: Mapping[str, TPs]) -> dict[str, TPs]:
                return {member.member_id if k == old.member_id else k: v for k, v in by_member.items()}

            target = None if state.target is None else renamed(state.target)
            moved = replace(
                state,
                members=members,
                assignment=renamed(state.assignment),
                revoking=renamed(state.revoking),
                target=target,
            )
            return moved, old.topics != member.topics
    members[member.member_id] = member
    return replace(state, members=members), True


def _refresh_counts(state: GroupState, now_ms: int, partition_counts: Mapping[str, int]) -> GroupState:
    if _wanted_counts(state.members, partition_counts) != dict(state.partition_counts) and state.members:
        return _rebalance(state, state.members, partition_counts, now_ms)
    return state


def refresh(state: GroupState, now_ms: int, partition_counts: Mapping[str, int]) -> GroupState:
    """Rebalance if a subscribed topic's partition count changed (or a topic appeared or went)."""
    return _refresh_counts(state, now_ms, partition_counts)


def sync(state: GroupState, member_id: str, revoked: Collection[TopicPartition]) -> GroupState:
    """The state after ``member_id`` gave up ``revoked`` (its callback ran, its positions are
    committed). Unchanged if it still holds partitions it must revoke; the rebalance
    completes when no member does."""
    if member_id not in state.members:
        return state
    must = set(state.to_revoke(member_id))
    if not must or not must <= set(revoked):
        return state
    assignment = dict(state.assignment)
    assignment[member_id] = _tps(set(state.assigned(member_id)) - must)
    revoking = {m: tps for m, tps in state.revoking.items() if m != member_id}
    previous = dict(state.previous)
    previous[member_id] = _tps([*previous.get(member_id, ()), *must])
    return _maybe_complete(replace(state, assignment=assignment, revoking=revoking, previous=previous))


def leave(state: GroupState, member_id: str, now_ms: int, partition_counts: Mapping[str, int]) -> GroupState:
    """The state after ``member_id`` leaves (its partitions are free); unchanged if it is not a member."""
    return expire(state, [member_id], now_ms, partition_counts)


def expire(
    state: GroupState, member_ids: Iterable[str], now_ms: int, partition_counts: Mapping[str, int]
) -> GroupState:
    """The state without ``member_ids`` (left, session expired, or silent past its rebalance
    timeout): their partitions are free at once, and the others rebalance."""
    gone = set(member_ids) & set(state.members)
    if not gone:
        return state
    members = {m: v for m, v in state.members.items() if m not in gone}
    kept = replace(
        state,
        assignment={m: tps for m, tps in state.assignment.items() if m not in gone},
        revoking={m: tps for m, tps in state.revoking.items() if m not in gone},
        previous={m: tps for m, tps in state.previous.items() if m not in gone},
    )
    return _rebalance(kept, members, partition_counts, now_ms)


def overdue(state: GroupState, now_ms: int) -> list[str]:
    """Members that still hold partitions to revoke past their rebalance timeout."""
    if not state.rebalancing:
        return []
    return sorted(
        m
        for m, tps in state.revoking.items()
        if tps and m in state.members and now_ms - state.rebalance_started_ms > state.members[m].rebalance_timeout_ms
    )


def check_commit(
    state: GroupState | None,
    generation: int,
    member_id: str | None,
    partitions: Collection[TopicPartition] = (),
    *,
    live: Collection[str] | None = None,
    instance_id: str | None = None,
) -> None:
    """Refuse an offset commit Kafka's coordinator would refuse (CommitFailedError; nothing is
    committed).

    A member must be in the group, at its current generation, and commit only
    partitions it owns or is revoking; at an older generation, only partitions
    it still owns (the rebalance since did not move them). ``generation`` -1 / ``member_id`` None
    is a consumer without membership (``assign``): Kafka accepts its commits
    only while the group has no live members (``live``: members whose leases
    are fresh; by default every member counts). A static member replaced by a
    newer instance of itself gets FencedInstanceIdError.
    """
    if member_id is None:
        alive = set(state.members) if state is not None else set()
        if live is not None:
            alive &= set(live)
        if alive:
            raise CommitFailedError(
                f"group {state.group_id!r} has live members: a consumer that is not one of them "  # type: ignore[union-attr]
                "(manual assign) cannot commit offsets for it"
            )
        return
    if state is None or member_id not in state.members:
        if state is not None and instance_id is not None and state.member_for_instance(instance_id) is not None:
            raise FencedInstanceIdError(
                f"group.instance.id {instance_id!r} joined group {state.group_id!r} again under another member id; "
                "this instance is fenced"
            )
        raise CommitFailedError(
            f"member {member_id} is not in group {state.group_id if state else '?'!r} "
            "(its session timed out or it left); the commit was refused, nothing was committed"
        )
    if state.generation != generation:
        # A rebalance completed that this member did not take part in (with cooperative-sticky a
        # member that keeps all its partitions is not asked to). Partitions it still owns are its
        # own to commit; any other commit from an old generation is refused, as Kafka does.
        if not partitions or not set(partitions) <= set(state.assigned(member_id)):
            raise CommitFailedError(
                f"commit from member {member_id} of generation {generation} refused: group {state.group_id!r} "
                f"is at generation {state.generation} (a rebalance happened); nothing was committed"
            )
        return
    allowed = set(state.assigned(member_id)) | set(state.to_revoke(member_id))
    foreign = sorted(str(tp) for tp in partitions if tp not in allowed)
    if foreign:
        raise CommitFailedError(
            f"member {member_id} of group {state.group_id!r} does not own {', '.join(foreign)}; "
            "the commit was refused, nothing was committed"
        )
