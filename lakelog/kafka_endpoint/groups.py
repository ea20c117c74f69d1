"""Consumer groups: FindCoordinator, OffsetCommit, OffsetFetch, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, and the groups' admin APIs ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

Groups live in the store, not in an agent: every agent coordinates every
group, Kafka's classic protocol for any protocol type
(:mod:`engine.groups.classic_coordinator`), and lakelog's own consumers are
members of the same groups (they speak the same protocol). A JoinGroup or
SyncGroup that must wait for other members waits in the agent the client
reached, re-reading the group; a member whose agent dies goes on through
another one until its session times out. Offsets go into
``__consumer_offsets`` as lakelog's consumers commit them. The admin APIs
read and tombstone ``__consumer_offsets`` as ``lakelog groups`` does
(:mod:`engine.admin.groups`), so Kafka's ``kafka-consumer-groups`` and
lakelog's CLI see the same groups.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kio.schema.delete_groups.v0.request import DeleteGroupsRequest
from kio.schema.describe_groups.v0.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest
from kio.schema.heartbeat.v0.request import HeartbeatRequest
from kio.schema.join_group.v0.request import JoinGroupRequest
from kio.schema.leave_group.v0.request import LeaveGroupRequest
from kio.schema.list_groups.v0.request import ListGroupsRequest
from kio.schema.offset_commit.v2.request import OffsetCommitRequest
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v1.request import OffsetFetchRequest
from kio.schema.sync_group.v0.request import SyncGroupRequest

from lakelog.engine.admin.groups import delete_group, delete_offsets, describe_group, list_groups
from lakelog.engine.consume import Consumer
from lakelog.engine.errors import GroupIdNotFoundError, LakelogError
from lakelog.engine.groups.classic import ClassicGroup, JoinRequest, SyncRequest
from lakelog.engine.groups.classic_coordinator import ClassicCoordinator
from lakelog.engine.groups.offsets_topic import MAX_OFFSET, OffsetAndMetadata
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.error_codes import error_code, outcome
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.session import advertised_address
from lakelog.store import Store

log = logging.getLogger(__name__)

FIND_COORDINATOR = api_key(FindCoordinatorRequest)
OFFSET_COMMIT = api_key(OffsetCommitRequest)
OFFSET_FETCH = api_key(OffsetFetchRequest)
JOIN_GROUP = api_key(JoinGroupRequest)
SYNC_GROUP = api_key(SyncGroupRequest)
HEARTBEAT = api_key(HeartbeatRequest)
LEAVE_GROUP = api_key(LeaveGroupRequest)
LIST_GROUPS = api_key(ListGroupsRequest)
DESCRIBE_GROUPS = api_key(DescribeGroupsRequest)
DELETE_GROUPS = api_key(DeleteGroupsRequest)
OFFSET_DELETE = api_key(OffsetDeleteRequest)
VERSIONS: dict[int, tuple[int, int]] = {
    FIND_COORDINATOR: (0, 4),
    # Offsets of members (a generation) and of consumers that assign() their partitions
    # (Kafka's "simple" consumer groups: generation -1).
    OFFSET_COMMIT: (2, 8),
    OFFSET_FETCH: (1, 7),
    JOIN_GROUP: (2, 7),
    SYNC_GROUP: (1, 5),
    HEARTBEAT: (1, 4),
    LEAVE_GROUP: (1, 4),
    LIST_GROUPS: (0, 4),
    DESCRIBE_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
}


def bad_offset(offset: int) -> bool:
    """Whether an offset a client asks to commit is one no log holds (a negative one: the wire's
    int64 carries no larger than Kafka's longest). Kafka's Java client refuses those itself
    (OffsetAndMetadata: "Invalid negative offset"); a client that sends one anyway gets
    INVALID_COMMIT_OFFSET_SIZE for that partition, which Kafka's consumers raise rather than retry
    (ConsumerCoordinator), and nothing is committed for it."""
    return not 0 <= int(offset) <= MAX_OFFSET


class GroupApis:
    """The group coordinator's APIs over one store (the groups themselves are in the store), and
    a member-less consumer per group for offset fetches and commits without a generation."""

    def __init__(self, store: Store, host: str, port: int) -> None:
        self.store = store
        self.host, self.port = host, port
        self._groups: dict[str, Consumer] = {}  # group id -> a lakelog consumer that commits for it
        self._groups_lock = threading.Lock()
        self.classic = ClassicCoordinator(store.context, "lakelog-serve")

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            FIND_COORDINATOR: self.find_coordinator,
            OFFSET_COMMIT: self.offset_commit,
            OFFSET_FETCH: self.offset_fetch,
            JOIN_GROUP: self.join_group,
            SYNC_GROUP: self.sync_group,
            HEARTBEAT: self.heartbeat,
            LEAVE_GROUP: self.leave_group,
            LIST_GROUPS: self.list_groups,
            DESCRIBE_GROUPS: self.describe_groups,
            DELETE_GROUPS: self.delete_groups,
            OFFSET_DELETE: self.offset_delete,
        }

    def close(self) -> None:
        self.classic.stopping.set()
        for consumer in self._groups.values():
            consumer.close(autocommit=False)

    # -- FindCoordinator, OffsetCommit, OffsetFetch ----------------------------------------

    def find_coordinator(self, request: Request) -> Any:
        """This agent coordinates every group (groups live in the store, not in an agent)."""
        host, port = advertised_address(request, (self.host, self.port))
        me = {"node_id": 0, "host": host, "port": port, "error_code": ErrorCode.none}
        cls = response_class(FIND_COORDINATOR, request.api_version)
        if request.api_version >= 4:
            return build(cls, coordinators=[{"key": key, **me} for key in request.body.coordinator_keys])
        return build(cls, **me)

    def _group(self, group_id: str) -> Consumer:
        with self._groups_lock:
            consumer = self._groups.get(group_id)
            if consumer is None:
                consumer = self.store.consumer(group_id, enable_auto_commit=False, client_id="lakelog-serve")
                self._groups[group_id] = consumer
            return consumer

    def offset_commit(self, request: Request) -> Any:
        """Commit into ``__consumer_offsets`` as lakelog's consumers do (one Delta commit);
        partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION, the rest are committed."""
        body = request.body
        topics = self.store.context.latest_topics()
        answers: dict[tuple[str, int], ErrorCode] = {}
        chosen = {}
        for topic in body.topics:
            for part in topic.partitions:
                meta = topics.get(topic.name)
                if meta is None or not 0 <= part.partition_index < meta.partitions:
                    answers[(topic.name, part.partition_index)] = ErrorCode.unknown_topic_or_partition
                elif bad_offset(part.committed_offset):
                    answers[(topic.name, part.partition_index)] = ErrorCode.invalid_commit_offset_size
                else:
                    tp = TopicPartition(topic.name, part.partition_index)
                    chosen[tp] = OffsetAndMetadata(int(part.committed_offset), part.committed_metadata or "")
        code = ErrorCode.none
        generation = int(body.generation_id_or_member_epoch)
        instance_id = getattr(body, "group_instance_id", None)
        if chosen:
            try:
                # Checked as Kafka's ClassicGroup.validateOffsetCommit: a member of the current
                # generation, or (generation -1, no member) anyone while the group is empty.
                self.classic.commit_offsets(body.group_id, chosen, generation, body.member_id or None, instance_id)
            except Exception as exc:
                if not isinstance(exc, LakelogError):
                    log.exception("offset commit of group %s failed", body.group_id)
                code = error_code(exc)
        for tp in chosen:
            answers[(tp.topic, tp.partition)] = code
        out: dict[str, list[dict]] = {}
        for (name, index), answer in answers.items():
            out.setdefault(name, []).append({"partition_index": index, "error_code": answer})
        topics_out = [{"name": n, "partitions": parts} for n, parts in out.items()]
        return build(response_class(OFFSET_COMMIT, request.api_version), topics=topics_out)

    def offset_fetch(self, request: Request) -> Any:
        body = request.body
        consumer = self._group(body.group_id)
        if body.topics is None:  # every partition with a committed offset
            state = self.store.log.latest()
            wanted = [
                TopicPartition(n, p) for n, t in state.topics.items() if not t.internal for p in range(t.partitions)
            ]
        else:
            wanted = [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
        committed = consumer.committed(wanted)
        out: dict[str, list[dict]] = {}
        for tp in wanted:
            found = committed.get(tp)
            if found is None and body.topics is None:
                continue
            out.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": -1 if found is None else found.offset,
                    "committed_leader_epoch": -1,
                    "metadata": "" if found is None else found.metadata,
                    "error_code": ErrorCode.none,
                }
            )
        topics_out = [{"name": n, "partitions": parts} for n, parts in out.items()]
        return build(response_class(OFFSET_FETCH, request.api_version), topics=topics_out, error_code=ErrorCode.none)

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------------

    def join_group(self, request: Request) -> Any:
        """JoinGroup of Kafka's classic protocol; answers when the member's round completed."""
        cls = response_class(JOIN_GROUP, request.api_version)
        body = request.body
        session_ms = int(body.session_timeout.total_seconds() * 1000)
        rebalance = getattr(body, "rebalance_timeout", None)
        joined = self.classic.join(
            body.group_id,
            JoinRequest(
                member_id=body.member_id or "",
                client_id=request.client_id or "",
                protocol_type=body.protocol_type or "",
                protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=session_ms if rebalance is None else int(rebalance.total_seconds() * 1000),
                instance_id=getattr(body, "group_instance_id", None),
                client_host="/lakelog",
                requires_known_member_id=request.api_version >= 4,
            ),
        )
        return build(
            cls,
            error_code=ErrorCode[joined.error],
            generation_id=joined.generation,
            protocol_type=joined.protocol_type,
            protocol_name=joined.protocol or "",
            leader=joined.leader,
            member_id=joined.member_id,
            members=[
                {"member_id": m, "group_instance_id": instance, "metadata": metadata}
                for m, instance, metadata in joined.members
            ],
        )

    def sync_group(self, request: Request) -> Any:
        body = request.body
        cls = response_class(SYNC_GROUP, request.api_version)
        error, assignment, group = self.classic.sync(
            body.group_id,
            SyncRequest(
                body.member_id,
                getattr(body, "group_instance_id", None),
                int(body.generation_id),
                getattr(body, "protocol_type", None),
                getattr(body, "protocol_name", None),
                {a.member_id: bytes(a.assignment) for a in body.assignments},
            ),
        )
        return build(
            cls,
            error_code=ErrorCode[error],
            protocol_type=group.protocol_type,
            protocol_name=group.protocol,
            assignment=assignment,
        )

    def heartbeat(self, request: Request) -> Any:
        body = request.body
        error = self.classic.heartbeat(
            body.group_id, body.member_id, getattr(body, "group_instance_id", None), int(body.generation_id)
        )
        return build(response_class(HEARTBEAT, request.api_version), error_code=ErrorCode[error])

    def leave_group(self, request: Request) -> Any:
        """LeaveGroup: members named by member id, or (v3+) by ``group_instance_id``."""
        body = request.body
        if hasattr(body, "members"):
            named = [(m.member_id or "", getattr(m, "group_instance_id", None)) for m in body.members]
        else:
            named = [(body.member_id, None)]
        errors = self.classic.leave(body.group_id, named)
        answers = [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": ErrorCode[error]}
            for (member_id, error), (_, instance_id) in zip(errors, named, strict=True)
        ]
        top = answers[0]["error_code"] if request.api_version < 3 and answers else ErrorCode.none
        return build(response_class(LEAVE_GROUP, request.api_version), error_code=top, members=answers)

    # -- ListGroups, DescribeGroups, DeleteGroups, OffsetDelete ------------------------------

    def list_groups(self, request: Request) -> Any:
        wanted = set(getattr(request.body, "states_filter", ()) or ())
        groups = [
            {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state}
            for g in list_groups(self.store.context)
            if not wanted or g.state in wanted
        ]
        return build(response_class(LIST_GROUPS, request.api_version), error_code=ErrorCode.none, groups=groups)

    def describe_groups(self, request: Request) -> Any:
        groups = []
        for group_id in request.body.groups:
            classic = self.classic.read(group_id)
            if not classic.empty:
                groups.append(_describe_classic(classic))
                continue
            try:  # a group without members: only its committed offsets, or none at all (Dead)
                found = describe_group(self.store.context, group_id)
            except GroupIdNotFoundError:
                groups.append(
                    {"error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead", "members": []}
                )
                continue
            groups.append(
                {
                    "error_code": ErrorCode.none,
                    "group_id": group_id,
                    "group_state": found.state,
                    "protocol_type": classic.protocol_type or "",
                    "protocol_data": "",
                    "members": [],
                    "authorized_operations": -2147483648,
                }
            )
        return build(response_class(DESCRIBE_GROUPS, request.api_version), groups=groups)

    def delete_groups(self, request: Request) -> Any:
        results = [
            {"group_id": g, "error_code": outcome(lambda g=g: delete_group(self.store.context, g))["error_code"]}
            for g in request.body.groups_names
        ]
        return build(response_class(DELETE_GROUPS, request.api_version), results=results)

    def offset_delete(self, request: Request) -> Any:
        """OffsetDelete (KIP-496): per topic, the group's offsets of the partitions that exist are
        deleted in one commit, or the topic's partitions carry the error (GROUP_SUBSCRIBED_TO_TOPIC
        while live members subscribe to it); a group that does not exist is a top-level
        GROUP_ID_NOT_FOUND, as Kafka's coordinator answers."""
        group_id = request.body.group_id
        topics = self.store.context.latest_topics()
        answers = []
        for topic in request.body.topics:
            meta = topics.get(topic.name)
            count = 0 if meta is None or meta.internal else meta.partitions
            asked = [int(p.partition_index) for p in topic.partitions]
            codes = {p: ErrorCode.unknown_topic_or_partition for p in asked if not 0 <= p < count}
            known = [TopicPartition(topic.name, p) for p in asked if p not in codes]
            if known:
                try:
                    delete_offsets(self.store.context, group_id, known)
                except GroupIdNotFoundError as exc:
                    return build(response_class(OFFSET_DELETE, request.api_version), error_code=error_code(exc))
                except Exception as exc:
                    codes.update(dict.fromkeys((tp.partition for tp in known), error_code(exc)))
            partitions = [{"partition_index": p, "error_code": codes.get(p, ErrorCode.none)} for p in asked]
            answers.append({"name": topic.name, "partitions": partitions})
        return build(response_class(OFFSET_DELETE, request.api_version), error_code=ErrorCode.none, topics=answers)


def _describe_classic(group: ClassicGroup) -> dict:
    """DescribeGroups of a classic-protocol group: its protocol type and protocol, each member's
    metadata of that protocol and its assignment, as Kafka's coordinator answers."""
    return {
        "error_code": ErrorCode.none,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type or "",
        "protocol_data": group.protocol or "",
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host or "/lakelog",
                "member_metadata": m.metadata(group.protocol),
                "member_assignment": m.assignment,
            }
            for m in group.members.values()
        ],
        "authorized_operations": -2147483648,
    }
