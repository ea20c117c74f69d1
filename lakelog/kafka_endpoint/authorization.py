"""Every request of a connection authorized as Kafka's broker does, against the store's ACLs.

Switched on by ``authorizer.class.name`` (Kafka's StandardAuthorizer name); without it every
request is answered as before. The decision itself is :func:`engine.security.acls.authorize`;
here is which operation on which resource each API needs, after Kafka's ``KafkaApis``
(``core/src/main/scala/kafka/server/KafkaApis.scala``, the ``authHelper.authorize`` /
``filterByAuthorized`` calls of each ``handle*Request``):

* topic lists (Produce WRITE, Fetch READ, ListOffsets/OffsetForLeaderEpoch/Metadata DESCRIBE,
  DeleteTopics/DeleteRecords DELETE, CreatePartitions ALTER, CreateTopics CREATE on the cluster
  or the topic, DescribeConfigs DESCRIBE_CONFIGS, IncrementalAlterConfigs ALTER_CONFIGS): the
  refused topics are taken out of the request before it is handled and answered with
  TOPIC_AUTHORIZATION_FAILED beside the others' answers, so a refused topic commits nothing;
  Metadata for all topics lists only those the principal may describe;
* groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit READ; OffsetFetch,
  DescribeGroups, FindCoordinator DESCRIBE; DeleteGroups, OffsetDelete DELETE) and
  transactional ids (WRITE; FindCoordinator and DescribeTransactions DESCRIBE): the whole
  request is answered with GROUP_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED and not handled;
* the cluster (DescribeCluster, DescribeAcls, DescribeUserScramCredentials DESCRIBE; CreateAcls,
  DeleteAcls, AlterUserScramCredentials ALTER): CLUSTER_AUTHORIZATION_FAILED;
* an idempotent producer's InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on
  some topic (Kafka 3.0+, KIP-679's relaxation).

The ACLs are read from the store at most once a second per agent (:class:`RequestAuthorizer`),
so a binding added through any agent applies everywhere within about a second.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from lakelog.engine.security.acls import CLUSTER_NAME, AclBinding, AclStore, authorize
from lakelog.kafka_endpoint.admin import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    METADATA,
)
from lakelog.kafka_endpoint.fetch import FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH
from lakelog.kafka_endpoint.groups import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from lakelog.kafka_endpoint.messages import Request, build, item_class, response_class
from lakelog.kafka_endpoint.produce import PRODUCE
from lakelog.kafka_endpoint.security_apis import (
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
)
from lakelog.kafka_endpoint.transaction_states import DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS
from lakelog.kafka_endpoint.transactions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
)

ACL_CACHE_SECONDS = 1.0
TOPIC_REFUSED = ErrorCode.topic_authorization_failed
GROUP_REFUSED = ErrorCode.group_authorization_failed
TXN_REFUSED = ErrorCode.transactional_id_authorization_failed
CLUSTER_REFUSED = ErrorCode.cluster_authorization_failed
TOPIC_CONFIG_RESOURCE = 2  # ConfigResource.Type.TOPIC


@dataclass(frozen=True)
class TopicList:
    """Where an API's request lists topics and where its response answers each."""

    operation: str
    request_field: str
    name: str | None  # the entry's name field; None: the entries are the names
    response_field: str
    response_name: str
    partitions: tuple[str, str, str, str] | None = None  # request list, its index; response list, its index
    code: str = "error_code"
    extra: tuple[tuple[str, Any], ...] = ()  # more fields of a refused answer (DescribeConfigs' resource type)

    def name_of(self, entry: Any) -> str:
        return entry if self.name is None else getattr(entry, self.name)

    def refused_answer(self, entry: Any) -> dict[str, Any]:
        answer: dict[str, Any] = {self.response_name: self.name_of(entry), **dict(self.extra)}
        if self.partitions is None:
            answer[self.code] = TOPIC_REFUSED
            return answer
        parts, index, response_parts, response_index = self.partitions
        answer[response_parts] = [
            {response_index: p if isinstance(p, int) else getattr(p, index), self.code: TOPIC_REFUSED}
            for p in getattr(entry, parts)
        ]
        return answer


TOPIC_LISTS: dict[int, TopicList] = {
    PRODUCE: TopicList(
        "WRITE", "topic_data", "name", "responses", "name", ("partition_data", "index", "partition_responses", "index")
    ),
    FETCH: TopicList(
        "READ", "topics", "topic", "responses", "topic", ("partitions", "partition", "partitions", "partition_index")
    ),
    LIST_OFFSETS: TopicList(
        "DESCRIBE",
        "topics",
        "name",
        "topics",
        "name",
        ("partitions", "partition_index", "partitions", "partition_index"),
    ),
    OFFSET_FOR_LEADER_EPOCH: TopicList(
        "DESCRIBE", "topics", "topic", "topics", "topic", ("partitions", "partition", "partitions", "partition")
    ),
    OFFSET_COMMIT: TopicList(
        "READ", "topics", "name", "topics", "name", ("partitions", "partition_index", "partitions", "partition_index")
    ),
    DELETE_RECORDS: TopicList(
        "DELETE", "topics", "name", "topics", "name", ("partitions", "partition_index", "partitions", "partition_index")
    ),
    DESCRIBE_PRODUCERS: TopicList(
        "READ", "topics", "name", "topics", "name", ("partition_indexes", "", "partitions", "partition_index")
    ),
    CREATE_TOPICS: TopicList("CREATE", "topics", "name", "topics", "name"),
    DELETE_TOPICS: TopicList("DELETE", "topic_names", None, "responses", "name"),
    CREATE_PARTITIONS: TopicList("ALTER", "topics", "name", "results", "name"),
}
GROUP_APIS: dict[int, tuple[str, str]] = {  # api -> (operation, the request's group id field)
    JOIN_GROUP: ("READ", "group_id"),
    SYNC_GROUP: ("READ", "group_id"),
    HEARTBEAT: ("READ", "group_id"),
    LEAVE_GROUP: ("READ", "group_id"),
    OFFSET_COMMIT: ("READ", "group_id"),
    OFFSET_DELETE: ("DELETE", "group_id"),
    CONSUMER_GROUP_HEARTBEAT: ("READ", "group_id"),
    TXN_OFFSET_COMMIT: ("READ", "group_id"),
    ADD_OFFSETS_TO_TXN: ("READ", "group_id"),
}
TXN_APIS = (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
CLUSTER_APIS: dict[int, str] = {
    DESCRIBE_CLUSTER: "DESCRIBE",
    LIST_TRANSACTIONS: "DESCRIBE",
    DESCRIBE_ACLS: "DESCRIBE",
    CREATE_ACLS: "ALTER",
    DELETE_ACLS: "ALTER",
    DESCRIBE_USER_SCRAM_CREDENTIALS: "DESCRIBE",
    ALTER_USER_SCRAM_CREDENTIALS: "ALTER",
}


@dataclass
class Decision:
    """What to do with a request: answer ``answer`` without handling it, or handle ``request``
    (possibly with refused topics taken out) and pass its body through :meth:`complete`."""

    request: Request
    answer: Any = None
    complete: Callable[[Any], Any] = lambda body: body


class RequestAuthorizer:
    """The authorization of one agent's requests (see the module docstring). Thread-safe."""

    def __init__(
        self,
        store_uri: str,
        serve_settings: dict[str, Any],
        existing_topics: Callable[[], Any] = dict,
        auto_create: bool = False,
    ) -> None:
        """``existing_topics()`` names the store's topics and ``auto_create`` is the store's
        ``auto.create.topics.enable``: a Metadata request naming a missing topic creates it only
        for a principal that may CREATE it (on the cluster or the topic), as Kafka checks."""
        self.enabled = bool(serve_settings.get("authorizer.class.name"))
        self._existing_topics = existing_topics
        self._auto_create = auto_create
        self.super_users = frozenset(
            p.strip() for p in str(serve_settings.get("super.users", "")).split(";") if p.strip()
        )
        self.allow_if_no_acl = bool(serve_settings.get("allow.everyone.if.no.acl.found", False))
        self._acls = AclStore(store_uri)
        self._cached: tuple[float, list[AclBinding]] = (float("-inf"), [])
        self._lock = threading.Lock()

    def bindings(self) -> list[AclBinding]:
        with self._lock:
            read_at, bindings = self._cached
            if time.monotonic() - read_at > ACL_CACHE_SECONDS:
                bindings = self._acls.bindings()
                self._cached = (time.monotonic(), bindings)
            return bindings

    def allowed(self, request: Request, operation: str, resource_type: str, name: str) -> bool:
        """Whether the principal of ``request``'s connection may do ``operation`` on the resource."""
        session = request.session
        return authorize(
            self.bindings(),
            session.principal,
            session.client_host,
            operation,
            resource_type,
            name,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )

    def decide(self, request: Request) -> Decision:
        """The :class:`Decision` for ``request`` (handle it unchanged when no authorizer is set
        or the request came through no listener)."""
        if not self.enabled or request.session is None:
            return Decision(request)
        key = request.api_key
        refused = self._refused_whole(request)
        if refused is not None:
            return Decision(request, answer=_whole_answer(request, refused))
        if key == METADATA:
            return self._metadata(request)
        if key == LIST_GROUPS and not self.allowed(request, "DESCRIBE", "CLUSTER", CLUSTER_NAME):
            return Decision(
                request,
                complete=lambda out: dataclasses.replace(
                    out, groups=tuple(g for g in out.groups if self.allowed(request, "DESCRIBE", "GROUP", g.group_id))
                ),
            )
        if key in (DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
            operation = "DESCRIBE_CONFIGS" if key == DESCRIBE_CONFIGS else "ALTER_CONFIGS"
            spec = TopicList(
                operation,
                "resources",
                "resource_name",
                "results" if key == DESCRIBE_CONFIGS else "responses",
                "resource_name",
                extra=(("resource_type", TOPIC_CONFIG_RESOURCE),),
            )
            return self._topics(request, spec, lambda e: e.resource_type == TOPIC_CONFIG_RESOURCE)
        spec = TOPIC_LISTS.get(key)
        if spec is None:
            return Decision(request)
        if key == CREATE_TOPICS and self.allowed(request, "CREATE", "CLUSTER", CLUSTER_NAME):
            return Decision(request)
        return self._topics(request, spec)

    def _refused_whole(self, request: Request) -> ErrorCode | None:
        """The code refusing the whole request (its group, transactional id or the cluster), or None."""
        key, body = request.api_key, request.body
        if key in GROUP_APIS:
            operation, field = GROUP_APIS[key]
            if not self.allowed(request, operation, "GROUP", getattr(body, field)):
                return GROUP_REFUSED
        if key in TXN_APIS and not self.allowed(request, "WRITE", "TRANSACTIONAL_ID", _transactional_id(body)):
            return TXN_REFUSED
        if key == ADD_PARTITIONS_TO_TXN and not all(
            self.allowed(request, "WRITE", "TOPIC", t.name) for t in body.v3_and_below_topics
        ):
            return TOPIC_REFUSED
        if (
            key == PRODUCE
            and body.transactional_id is not None
            and not self.allowed(request, "WRITE", "TRANSACTIONAL_ID", body.transactional_id)
        ):
            return TXN_REFUSED
        if key == INIT_PRODUCER_ID:
            if body.transactional_id is not None:
                if not self.allowed(request, "WRITE", "TRANSACTIONAL_ID", body.transactional_id):
                    return TXN_REFUSED
            elif not self._may_write_somewhere(request):
                return CLUSTER_REFUSED
        if key == FIND_COORDINATOR:
            resource = "TRANSACTIONAL_ID" if getattr(body, "key_type", 0) == 1 else "GROUP"  # v0: groups only
            keys = body.coordinator_keys if request.api_version >= 4 else (body.key,)
            if not all(self.allowed(request, "DESCRIBE", resource, k) for k in keys):
                return TXN_REFUSED if resource == "TRANSACTIONAL_ID" else GROUP_REFUSED
        if key in (DESCRIBE_GROUPS, DELETE_GROUPS, CONSUMER_GROUP_DESCRIBE, OFFSET_FETCH):
            operation = "DELETE" if key == DELETE_GROUPS else "DESCRIBE"
            names = _group_names(request)
            if not all(self.allowed(request, operation, "GROUP", g) for g in names):
                return GROUP_REFUSED
        if key == DESCRIBE_TRANSACTIONS and not all(
            self.allowed(request, "DESCRIBE", "TRANSACTIONAL_ID", t) for t in body.transactional_ids
        ):
            return TXN_REFUSED
        cluster = CLUSTER_APIS.get(key)
        if cluster is not None and not self.allowed(request, cluster, "CLUSTER", CLUSTER_NAME):
            return CLUSTER_REFUSED
        return None

    def _may_write_somewhere(self, request: Request) -> bool:
        if self.allowed(request, "IDEMPOTENT_WRITE", "CLUSTER", CLUSTER_NAME):
            return True
        principal = request.session.principal
        return principal in self.super_users or any(
            b.resource_type == "TOPIC"
            and b.permission == "ALLOW"
            and b.operation in ("WRITE", "ALL")
            and b.principal in (principal, "User:*")
            for b in self.bindings()
        )

    def _topics(self, request: Request, spec: TopicList, applies: Callable[[Any], bool] = lambda e: True) -> Decision:
        entries = getattr(request.body, spec.request_field) or ()
        refused = [
            e for e in entries if applies(e) and not self.allowed(request, spec.operation, "TOPIC", spec.name_of(e))
        ]
        if not refused:
            return Decision(request)
        kept = tuple(e for e in entries if e not in refused)
        body = dataclasses.replace(request.body, **{spec.request_field: kept})
        answers = [spec.refused_answer(e) for e in refused]

        def complete(out: Any) -> Any:
            if out is None:  # Produce with acks=0 is not answered
                return None
            cls = item_class(type(out), spec.response_field)
            return dataclasses.replace(
                out, **{spec.response_field: (*getattr(out, spec.response_field), *(build(cls, **a) for a in answers))}
            )

        return Decision(dataclasses.replace(request, body=body), complete=complete)

    def _metadata(self, request: Request) -> Decision:
        wanted = request.body.topics
        if wanted is None:
            return Decision(
                request,
                complete=lambda out: dataclasses.replace(
                    out,
                    topics=tuple(
                        t for t in out.topics if t.name is None or self.allowed(request, "DESCRIBE", "TOPIC", t.name)
                    ),
                ),
            )
        refused = [t for t in wanted if t.name is not None and not self.allowed(request, "DESCRIBE", "TOPIC", t.name)]
        if self._auto_create and getattr(request.body, "allow_auto_topic_creation", True):
            # KafkaApis.handleTopicMetadataRequest: a missing topic the principal may not create
            # (CREATE on the cluster or the topic) is answered TOPIC_AUTHORIZATION_FAILED, not created.
            existing = self._existing_topics()
            if not self.allowed(request, "CREATE", "CLUSTER", CLUSTER_NAME):
                refused += [
                    t
                    for t in wanted
                    if t.name is not None
                    and t not in refused
                    and t.name not in existing
                    and not self.allowed(request, "CREATE", "TOPIC", t.name)
                ]
        if not refused:
            return Decision(request)
        body = dataclasses.replace(request.body, topics=tuple(t for t in wanted if t not in refused))

        def complete(out: Any) -> Any:
            cls = item_class(type(out), "topics")
            added = [build(cls, error_code=TOPIC_REFUSED, name=t.name, partitions=[]) for t in refused]
            return dataclasses.replace(out, topics=(*out.topics, *added))

        return Decision(dataclasses.replace(request, body=body), complete=complete)


def _transactional_id(body: Any) -> str:
    # AddPartitionsToTxn v0-3 names its fields for the versions (KIP-890 added a batched form).
    return getattr(body, "transactional_id", None) or body.v3_and_below_transactional_id


def _whole_answer(request: Request, code: ErrorCode) -> Any:
    """A response to ``request`` refusing all of it with ``code``: top-level error code where the
    API has one, else each entry of the request answered with it."""
    key, body = request.api_key, request.body
    cls = response_class(key, request.api_version)
    if key in TOPIC_LISTS and key not in (CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS):
        spec = dataclasses.replace(TOPIC_LISTS[key])
        answers = [spec.refused_answer(e) for e in getattr(body, spec.request_field) or ()]
        for answer in answers:
            for part in answer.get(spec.partitions[2], []) if spec.partitions else []:
                part[spec.code] = code
        return build(cls, **{spec.response_field: answers})
    if key == ADD_PARTITIONS_TO_TXN:
        field = "results_by_topic_v3_and_below"
        return build(
            cls,
            **{
                field: [
                    {
                        "name": t.name,
                        "results_by_partition": [
                            {"partition_index": p, "partition_error_code": code} for p in t.partitions
                        ],
                    }
                    for t in body.v3_and_below_topics
                ]
            },
        )
    if key == DESCRIBE_GROUPS:
        return build(cls, groups=[{"group_id": g, "error_code": code} for g in body.groups])
    if key == CONSUMER_GROUP_DESCRIBE:
        return build(
            cls,
            groups=[
                {"group_id": g, "error_code": code, "group_state": "", "group_epoch": -1, "assignment_epoch": -1}
                for g in body.group_ids
            ],
        )
    if key == OFFSET_FETCH and request.api_version >= 8:
        return build(cls, groups=[{"group_id": g.group_id, "error_code": code, "topics": []} for g in body.groups])
    if key == DELETE_GROUPS:
        return build(cls, results=[{"group_id": g, "error_code": code} for g in body.groups_names])
    if key == FIND_COORDINATOR and request.api_version >= 4:
        return build(
            cls,
            coordinators=[
                {"key": k, "error_code": code, "node_id": -1, "host": "", "port": -1} for k in body.coordinator_keys
            ],
        )
    if key == DESCRIBE_TRANSACTIONS:
        return build(
            cls, transaction_states=[{"transactional_id": t, "error_code": code} for t in body.transactional_ids]
        )
    if key == TXN_OFFSET_COMMIT:
        return build(
            cls,
            topics=[
                {
                    "name": t.name,
                    "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
                }
                for t in body.topics
            ],
        )
    return build(cls, error_code=code)


def _group_names(request: Request) -> list[str]:
    """The groups a DescribeGroups, DeleteGroups, ConsumerGroupDescribe or OffsetFetch names
    (OffsetFetch v8+ several, before that one)."""
    body = request.body
    if request.api_key == DESCRIBE_GROUPS:
        return list(body.groups)
    if request.api_key == DELETE_GROUPS:
        return list(body.groups_names)
    if request.api_key == CONSUMER_GROUP_DESCRIBE:
        return list(body.group_ids)
    if request.api_version >= 8:  # OffsetFetch
        return [g.group_id for g in body.groups]
    return [body.group_id]
