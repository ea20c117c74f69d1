"""Kafka's consumer group protocol (KIP-848, ``group.protocol=consumer``) as pure functions over a value.

Beside the classic protocol (:mod:`engine.groups.classic`) a group id may be
of the *consumer* type: its members send ConsumerGroupHeartbeat, and the
coordinator -- here, whoever commits the group's next record, see
:mod:`engine.groups.consumer_coordinator` -- computes each member's target
assignment itself with a server-side assignor (``uniform`` or ``range``) and
hands partitions over in steps, so that no partition is ever owned by two
members. The functions below say what Kafka's coordinator does with the
group and a heartbeat; they follow ``apache/kafka`` group-coordinator at 1eb7644349cb
(4.0.0-SNAPSHOT; ``GroupMetadataManager`` = GMM, ``modern/consumer/ConsumerGroup`` = CG,
``modern/consumer/CurrentAssignmentBuilder`` = CAB):

* epochs: the *group epoch* is bumped whenever the membership, a member's
  subscription or the subscribed topics' partitions change
  (GMM.consumerGroupHeartbeat, step 1); the target assignment is then
  recomputed and stamped with that epoch (step 2). Each member has its own
  *member epoch*, which reaches the target's epoch once the member has been
  reconciled (step 3, CAB).
* reconciliation (CAB.computeNextAssignment): a member keeps the partitions
  that are still in its target, must first *revoke* those that are not (it
  stays at its epoch, state ``unrevoked_partitions``, until a heartbeat no
  longer lists them as owned), and only then gets new partitions -- and of
  those only the ones no other member still holds (assigned or pending
  revocation); the others wait (``unreleased_partitions``).
* a heartbeat's member epoch must be the member's (or its previous one while
  it reports a subset of its assignment: the answer that bumped it may have
  been lost), else FENCED_MEMBER_EPOCH (GMM.throwIfConsumerGroupMemberEpochIsInvalid);
  an unknown member with an epoch other than 0 is UNKNOWN_MEMBER_ID; epoch -1
  leaves, -2 is a static member leaving for a while (it keeps its
  assignment until its session times out or its instance id rejoins,
  GMM.consumerGroupLeave); a static member joining while its instance id is
  held by a live member is UNRELEASED_INSTANCE_ID.
* offsets: members commit and fetch with their member id and epoch; another
  epoch is STALE_MEMBER_EPOCH (CG.validateOffsetCommit/validateOffsetFetch).

Topics are named by their ids in assignments (the store's topic ids, which
the agent's Metadata answers carry).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from lakelog.engine.errors import (
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)

# Member epochs with a meaning (Kafka's ConsumerGroupHeartbeatRequest constants).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# Member states (Kafka's MemberState).
STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"

# Group states (Kafka's ConsumerGroupState, as DescribeGroups/ListGroups name them).
GROUP_EMPTY = "Empty"
GROUP_ASSIGNING = "Assigning"
GROUP_RECONCILING = "Reconciling"
GROUP_STABLE = "Stable"

# Kafka's error names (``kio.schema.errors.ErrorCode`` members).
NONE = "none"
UNKNOWN_MEMBER_ID = "unknown_member_id"
FENCED_MEMBER_EPOCH = "fenced_member_epoch"
UNRELEASED_INSTANCE_ID = "unreleased_instance_id"
FENCED_INSTANCE_ID = "fenced_instance_id"
INVALID_REQUEST = "invalid_request"
UNSUPPORTED_ASSIGNOR = "unsupported_assignor"
GROUP_ID_NOT_FOUND = "group_id_not_found"

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)  # Kafka's group.consumer.assignors default: the first is the default

# Kafka's group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms defaults.
SESSION_TIMEOUT_MS = 45_000
HEARTBEAT_INTERVAL_MS = 5_000

# topic id -> partitions
Assignment = Mapping[str, frozenset[int]]


def assignment_of(pairs: Iterable[tuple[str, Iterable[int]]]) -> dict[str, frozenset[int]]:
    """An assignment from (topic id, partitions) pairs, empty topics left out."""
    out: dict[str, set[int]] = {}
    for topic_id, partitions in pairs:
        out.setdefault(topic_id, set()).update(int(p) for p in partitions)
    return {t: frozenset(ps) for t, ps in out.items() if ps}


def _json_assignment(assignment: Assignment) -> dict[str, list[int]]:
    return {t: sorted(ps) for t, ps in sorted(assignment.items())}


def _read_assignment(data: Mapping[str, Sequence[int]] | None) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in (data or {}).items() if ps}


def count(assignment: Assignment) -> int:
    return sum(len(ps) for ps in assignment.values())


@dataclass(frozen=True)
class TopicInfo:
    """A subscribed topic as the store has it now."""

    topic_id: str
    partitions: int


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    subscribed_topic_names: tuple[str, ...] = ()
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # Fenced unless it revoked its partitions by then (ms; 0: nothing to revoke), GMM's rebalance timeout.
    revoke_by_ms: int = 0

    def to_dict(self) -> dict:
        return {
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "previous_member_epoch": self.previous_member_epoch,
            "state": self.state,
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "session_timeout_ms": self.session_timeout_ms,
            "subscribed_topic_names": list(self.subscribed_topic_names),
            "server_assignor": self.server_assignor,
            "assigned": _json_assignment(self.assigned),
            "pending_revocation": _json_assignment(self.pending_revocation),
            "revoke_by_ms": self.revoke_by_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> ConsumerMember:
        return cls(
            data["member_id"],
            data["member_epoch"],
            data["previous_member_epoch"],
            data["state"],
            data.get("instance_id"),
            data.get("rack_id"),
            data.get("client_id", ""),
            data.get("client_host", ""),
            data["rebalance_timeout_ms"],
            data.get("session_timeout_ms", SESSION_TIMEOUT_MS),
            tuple(data["subscribed_topic_names"]),
            data.get("server_assignor"),
            _read_assignment(data["assigned"]),
            _read_assignment(data["pending_revocation"]),
            data.get("revoke_by_ms", 0),
        )


@dataclass(frozen=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: Mapping[str, ConsumerMember] = field(default_factory=dict)  # in join order
    # The target assignment of ``assignment_epoch``, by member id.
    target: Mapping[str, Assignment] = field(default_factory=dict)
    # What the subscribed topics were when the group epoch was last bumped (name -> id, partitions).
    subscribed_topics: Mapping[str, TopicInfo] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> str:
        """CG.maybeUpdateGroupState."""
        if not self.members:
            return GROUP_EMPTY
        if self.group_epoch != self.assignment_epoch:
            return GROUP_ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return GROUP_RECONCILING
        return GROUP_STABLE

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def partition_owner(self) -> dict[tuple[str, int], str]:
        """(topic id, partition) -> the member that holds it, assigned or pending revocation
        (CG.currentPartitionEpoch: a partition is free when no member holds it)."""
        owners: dict[tuple[str, int], str] = {}
        for m in self.members.values():
            for held in (m.assigned, m.pending_revocation):
                for t, ps in held.items():
                    for p in ps:
                        owners[(t, p)] = m.member_id
        return owners

    def preferred_assignor(self, assignors: Sequence[str]) -> str:
        """The assignor most members asked for, else the first configured (CG.computePreferredServerAssignor)."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return assignors[0]
        return max(sorted(votes), key=lambda name: votes[name])

    def to_json(self) -> str:
        return json.dumps(
            {
                "group": self.group_id,
                "type": "consumer",
                "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch,
                "members": [m.to_dict() for m in self.members.values()],
                "target": {m: _json_assignment(a) for m, a in self.target.items()},
                "subscribed_topics": {n: [t.topic_id, t.partitions] for n, t in sorted(self.subscribed_topics.items())},
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ConsumerGroup:
        data = json.loads(text)
        return cls(
            data["group"],
            data["group_epoch"],
            data["assignment_epoch"],
            {m["member_id"]: ConsumerMember.from_dict(m) for m in data["members"]},
            {m: _read_assignment(a) for m, a in data["target"].items()},
            {n: TopicInfo(t[0], t[1]) for n, t in data.get("subscribed_topics", {}).items()},
        )


# -- assignors ------------------------------------------------------------------------------------


def _subscribed(members: Mapping[str, ConsumerMember], topics: Mapping[str, TopicInfo]) -> dict[str, list[str]]:
    """member id -> the topic ids it subscribes to that exist."""
    return {
        mid: sorted({topics[n].topic_id for n in m.subscribed_topic_names if n in topics}) for mid, m in members.items()
    }


def range_assignment(
    members: Mapping[str, ConsumerMember], topics: Mapping[str, TopicInfo]
) -> dict[str, dict[str, frozenset[int]]]:
    """Kafka's server-side ``range`` assignor: per topic, its subscribers sorted by member id
    each get a contiguous range, the first ``partitions % subscribers`` one more
    (``assignor/RangeAssignor``: co-partitioned topics land together)."""
    counts = {t.topic_id: t.partitions for t in topics.values()}
    subscribed = _subscribed(members, topics)
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for topic_id in sorted({t for ts in subscribed.values() for t in ts}):
        subscribers = sorted(m for m, ts in subscribed.items() if topic_id in ts)
        quota, extra = divmod(counts[topic_id], len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            if size:
                out[m][topic_id] = set(range(start, start + size))
            start += size
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def uniform_assignment(
    members: Mapping[str, ConsumerMember], topics: Mapping[str, TopicInfo], current: Mapping[str, Assignment]
) -> dict[str, dict[str, frozenset[int]]]:
    """Kafka's server-side ``uniform`` assignor's goals (``assignor/UniformAssignor``): every
    partition of a subscribed topic goes to one of its subscribers, the members' counts as even
    as their subscriptions allow (within one for members with the same subscriptions), and a
    partition stays with the member the ``current`` target gave it whenever balance allows.
    Deterministic: ties go to the smaller member id."""
    counts = {t.topic_id: t.partitions for t in topics.values()}
    subscribed = {m: set(ts) for m, ts in _subscribed(members, topics).items()}
    everything = sorted((t, p) for t in {t for ts in subscribed.values() for t in ts} for p in range(counts[t]))
    if not members or not everything:
        return {m: {} for m in members}
    # Each member's fair share among the members it competes with: with one subscription
    # for all, floor or ceil of partitions / members.
    quota = -(-len(everything) // len(members))
    owner: dict[tuple[str, int], str] = {}
    held: dict[str, int] = dict.fromkeys(members, 0)
    # Stickiness first: keep what the current target gave, up to the ceiling share.
    for m in sorted(members):
        for t, ps in sorted((current.get(m) or {}).items()):
            for p in sorted(ps):
                if t in subscribed[m] and p < counts.get(t, 0) and (t, p) not in owner and held[m] < quota:
                    owner[(t, p)] = m
                    held[m] += 1
    for tp in everything:
        if tp not in owner:
            candidates = [m for m in members if tp[0] in subscribed[m]]
            best = min(candidates, key=lambda m: (held[m], m))
            owner[tp] = best
            held[best] += 1
    # Balance: move a partition from a member with two or more than another subscriber of its topic.
    moved = True
    while moved:
        moved = False
        for tp in everything:
            source = owner[tp]
            target = min((m for m in members if tp[0] in subscribed[m]), key=lambda m: (held[m], m))
            if held[source] - held[target] >= 2:
                owner[tp] = target
                held[source] -= 1
                held[target] += 1
                moved = True
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for (t, p), m in owner.items():
        out[m].setdefault(t, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def target_assignment(
    group: ConsumerGroup, topics: Mapping[str, TopicInfo], assignor: str
) -> dict[str, dict[str, frozenset[int]]]:
    """The target assignment of the group's members by ``assignor`` (``uniform`` or ``range``)."""
    if assignor == RANGE:
        return range_assignment(group.members, topics)
    return uniform_assignment(group.members, topics, group.target)


# -- reconciliation (CurrentAssignmentBuilder) ----------------------------------------------------


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """CAB.ownsRevokedPartitions: an unknown owned set (a heartbeat without it) counts as owning."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def _bump(member: ConsumerMember, epoch: int) -> ConsumerMember:
    """ConsumerGroupMember.Builder.updateMemberEpoch."""
    if epoch == member.member_epoch:
        return member
    return replace(member, previous_member_epoch=member.member_epoch, member_epoch=epoch)


def _next_assignment(
    member: ConsumerMember,
    epoch: int,
    target_epoch: int,
    target: Assignment,
    owners: Mapping[tuple[str, int], str],
    owned: Assignment | None,
) -> ConsumerMember:
    """CAB.computeNextAssignment."""
    assigned: dict[str, frozenset[int]] = {}
    revoking: dict[str, frozenset[int]] = {}
    pending: dict[str, frozenset[int]] = {}
    unreleased = False
    for t in sorted(set(target) | set(member.assigned)):
        wanted = target.get(t, frozenset())
        current = member.assigned.get(t, frozenset())
        kept = current & wanted
        if kept:
            assigned[t] = kept
        if current - kept:
            revoking[t] = current - kept
        to_add = {p for p in wanted - kept if (t, p) not in owners}
        if len(to_add) < len(wanted - kept):
            unreleased = True
        if to_add:
            pending[t] = frozenset(to_add)
    if revoking and _owns_any(owned, revoking):
        return replace(_bump(member, epoch), state=UNREVOKED_PARTITIONS, assigned=assigned, pending_revocation=revoking)
    for t, ps in pending.items():
        assigned[t] = assigned.get(t, frozenset()) | ps
    state = UNRELEASED_PARTITIONS if unreleased else STABLE
    return replace(_bump(member, target_epoch), state=state, assigned=assigned, pending_revocation={})


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owners: Mapping[tuple[str, int], str],
    owned: Assignment | None,
) -> ConsumerMember:
    """The member one step closer to ``target`` (CAB.build). ``owners``: who holds each
    partition now (:meth:`ConsumerGroup.partition_owner`; the member's own holdings count too);
    ``owned``: what its heartbeat says it owns (None: not said)."""
    if member.state == STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owners, owned)
    if member.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target, owners, owned)
    return _next_assignment(member, member.member_epoch, target_epoch, target, owners, owned)


# -- ConsumerGroupHeartbeat -----------------------------------------------------------------------


@dataclass(frozen=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat; None fields did not change since the member's last heartbeat."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class HeartbeatResponse:
    error: str
    message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    assignment: Assignment | None = None  # None: unchanged (not sent)


def validate(request: HeartbeatRequest, assignors: Collection[str]) -> HeartbeatResponse | None:
    """An error answer for a malformed heartbeat (GMM.throwIfConsumerGroupHeartbeatRequestIsInvalid),
    None when it is well formed."""

    def invalid(message: str) -> HeartbeatResponse:
        return HeartbeatResponse(INVALID_REQUEST, message, request.member_id, request.member_epoch)

    if request.instance_id == "":
        return invalid("InstanceId can't be empty.")
    if request.rack_id == "":
        return invalid("RackId can't be empty.")
    if request.subscribed_topic_regex is not None:
        return invalid("SubscribedTopicRegex is not supported yet.")
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not request.member_id:
            return invalid("MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            return invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            return invalid("TopicPartitions must be empty when (re-)joining.")
        if not request.subscribed_topic_names:
            return invalid("SubscribedTopicNames must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not request.member_id:
            return invalid("MemberId can't be empty.")
        if request.instance_id is None:
            return invalid("InstanceId can't be null.")
    else:
        return invalid("MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return HeartbeatResponse(
            UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
            request.member_id,
            request.member_epoch,
        )
    return None


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _epoch_error(member: ConsumerMember, received: int, owned: Assignment | None) -> str | None:
    """GMM.throwIfConsumerGroupMemberEpochIsInvalid."""
    if received > member.member_epoch:
        return (
            f"The consumer group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(owned, member.assigned)
    ):
        return (
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."
        )
    return None


def _remove(group: ConsumerGroup, member_ids: Collection[str]) -> ConsumerGroup:
    """The group without the members (their partitions free), its epoch bumped (GMM.removeMember)."""
    gone = set(member_ids) & set(group.members)
    if not gone:
        return group
    return replace(
        group,
        group_epoch=group.group_epoch + 1,
        members={k: m for k, m in group.members.items() if k not in gone},
        target={k: a for k, a in group.target.items() if k not in gone},
    )


def _subscription(group: ConsumerGroup, topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
    names = {n for m in group.members.values() for n in m.subscribed_topic_names}
    return {n: topics[n] for n in sorted(names) if n in topics}


def heartbeat(
    group: ConsumerGroup,
    request: HeartbeatRequest,
    topics: Mapping[str, TopicInfo],
    now_ms: int,
    *,
    assignors: Sequence[str] = ASSIGNORS,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
) -> tuple[ConsumerGroup, HeartbeatResponse]:
    """The group after a well-formed (:func:`validate`) ConsumerGroupHeartbeat and its answer
    (GMM.consumerGroupHeartbeat / consumerGroupLeave). ``topics``: every topic of the store by
    name; ``assignors``: ``group.consumer.assignors``, the first the default."""
    epoch = request.member_epoch
    if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
        return _leave(group, request)
    joining = epoch == JOIN_GROUP_MEMBER_EPOCH
    mid = request.member_id
    member = group.members.get(mid)
    replaced: str | None = None
    if request.instance_id is None:
        if member is None:
            if not joining:
                return group, HeartbeatResponse(UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group.", mid)
            member = ConsumerMember(mid)
    else:
        holder = group.static_member(request.instance_id)
        if joining:
            if holder is None:
                member = member or ConsumerMember(mid)
            elif holder.member_id != mid:
                if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return group, HeartbeatResponse(
                        UNRELEASED_INSTANCE_ID,
                        f"Static member {mid} with instance id {request.instance_id} cannot join the group "
                        f"because the instance id is owned by {holder.member_id} member.",
                        mid,
                    )
                # The new member takes the old one's place and assignment (GMM.replaceMember).
                member = replace(holder, member_id=mid, member_epoch=0, previous_member_epoch=0)
                replaced = holder.member_id
            else:
                member = holder
        else:
            if holder is None:
                return group, HeartbeatResponse(
                    UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.", mid
                )
            if holder.member_id != mid:
                return group, HeartbeatResponse(
                    FENCED_INSTANCE_ID,
                    f"Static member {mid} with instance id {request.instance_id} was fenced by member "
                    f"{holder.member_id}.",
                    mid,
                )
            member = holder
    if replaced is None and mid in group.members:
        error = _epoch_error(member, epoch, request.owned)
        if error is not None:
            return group, HeartbeatResponse(FENCED_MEMBER_EPOCH, error, mid)
    if replaced is not None:
        members = {(mid if k == replaced else k): (member if k == replaced else m) for k, m in group.members.items()}
        target = {(mid if k == replaced else k): a for k, a in group.target.items()}
        group = replace(group, members=members, target=target)
    # 1. The member as the heartbeat updates it; the group epoch bumped when subscriptions changed.
    updated = replace(
        member,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor=request.server_assignor if request.server_assignor is not None else member.server_assignor,
        subscribed_topic_names=(
            tuple(sorted(set(request.subscribed_topic_names)))
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        client_id=request.client_id,
        client_host=request.client_host,
        session_timeout_ms=session_timeout_ms,
    )
    before = group
    subscription_changed = (
        mid not in group.members
        or updated.subscribed_topic_names != member.subscribed_topic_names
        or updated.server_assignor != member.server_assignor
    )
    group = replace(group, members={**group.members, mid: updated})
    subscribed = _subscription(group, topics)
    if subscription_changed or subscribed != group.subscribed_topics:
        group = replace(group, group_epoch=group.group_epoch + 1, subscribed_topics=subscribed)
    # 2. A new target assignment when the group epoch moved past it.
    if group.group_epoch > group.assignment_epoch:
        target = target_assignment(group, subscribed, group.preferred_assignor(assignors))
        group = replace(group, target=target, assignment_epoch=group.group_epoch)
    # 3. The member reconciled one step towards its target.
    reconciled = updated
    if not (updated.member_epoch == group.assignment_epoch and updated.state == STABLE):
        reconciled = reconcile(
            updated,
            group.assignment_epoch,
            group.target.get(mid, {}),
            before.partition_owner(),
            request.owned,
        )
        if reconciled != updated:
            revoke_by = now_ms + reconciled.rebalance_timeout_ms if reconciled.state == UNREVOKED_PARTITIONS else 0
            reconciled = replace(reconciled, revoke_by_ms=revoke_by)
    group = replace(group, members={**group.members, mid: reconciled})
    full = joining or (
        request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None and request.owned is not None
    )
    changed = reconciled.assigned != member.assigned or mid not in before.members
    return group, HeartbeatResponse(
        NONE,
        None,
        mid,
        reconciled.member_epoch,
        reconciled.assigned if full or changed else None,
    )


def _leave(group: ConsumerGroup, request: HeartbeatRequest) -> tuple[ConsumerGroup, HeartbeatResponse]:
    """GMM.consumerGroupLeave: epoch -1 removes the member; -2 (a static member) keeps it,
    its epoch -2, until its instance id rejoins or its session times out."""
    mid = request.member_id
    if request.instance_id is None:
        if mid not in group.members:
            return group, HeartbeatResponse(UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group.", mid)
        return _remove(group, [mid]), HeartbeatResponse(NONE, None, mid, request.member_epoch)
    holder = group.static_member(request.instance_id)
    if holder is None:
        return group, HeartbeatResponse(UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.", mid)
    if holder.member_id != mid:
        return group, HeartbeatResponse(
            FENCED_INSTANCE_ID,
            f"Static member {mid} with instance id {request.instance_id} was fenced by member {holder.member_id}.",
            mid,
        )
    if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        leaving = replace(holder, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={}, revoke_by_ms=0)
        members = {**group.members, mid: leaving}
        return replace(group, members=members), HeartbeatResponse(NONE, None, mid, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    return _remove(group, [mid]), HeartbeatResponse(NONE, None, mid, request.member_epoch)


def expire(group: ConsumerGroup, silent: Collection[str], now_ms: int) -> ConsumerGroup:
    """The group after its deadlines: members whose session lapsed (``silent``) and members that
    did not revoke their partitions within their rebalance timeout are fenced
    (GMM's session and rebalance timeouts)."""
    late = {m.member_id for m in group.members.values() if m.revoke_by_ms and m.revoke_by_ms <= now_ms}
    return _remove(group, set(silent) | late)


def next_deadline(group: ConsumerGroup) -> int | None:
    """The earliest revocation deadline of the group (ms), None when no member must revoke."""
    deadlines = [m.revoke_by_ms for m in group.members.values() if m.revoke_by_ms]
    return min(deadlines) if deadlines else None


# -- offsets -----------------------------------------------------------------------------------


def check_offset_commit(
    group: ConsumerGroup,
    member_id: str | None,
    member_epoch: int,
    api_version: int,
    *,
    transactional: bool = False,
) -> None:
    """Refuse an (Txn)OffsetCommit to a consumer-type group as Kafka's coordinator does
    (CG.validateOffsetCommit), nothing committed then: epoch -1 commits only while the group is
    empty; otherwise the member must exist (UnknownMemberIdError), commit with OffsetCommit v9+
    (UnsupportedVersionError) and with its current epoch (StaleMemberEpochError)."""
    if member_epoch < 0 and group.empty:
        return
    member = group.members.get(member_id or "")
    if member is None:
        raise UnknownMemberIdError(
            f"member {member_id!r} is not in consumer group {group.group_id!r}; the offset commit was refused, "
            "nothing was committed"
        )
    if not transactional and api_version < 9:
        raise UnsupportedVersionError(
            "OffsetCommit version 9 or above must be used by members using the modern group protocol"
        )
    if member_epoch != member.member_epoch:
        raise StaleMemberEpochError(
            f"The received member epoch {member_epoch} does not match the expected member epoch "
            f"{member.member_epoch}; nothing was committed"
        )


def check_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
    """Refuse an OffsetFetch of a member that is not the group's, or not at its epoch
    (CG.validateOffsetFetch): UnknownMemberIdError, StaleMemberEpochError. Without a member
    (an admin tool, a classic client) it is accepted."""
    if member_id is None and member_epoch < 0:
        return
    member = group.members.get(member_id or "")
    if member is None:
        raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
    if member_epoch != member.member_epoch:
        raise StaleMemberEpochError(
            f"The received member epoch {member_epoch} does not match the expected member epoch {member.member_epoch}."
        )
