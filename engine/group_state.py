"""Consumer group membership as plain values: members, generations, assignments.

Kafka's group coordinator is a broker; here the coordinator is whoever
commits next. A group's state is one record in ``__consumer_offsets``
(latest value wins), and every change -- join, heartbeat, leave, a member's
session timing out -- is a read-modify-write of that record in one Delta
commit that reads the group's partition of ``__consumer_offsets``. Two
changes racing conflict in Delta and the loser re-plans against the
winner's state, so the functions below always see the state they replace.

As in Kafka's eager protocol, any change of membership or subscriptions
starts a new generation with a fresh assignment, computed right here by
the member whose commit changed it (Kafka lets the group leader run the
assignor; the outcome is the same because the assignors are
deterministic). Offsets may only be committed by a member of the current
generation (:func:`check_commit`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from engine.errors import CommitFailedError, InvalidConfigError
from engine.offsets import TopicPartition

ASSIGNORS = ("range", "roundrobin")


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    topics: tuple[str, ...]  # subscribed topic names (a pattern is resolved by the member)
    session_timeout_ms: int
    last_heartbeat_ms: int

    def expired(self, now_ms: int) -> bool:
        return now_ms - self.last_heartbeat_ms > self.session_timeout_ms


@dataclass(frozen=True)
class GroupState:
    group_id: str
    generation: int = 0
    assignor: str = "range"
    members: Mapping[str, Member] = field(default_factory=dict)
    assignment: Mapping[str, tuple[TopicPartition, ...]] = field(default_factory=dict)
    # Partition counts the assignment was computed for: growing a topic rebalances.
    partition_counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.members

    def live_members(self, now_ms: int) -> list[Member]:
        return [m for m in self.members.values() if not m.expired(now_ms)]

    def assigned(self, member_id: str) -> tuple[TopicPartition, ...]:
        return self.assignment.get(member_id, ())

    def to_json(self) -> str:
        return json.dumps(
            {
                "group": self.group_id,
                "generation": self.generation,
                "assignor": self.assignor,
                "members": [
                    {
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "topics": list(m.topics),
                        "session_timeout_ms": m.session_timeout_ms,
                        "last_heartbeat_ms": m.last_heartbeat_ms,
                        "assignment": [[tp.topic, tp.partition] for tp in self.assigned(m.member_id)],
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
        members = {}
        assignment = {}
        for m in data["members"]:
            members[m["member_id"]] = Member(
                m["member_id"], m["client_id"], tuple(m["topics"]), m["session_timeout_ms"], m["last_heartbeat_ms"]
            )
            assignment[m["member_id"]] = tuple(TopicPartition(t, p) for t, p in m["assignment"])
        return cls(
            data["group"], data["generation"], data["assignor"], members, assignment, data.get("partition_counts", {})
        )


def assign(
    assignor: str, members: Iterable[Member], partition_counts: Mapping[str, int]
) -> dict[str, tuple[TopicPartition, ...]]:
    """Kafka's RangeAssignor or RoundRobinAssignor over the members' subscriptions.

    Deterministic: members are ordered by member id, partitions by topic
    then number, so every process computes the same assignment.
    """
    ordered = sorted(members, key=lambda m: m.member_id)
    result: dict[str, list[TopicPartition]] = {m.member_id: [] for m in ordered}
    if assignor == "range":
        # Per topic, consecutive ranges; the first (n % members) members get one more.
        for topic in sorted(partition_counts):
            subscribers = [m.member_id for m in ordered if topic in m.topics]
            if not subscribers:
                continue
            count = partition_counts[topic]
            per, extra = divmod(count, len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                n = per + (1 if i < extra else 0)
                result[member_id] += [TopicPartition(topic, p) for p in range(start, start + n)]
                start += n
    elif assignor == "roundrobin":
        everything = [TopicPartition(t, p) for t in sorted(partition_counts) for p in range(partition_counts[t])]
        turn = 0
        for tp in everything:
            # The next member in turn that subscribes to this topic (Kafka's circular iterator).
            for step in range(len(ordered)):
                member = ordered[(turn + step) % len(ordered)]
                if tp.topic in member.topics:
                    result[member.member_id].append(tp)
                    turn = (turn + step + 1) % len(ordered)
                    break
    else:
        raise InvalidConfigError(f"partition.assignment.strategy {assignor!r} is not one of {', '.join(ASSIGNORS)}")
    return {member_id: tuple(tps) for member_id, tps in result.items()}


def _rebalanced(state: GroupState, members: dict[str, Member], partition_counts: Mapping[str, int]) -> GroupState:
    wanted = {t for m in members.values() for t in m.topics}
    counts = {t: n for t, n in partition_counts.items() if t in wanted}
    return replace(
        state,
        generation=state.generation + 1,
        members=members,
        assignment=assign(state.assignor, members.values(), counts),
        partition_counts=counts,
    )


def heartbeat(
    state: GroupState,
    member: Member,
    now_ms: int,
    partition_counts: Mapping[str, int],
) -> GroupState:
    """The state after ``member`` joins or heartbeats at ``now_ms``.

    Members whose session expired are removed. A new generation starts when
    the member set, a subscription, or a subscribed topic's partition count
    changed; otherwise only the heartbeat time moves.
    """
    live = {m.member_id: m for m in state.live_members(now_ms) if m.member_id != member.member_id}
    previous = state.members.get(member.member_id)
    live[member.member_id] = replace(member, last_heartbeat_ms=now_ms)
    wanted = {t for m in live.values() for t in m.topics}
    counts = {t: n for t, n in partition_counts.items() if t in wanted}
    changed = (
        set(live) != set(state.members)
        or previous is None
        or previous.topics != member.topics
        or counts != dict(state.partition_counts)
    )
    if changed:
        return _rebalanced(state, live, partition_counts)
    return replace(state, members=live)


def leave(state: GroupState, member_id: str, now_ms: int, partition_counts: Mapping[str, int]) -> GroupState:
    """The state after ``member_id`` leaves (a new generation if it was a member)."""
    if member_id not in state.members:
        return state
    live = {m.member_id: m for m in state.live_members(now_ms) if m.member_id != member_id}
    return _rebalanced(state, live, partition_counts)


def check_commit(state: GroupState | None, generation: int, member_id: str | None, now_ms: int) -> None:
    """Refuse an offset commit from outside the group's current generation.

    ``generation`` -1 / ``member_id`` None is a consumer without group
    membership (``assign``): Kafka accepts its commits only while the group
    has no live members, and so does this.
    """
    if member_id is None:
        if state is not None and state.live_members(now_ms):
            raise CommitFailedError(
                f"group {state.group_id!r} has live members: a consumer that is not one of them "
                "(manual assign) cannot commit offsets for it"
            )
        return
    if state is None or member_id not in state.members:
        raise CommitFailedError(
            f"member {member_id} is not in group {state.group_id if state else '?'!r} "
            "(its session timed out or it left); the commit was refused, nothing was committed"
        )
    if state.generation != generation:
        raise CommitFailedError(
            f"commit from member {member_id} of generation {generation} refused: group {state.group_id!r} "
            f"is at generation {state.generation} (a rebalance happened); nothing was committed"
        )
