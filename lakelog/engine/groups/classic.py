"""Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as pure functions over a value.

The group coordinator of Kafka is a broker; here it is nobody: a
:class:`ClassicGroup` is one record in ``__consumer_offsets`` (see
:mod:`engine.groups.classic_coordinator`), each change a read-modify-write
Delta commit, and whoever observes a deadline commits the transition. The
functions below only say what Kafka's coordinator would do with the group
and a request, so every agent and process on a store decides alike.

The rules are Kafka's (``apache/kafka`` group-coordinator,
``GroupMetadataManager`` = GMM, ``classic/ClassicGroup`` = CG):

* any non-empty protocol type; a member must offer a protocol every other
  member supports, with the group's protocol type, else
  INCONSISTENT_GROUP_PROTOCOL (CG.supportsProtocols). The chosen protocol is
  Kafka's vote: candidates are the protocols every member supports, each
  member votes for its first candidate, most votes wins (CG.selectProtocol).
* the coordinator never looks into a protocol's metadata or an assignment:
  both are opaque bytes, relayed from members to the leader and from the
  leader's SyncGroup to each member (members it left out get empty bytes).
* a dynamic member joining with no id gets MEMBER_ID_REQUIRED and an id
  (JoinGroup v4+, KIP-394), kept pending for its session timeout
  (GMM.classicGroupJoinNewDynamicMember). A static member (KIP-345,
  ``group.instance.id``) that is known takes a new id in place of its old one
  and, in a Stable group, keeps its assignment without a rebalance
  (GMM.updateStaticMemberThenRebalanceOrCompleteJoin); a request that names
  the instance with another member id gets FENCED_INSTANCE_ID (CG.validateMember).
* one rebalance round per join or leave: PreparingRebalance until every
  member rejoined or the rebalance timeout (the longest of the members')
  passed; dynamic members that did not rejoin are dropped, static ones kept
  (GMM.completeClassicGroupJoin); a new group first waits
  ``group.initial.rebalance.delay.ms`` for more members (InitialDelayedJoin).
  Then the generation is bumped, the leader (the first member, re-elected
  among those that rejoined) gets every member's metadata, and the group is
  CompletingRebalance until the leader's SyncGroup, then Stable. Members that
  do not send their SyncGroup within the rebalance timeout are removed
  (GMM's pending-sync timeout).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from lakelog.engine.errors import CommitFailedError, FencedInstanceIdError, UnknownMemberIdError

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"

# Kafka's error names (``kio.schema.errors.ErrorCode`` members), as the functions answer them.
NONE = "none"
UNKNOWN_MEMBER_ID = "unknown_member_id"
MEMBER_ID_REQUIRED = "member_id_required"
FENCED_INSTANCE_ID = "fenced_instance_id"
ILLEGAL_GENERATION = "illegal_generation"
REBALANCE_IN_PROGRESS = "rebalance_in_progress"
INCONSISTENT_GROUP_PROTOCOL = "inconsistent_group_protocol"

# Kafka's group.initial.rebalance.delay.ms default.
INITIAL_REBALANCE_DELAY_MS = 3000

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata), in the member's order of preference


@dataclass(frozen=True)
class ClassicMember:
    member_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: Protocols
    instance_id: str | None = None
    client_host: str = ""
    assignment: bytes = b""
    awaiting_join: bool = False  # joined in the rebalance in progress (Kafka's isAwaitingJoin)

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def to_dict(self) -> dict:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "protocols": [[name, _b64(m)] for name, m in self.protocols],
            "assignment": _b64(self.assignment),
            "awaiting_join": self.awaiting_join,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> ClassicMember:
        return cls(
            data["member_id"],
            data["client_id"],
            data["session_timeout_ms"],
            data["rebalance_timeout_ms"],
            tuple((name, base64.b64decode(m)) for name, m in data["protocols"]),
            data.get("instance_id"),
            data.get("client_host", ""),
            base64.b64decode(data.get("assignment", "")),
            data.get("awaiting_join", False),
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True)
class ClassicGroup:
    group_id: str
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    state: str = EMPTY
    members: Mapping[str, ClassicMember] = field(default_factory=dict)  # in join order
    # Member ids handed out with MEMBER_ID_REQUIRED -> when they lapse (ms).
    pending: Mapping[str, int] = field(default_factory=dict)
    rebalance_deadline_ms: int = 0  # PreparingRebalance completes at the latest then
    # A new group's first round waits the initial delay for more members, until at most this (ms; 0: not one).
    initial_until_ms: int = 0
    # Members of this generation that have not sent their SyncGroup yet, and until when they may.
    pending_sync: frozenset[str] = frozenset()
    sync_deadline_ms: int = 0

    @property
    def empty(self) -> bool:
        return not self.members

    @property
    def rebalancing(self) -> bool:
        return self.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE)

    def member_for_instance(self, instance_id: str) -> ClassicMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def to_json(self) -> str:
        return json.dumps(
            {
                "group": self.group_id,
                "protocol_type": self.protocol_type,
                "protocol": self.protocol,
                "generation": self.generation,
                "leader": self.leader,
                "state": self.state,
                "members": [m.to_dict() for m in self.members.values()],
                "pending": dict(sorted(self.pending.items())),
                "rebalance_deadline_ms": self.rebalance_deadline_ms,
                "initial_until_ms": self.initial_until_ms,
                "pending_sync": sorted(self.pending_sync),
                "sync_deadline_ms": self.sync_deadline_ms,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ClassicGroup:
        data = json.loads(text)
        members = {m["member_id"]: ClassicMember.from_dict(m) for m in data["members"]}
        return cls(
            data["group"],
            data.get("protocol_type"),
            data.get("protocol"),
            data["generation"],
            data.get("leader"),
            data["state"],
            members,
            data.get("pending", {}),
            data.get("rebalance_deadline_ms", 0),
            data.get("initial_until_ms", 0),
            frozenset(data.get("pending_sync", ())),
            data.get("sync_deadline_ms", 0),
        )


# -- protocol choice -------------------------------------------------------------------


def candidate_protocols(members: Iterable[ClassicMember]) -> list[str]:
    """The protocols every member supports (CG.candidateProtocols), in the first member's order."""
    members = list(members)
    if not members:
        return []
    common = set.intersection(*({name for name, _ in m.protocols} for m in members))
    return [name for name, _ in members[0].protocols if name in common]


def select_protocol(members: Iterable[ClassicMember]) -> str | None:
    """Kafka's vote (CG.selectProtocol): each member votes for the first of its own protocols
    that is a candidate; the protocol with most votes wins (ties: the first candidate)."""
    members = list(members)
    candidates = candidate_protocols(members)
    if not candidates:
        return None
    votes = dict.fromkeys(candidates, 0)
    for m in members:
        votes[next(name for name, _ in m.protocols if name in votes)] += 1
    return max(candidates, key=lambda name: votes[name])


def supports(group: ClassicGroup, protocol_type: str, protocols: Protocols, replacing: str | None = None) -> bool:
    """Whether a member offering ``protocols`` of ``protocol_type`` may be in the group
    (CG.supportsProtocols); ``replacing``: the member id whose old protocols do not count."""
    if not protocol_type or not protocols:
        return False
    others = [m for mid, m in group.members.items() if mid != replacing]
    if not others:
        return True
    if protocol_type != group.protocol_type:
        return False
    common = set.intersection(*({name for name, _ in m.protocols} for m in others))
    return any(name in common for name, _ in protocols)


# -- JoinGroup ----------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinRequest:
    member_id: str  # "" for a new member
    client_id: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    instance_id: str | None = None
    client_host: str = ""
    requires_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)
    supports_skip_assignment: bool = False  # JoinGroup v9+ (KIP-814)


@dataclass(frozen=True)
class JoinResult:
    """What a JoinGroup gets: an error now, or (``error`` NONE) its answer now from the
    group (:func:`join_response`) unless ``wait``: then once the rebalance it joined
    completed (:func:`join_outcome`)."""

    error: str
    member_id: str
    wait: bool = False
    # A static member that took its old member's place in a Stable group (no rebalance): the
    # leader before the replacement, which is what a JoinGroup before v9 names as leader.
    static_rejoin: bool = False
    previous_leader: str = ""


@dataclass(frozen=True)
class JoinResponse:
    error: str
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    # For the leader only: (member id, instance id, metadata of the chosen protocol) of every member.
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False  # JoinGroup v9+: the leader must not run its assignor


def join(
    group: ClassicGroup,
    request: JoinRequest,
    new_member_id: str,
    now_ms: int,
    initial_delay_ms: int = INITIAL_REBALANCE_DELAY_MS,
) -> tuple[ClassicGroup, JoinResult]:
    """The group after ``request`` (``new_member_id``: the id a new member gets, made by the
    caller, Kafka's ``clientId-UUID``) and what to answer."""
    mid = request.member_id
    if not supports(group, request.protocol_type, request.protocols, replacing=mid or None):
        return group, JoinResult(INCONSISTENT_GROUP_PROTOCOL, mid)
    if not mid:
        if request.instance_id is not None:
            old = group.member_for_instance(request.instance_id)
            if old is not None:
                return _replace_static(group, old, request, new_member_id, now_ms)
            return _add_member(group, request, new_member_id, now_ms, initial_delay_ms)
        if request.requires_known_member_id:
            pending = {**group.pending, new_member_id: now_ms + request.session_timeout_ms}
            return replace(group, pending=pending), JoinResult(MEMBER_ID_REQUIRED, new_member_id)
        return _add_member(group, request, new_member_id, now_ms, initial_delay_ms)
    if mid in group.pending and mid not in group.members:
        rest = {k: v for k, v in group.pending.items() if k != mid}
        return _add_member(replace(group, pending=rest), request, mid, now_ms, initial_delay_ms)
    error = member_error(group, mid, request.instance_id)
    if error != NONE:
        return group, JoinResult(error, mid)
    member = group.members[mid]
    updated = replace(
        member,
        protocols=request.protocols,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        client_id=request.client_id,
    )
    if group.state == PREPARING_REBALANCE:
        group = _put(group, replace(updated, awaiting_join=True))
        return _maybe_complete(group, now_ms), JoinResult(NONE, mid, wait=True)
    if group.state == COMPLETING_REBALANCE and member.protocols == request.protocols:
        # It lost the first JoinGroup answer: the current generation again (GMM.classicGroupJoinExistingMember).
        return group, JoinResult(NONE, mid)
    if group.state == STABLE and mid != group.leader and member.protocols == request.protocols:
        return group, JoinResult(NONE, mid)
    group = _put(group, replace(updated, awaiting_join=True))
    return _prepare_rebalance(group, now_ms), JoinResult(NONE, mid, wait=True)


def _put(group: ClassicGroup, member: ClassicMember) -> ClassicGroup:
    return replace(group, members={**group.members, member.member_id: member})


def _new_member(request: JoinRequest, member_id: str) -> ClassicMember:
    return ClassicMember(
        member_id,
        request.client_id,
        request.session_timeout_ms,
        request.rebalance_timeout_ms,
        request.protocols,
        request.instance_id,
        request.client_host,
        awaiting_join=True,
    )


def _add_member(
    group: ClassicGroup, request: JoinRequest, member_id: str, now_ms: int, initial_delay_ms: int
) -> tuple[ClassicGroup, JoinResult]:
    """GMM.addMemberThenRebalanceOrCompleteJoin."""
    was_empty = group.empty
    group = _put(replace(group, protocol_type=request.protocol_type), _new_member(request, member_id))
    if group.leader is None or group.leader not in group.members:
        group = replace(group, leader=member_id)
    if group.state == PREPARING_REBALANCE:
        if group.initial_until_ms:
            # InitialDelayedJoin: each new member pushes the round's end by the delay, within
            # the rebalance timeout of the round's first member.
            deadline = min(now_ms + initial_delay_ms, group.initial_until_ms)
            group = replace(group, rebalance_deadline_ms=max(group.rebalance_deadline_ms, deadline))
        return _maybe_complete(group, now_ms), JoinResult(NONE, member_id, wait=True)
    if was_empty and initial_delay_ms > 0:
        until = now_ms + request.rebalance_timeout_ms
        group = replace(
            group,
            state=PREPARING_REBALANCE,
            initial_until_ms=until,
            rebalance_deadline_ms=min(now_ms + initial_delay_ms, until),
            pending_sync=frozenset(),
        )
        return group, JoinResult(NONE, member_id, wait=True)
    return _prepare_rebalance(group, now_ms), JoinResult(NONE, member_id, wait=True)


def _replace_static(
    group: ClassicGroup, old: ClassicMember, request: JoinRequest, new_member_id: str, now_ms: int
) -> tuple[ClassicGroup, JoinResult]:
    """A known ``group.instance.id`` with a new member id takes the old member's place
    (GMM.updateStaticMemberThenRebalanceOrCompleteJoin)."""
    member = replace(
        old,
        member_id=new_member_id,
        client_id=request.client_id,
        client_host=request.client_host,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        protocols=request.protocols,
    )
    members = {
        (new_member_id if k == old.member_id else k): (member if k == old.member_id else v)
        for k, v in group.members.items()
    }
    leader = new_member_id if group.leader == old.member_id else group.leader
    pending_sync = frozenset(new_member_id if m == old.member_id else m for m in group.pending_sync)
    moved = replace(group, members=members, leader=leader, pending_sync=pending_sync)
    if group.state == STABLE and select_protocol(members.values()) == group.protocol:
        return moved, JoinResult(NONE, new_member_id, static_rejoin=True, previous_leader=group.leader or "")
    if group.state == PREPARING_REBALANCE:
        moved = _put(moved, replace(member, awaiting_join=True))
        return _maybe_complete(moved, now_ms), JoinResult(NONE, new_member_id, wait=True)
    moved = _put(moved, replace(member, awaiting_join=True))
    return _prepare_rebalance(moved, now_ms), JoinResult(NONE, new_member_id, wait=True)


def _prepare_rebalance(group: ClassicGroup, now_ms: int) -> ClassicGroup:
    """Start a round (GMM.prepareRebalance): members must join again within the rebalance timeout."""
    timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
    group = replace(
        group,
        state=PREPARING_REBALANCE,
        initial_until_ms=0,
        rebalance_deadline_ms=now_ms + timeout,
        pending_sync=frozenset(),
    )
    return _maybe_complete(group, now_ms)


def _maybe_complete(group: ClassicGroup, now_ms: int) -> ClassicGroup:
    """Complete the round once every member rejoined (not before a new group's initial delay
    ran out), or at its deadline (GMM.completeClassicGroupJoin)."""
    if group.state != PREPARING_REBALANCE:
        return group
    everyone = all(m.awaiting_join for m in group.members.values()) and not group.pending
    if group.members and not (now_ms >= group.rebalance_deadline_ms or (everyone and not group.initial_until_ms)):
        return group
    members = {
        k: m for k, m in group.members.items() if m.awaiting_join or m.instance_id is not None
    }  # dynamic members that did not rejoin are dropped, static ones wait for their session
    if not members:
        return replace(
            group,
            members={},
            protocol=None,
            leader=None,
            generation=group.generation + 1,
            state=EMPTY,
            initial_until_ms=0,
            pending_sync=frozenset(),
        )
    leader = group.leader
    if leader not in members or not members[leader].awaiting_join:
        joined = [k for k, m in members.items() if m.awaiting_join]
        leader = joined[0] if joined else next(iter(members))
    timeout = max(m.rebalance_timeout_ms for m in members.values())
    return replace(
        group,
        members={k: replace(m, awaiting_join=False, assignment=b"") for k, m in members.items()},
        protocol=select_protocol(members.values()),
        leader=leader,
        generation=group.generation + 1,
        state=COMPLETING_REBALANCE,
        initial_until_ms=0,
        pending={k: v for k, v in group.pending.items() if v > now_ms},
        pending_sync=frozenset(members),
        sync_deadline_ms=now_ms + timeout,
    )


def join_response(group: ClassicGroup, member_id: str) -> JoinResponse:
    """The JoinGroup answer for a member of the group's current generation."""
    if member_id not in group.members:
        return JoinResponse(UNKNOWN_MEMBER_ID, member_id)
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    if member_id == group.leader:
        members = tuple((m.member_id, m.instance_id, m.metadata(group.protocol)) for m in group.members.values())
    return JoinResponse(
        NONE,
        member_id,
        group.generation,
        group.protocol_type,
        group.protocol,
        group.leader or "",
        members,
    )


def static_rejoin_response(
    group: ClassicGroup, member_id: str, previous_leader: str, supports_skip_assignment: bool
) -> JoinResponse:
    """The JoinGroup answer of a static member that replaced its old member id in a Stable group
    without a rebalance (GMM.updateStaticMemberThenRebalanceOrCompleteJoin). From v9 (KIP-814) the
    leader learns it leads, with every member's metadata, and skips its assignor: assignors are
    not idempotent and a Stable group would not pass a new assignment on anyway. Before v9 the
    answer names the leader before the replacement, so a restarted leader runs no assignor and
    syncs as a follower."""
    if supports_skip_assignment:
        return replace(join_response(group, member_id), skip_assignment=member_id == group.leader)
    return JoinResponse(NONE, member_id, group.generation, group.protocol_type, group.protocol, previous_leader)


def join_outcome(group: ClassicGroup, member_id: str, joined_generation: int) -> JoinResponse | None:
    """The answer for a JoinGroup that waits since the group was at ``joined_generation``: None
    while its round is still in progress."""
    if member_id not in group.members:
        return JoinResponse(UNKNOWN_MEMBER_ID, member_id)
    if group.generation == joined_generation and group.state == PREPARING_REBALANCE:
        return None
    if group.generation == joined_generation and group.members[member_id].awaiting_join:
        return None
    return join_response(group, member_id)


# -- validation, deadlines ----------------------------------------------------------------------


def member_error(group: ClassicGroup, member_id: str, instance_id: str | None) -> str:
    """CG.validateMember: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or NONE."""
    if instance_id is not None:
        holder = group.member_for_instance(instance_id)
        if holder is None:
            return UNKNOWN_MEMBER_ID
        return NONE if holder.member_id == member_id else FENCED_INSTANCE_ID
    return NONE if member_id in group.members else UNKNOWN_MEMBER_ID


def advance(group: ClassicGroup, now_ms: int, expired: Collection[str] = ()) -> ClassicGroup:
    """The group after what time did: ``expired`` members (their sessions timed out) removed,
    pending member ids lapsed, a round past its deadline completed, and members that owe a
    SyncGroup past its deadline removed (each removal starts a round, as Kafka's)."""
    gone = set(expired) & set(group.members)
    if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync and now_ms >= group.sync_deadline_ms:
        gone |= set(group.pending_sync) & set(group.members)
    lapsed = {k: v for k, v in group.pending.items() if v > now_ms}
    if lapsed != dict(group.pending):
        group = replace(group, pending=lapsed)
    if gone:
        group = _remove(group, gone, now_ms)
    return _maybe_complete(group, now_ms)


def _remove(group: ClassicGroup, member_ids: Collection[str], now_ms: int) -> ClassicGroup:
    """GMM.removeMemberAndUpdateClassicGroup."""
    members = {k: m for k, m in group.members.items() if k not in member_ids}
    leader = group.leader if group.leader in members else next(iter(members), None)
    group = replace(group, members=members, leader=leader, pending_sync=frozenset(group.pending_sync - set(member_ids)))
    if group.state in (STABLE, COMPLETING_REBALANCE):
        return _prepare_rebalance(group, now_ms)
    if group.state == PREPARING_REBALANCE:
        return _maybe_complete(group, now_ms)
    return group


def next_deadline(group: ClassicGroup) -> int | None:
    """When time alone changes the group next (ms), if it will."""
    if group.state == PREPARING_REBALANCE:
        return group.rebalance_deadline_ms
    if group.pending_sync:
        return group.sync_deadline_ms
    return None


# -- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------------------


@dataclass(frozen=True)
class SyncRequest:
    member_id: str
    instance_id: str | None
    generation: int
    protocol_type: str | None = None  # SyncGroup v5+: must be the group's when given
    protocol: str | None = None
    assignments: Mapping[str, bytes] = field(default_factory=dict)  # the leader's, by member id


def sync(group: ClassicGroup, request: SyncRequest) -> tuple[ClassicGroup, str]:
    """The group after a SyncGroup and its error (NONE: its answer is :func:`sync_outcome`).
    The leader's assignments are stored (members it left out get empty bytes) and the group
    is Stable (GMM.classicGroupSyncToClassicGroup)."""
    member_id, instance_id, generation = request.member_id, request.instance_id, request.generation
    protocol_type, protocol, assignments = request.protocol_type, request.protocol, request.assignments
    error = member_error(group, member_id, instance_id)
    if error == NONE and group.state == EMPTY:
        error = UNKNOWN_MEMBER_ID
    if error != NONE:
        return group, error
    if generation != group.generation:
        return group, ILLEGAL_GENERATION
    if (protocol_type and protocol_type != group.protocol_type) or (protocol and protocol != group.protocol):
        return group, INCONSISTENT_GROUP_PROTOCOL
    if group.state == PREPARING_REBALANCE:
        return group, REBALANCE_IN_PROGRESS
    group = replace(group, pending_sync=frozenset(group.pending_sync - {member_id}))
    if group.state == COMPLETING_REBALANCE and member_id == group.leader:
        members = {k: replace(m, assignment=bytes(assignments.get(k, b""))) for k, m in group.members.items()}
        group = replace(group, members=members, state=STABLE)
    return group, NONE


def sync_outcome(group: ClassicGroup, member_id: str, generation: int) -> tuple[str, bytes] | None:
    """(error, assignment) for a SyncGroup of ``generation`` once decided; None while the
    leader's assignments have not arrived."""
    if member_id not in group.members:
        return UNKNOWN_MEMBER_ID, b""
    if generation != group.generation:
        return (REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else ILLEGAL_GENERATION), b""
    if group.state == PREPARING_REBALANCE:
        return REBALANCE_IN_PROGRESS, b""
    if group.state == COMPLETING_REBALANCE:
        return None
    return NONE, group.members[member_id].assignment


def heartbeat(group: ClassicGroup, member_id: str, instance_id: str | None, generation: int) -> str:
    """A Heartbeat's error (GMM.classicGroupHeartbeatToClassicGroup): it changes nothing in the
    group (the session is the member's lease)."""
    if group.state == EMPTY:
        return UNKNOWN_MEMBER_ID
    error = member_error(group, member_id, instance_id)
    if error != NONE:
        return error
    if generation != group.generation:
        return ILLEGAL_GENERATION
    return REBALANCE_IN_PROGRESS if group.state == PREPARING_REBALANCE else NONE


def leave(
    group: ClassicGroup, leaving: Sequence[tuple[str, str | None]], now_ms: int
) -> tuple[ClassicGroup, list[tuple[str, str]]]:
    """The group after members leave, each named by member id or (LeaveGroup v3+) by
    ``group.instance.id``; (member id, error) per member in request order
    (GMM.classicGroupLeaveToClassicGroup)."""
    errors: list[tuple[str, str]] = []
    gone: set[str] = set()
    for member_id, instance_id in leaving:
        if instance_id is not None:
            holder = group.member_for_instance(instance_id)
            if holder is None:
                errors.append((member_id, UNKNOWN_MEMBER_ID))
            elif member_id and member_id != holder.member_id:
                errors.append((member_id, FENCED_INSTANCE_ID))
            else:
                gone.add(holder.member_id)
                errors.append((holder.member_id, NONE))
        elif member_id in group.pending and member_id not in group.members:
            group = replace(group, pending={k: v for k, v in group.pending.items() if k != member_id})
            errors.append((member_id, NONE))
        elif member_id in group.members:
            gone.add(member_id)
            errors.append((member_id, NONE))
        else:
            errors.append((member_id, UNKNOWN_MEMBER_ID))
    group = _remove(group, gone, now_ms) if gone else _maybe_complete(group, now_ms)
    return group, errors


# -- offset commits -----------------------------------------------------------------------------


def check_offset_commit(
    group: ClassicGroup | None,
    member_id: str | None,
    instance_id: str | None,
    generation: int,
    *,
    transactional: bool = False,
    live: Collection[str] | None = None,
) -> None:
    """Refuse an (Txn)OffsetCommit Kafka's coordinator refuses (CG.validateOffsetCommit):
    UnknownMemberIdError, FencedInstanceIdError or CommitFailedError (an old generation);
    nothing is committed then. Generation -1 without a member id (a "simple" consumer or an
    admin tool) may commit while the group is empty: no member whose lease is fresh
    (``live``; by default every member counts as live)."""
    members = set(group.members) if group is not None else set()
    if live is not None:
        members &= set(live)
    empty = group is None or group.state == EMPTY or not members
    if generation < 0 and empty:
        return
    name = group.group_id if group is not None else "?"
    if generation >= 0 or member_id or instance_id is not None:
        error = member_error(group, member_id or "", instance_id) if group is not None else UNKNOWN_MEMBER_ID
        if error == FENCED_INSTANCE_ID:
            raise FencedInstanceIdError(
                f"group.instance.id {instance_id!r} is held by another member of group {name!r}: this one is "
                "fenced; nothing was committed"
            )
        if error != NONE:
            raise UnknownMemberIdError(
                f"member {member_id!r} is not in group {name!r}; the offset commit was refused, nothing was committed"
            )
        assert group is not None
        if generation != group.generation:
            raise CommitFailedError(
                f"offset commit of generation {generation} refused: group {name!r} is at generation "
                f"{group.generation}; nothing was committed"
            )
    elif not transactional:
        raise UnknownMemberIdError(
            f"group {name!r} has members: an offset commit without a member id and generation is refused "
            "while it is not empty; nothing was committed"
        )
