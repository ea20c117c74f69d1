"""Cluster metadata and topic administration: Metadata, CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, IncrementalAlterConfigs, DeleteRecords, onto the store's own
admin.

The agent names itself the only broker (node 0 at its own address) and the leader of
every partition; it keeps no state of its own, so several agents may serve one store.
CreateTopics, DeleteTopics, CreatePartitions and IncrementalAlterConfigs are one Delta
metadata commit each, as ``lakelog topics create/delete/alter`` make them; DescribeConfigs
reads a topic's effective configuration; DeleteRecords moves log start offsets as
``lakelog topics delete-records`` does (:mod:`engine.admin.delete_records`), one Delta commit
per topic, each partition answered on its own. A Metadata request creates a missing topic when the
store's ``auto.create.topics.enable`` allows it, as Kafka's broker does.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from kio.schema.create_partitions.v0.request import CreatePartitionsRequest
from kio.schema.create_topics.v2.request import CreateTopicsRequest
from kio.schema.delete_records.v0.request import DeleteRecordsRequest
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_configs.v1.request import DescribeConfigsRequest
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v0.request import IncrementalAlterConfigsRequest
from kio.schema.metadata.v1.request import MetadataRequest

from lakelog.engine.admin.delete_records import delete_records
from lakelog.engine.errors import InvalidConfigError, InvalidPartitionsError, LakelogError
from lakelog.engine.topic_changes import plan_create
from lakelog.engine.topics import TOPIC_CONFIG_KEYS, TopicMetadata, TopicPartition, topics_from_properties
from lakelog.kafka_endpoint.error_codes import error_code, outcome
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.record_batches import LEADER_EPOCH
from lakelog.kafka_endpoint.session import advertised_address
from lakelog.store import Store

METADATA = api_key(MetadataRequest)
CREATE_TOPICS = api_key(CreateTopicsRequest)
DELETE_TOPICS = api_key(DeleteTopicsRequest)
CREATE_PARTITIONS = api_key(CreatePartitionsRequest)
DESCRIBE_CONFIGS = api_key(DescribeConfigsRequest)
INCREMENTAL_ALTER_CONFIGS = api_key(IncrementalAlterConfigsRequest)
DELETE_RECORDS = api_key(DeleteRecordsRequest)
DESCRIBE_CLUSTER = api_key(DescribeClusterRequest)
VERSIONS: dict[int, tuple[int, int]] = {
    METADATA: (1, 13),  # v10+ carry each topic's id (the store's), v13 a top-level error code
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 5),  # v6 names topics by id
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_CONFIGS: (1, 4),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DELETE_RECORDS: (0, 2),
    DESCRIBE_CLUSTER: (0, 2),
}
log = logging.getLogger(__name__)

BROKERS_ENDPOINT = 1  # DescribeCluster's endpoint_type (v1+): 1 brokers, 2 controllers
# Kafka's AclOperation codes a CLUSTER resource supports (AclEntry.supportedOperations): CREATE,
# ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE,
# CREATE_TOKENS, DESCRIBE_TOKENS. Without an authorizer Kafka reports them all as authorized.
CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12, 13, 14)
NOT_REQUESTED = -(2**31)  # Kafka's Integer.MIN_VALUE: authorized operations were not asked for
# Kafka's DeleteRecordsResponse.INVALID_LOW_WATERMARK: the low watermark of a partition that failed.
INVALID_LOW_WATERMARK = -1

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations (APPEND/SUBTRACT are for list configs)
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # DescribeConfigs config sources


# The fields of a config entry CreateTopics' response carries (CreatableTopicConfigs, v5+).
CREATED_CONFIG_FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive")


def topic_config_entries(topic: TopicMetadata, wanted: Collection[str] | None = None) -> list[dict[str, Any]]:
    """A topic's effective configuration as DescribeConfigs' config entries, sorted by name: the
    overrides as DYNAMIC_TOPIC_CONFIG, the rest as DEFAULT_CONFIG; only ``wanted`` names when
    given. CreateTopics answers the :data:`CREATED_CONFIG_FIELDS` of each."""
    return [
        {
            "name": name,
            "value": _config_text(value),
            "read_only": False,
            # Whether it is a default is config_source's to say (DescribeConfigs v1+ has no is_default).
            "config_source": DYNAMIC_TOPIC_CONFIG if name in topic.overrides else DEFAULT_CONFIG,
            "is_sensitive": False,
            "synonyms": [],
            "documentation": TOPIC_CONFIG_KEYS[name].doc if name in TOPIC_CONFIG_KEYS else None,
        }
        for name, value in sorted(topic.config().items())
        if wanted is None or name in wanted
    ]


def _config_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


class ReplicationNotices:
    """One warning per topic created with a replication factor above 1, which the store
    accepts and reports as 1: its records are kept once, in storage whose own durability
    (the file system's, the object store's) replaces Kafka's replicas. Refusing the factor
    would fail Kafka Connect's workers, whose ``*.storage.replication.factor`` defaults to 3.
    At most ``limit`` topics are remembered."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def note(self, topic: str, factor: int, client_id: str | None) -> bool:
        """Log the notice for ``topic`` unless logged before or ``factor`` is -1 or 1; whether it logged."""
        if factor in (-1, 1):
            return False
        with self._lock:
            if topic in self._seen or len(self._seen) >= self._limit:
                return False
            self._seen.add(topic)
        log.warning(
            "topic %r: replication factor %d asked by client %r is accepted as 1: the store keeps each record "
            "once, and its storage's own durability replaces replication",
            topic,
            factor,
            client_id,
        )
        return True


class AdminApis:
    """Metadata and topic administration over one store, answered as broker ``host:port``."""

    def __init__(self, store: Store, host: str, port: int, cluster_id: str) -> None:
        self.store = store
        self.host, self.port = host, port
        self.cluster_id = cluster_id
        self._replication = ReplicationNotices()

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            METADATA: self.metadata,
            CREATE_TOPICS: self.create_topics,
            DELETE_TOPICS: self.delete_topics,
            CREATE_PARTITIONS: self.create_partitions,
            DESCRIBE_CONFIGS: self.describe_configs,
            INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            DELETE_RECORDS: self.delete_records,
            DESCRIBE_CLUSTER: self.describe_cluster,
        }

    def metadata(self, request: Request) -> Any:
        """The brokers (this agent) and the topics asked for (all when none are named). A named
        topic that does not exist is created, ready at once, when the store's
        ``auto.create.topics.enable`` is true and the request allows it (``allow_auto_topic_creation``,
        v4+; always before v4, as Kafka's broker); otherwise it is UNKNOWN_TOPIC_OR_PARTITION, and a
        name that cannot be created gets the reason's code (INVALID_TOPIC_EXCEPTION)."""
        cls = response_class(METADATA, request.api_version)
        topics = self.store.context.latest_topics()
        wanted = request.body.topics
        by_id = {uuid.UUID(t.topic_id): n for n, t in topics.items()}
        unknown_ids = []  # v10+ may name a topic by its id alone
        names = []
        for asked in () if wanted is None else wanted:
            topic_id = getattr(asked, "topic_id", None)
            if asked.name is None and topic_id is not None and topic_id.int:
                if topic_id in by_id:
                    names.append(by_id[topic_id])
                else:
                    unknown_ids.append(topic_id)
            else:
                names.append(asked.name)
        if wanted is None:
            names = sorted(n for n, t in topics.items() if not t.internal)
        missing = [n for n in names if n not in topics]
        refused: dict[str, BaseException] = {}
        allowed = getattr(request.body, "allow_auto_topic_creation", True)  # no such field before v4
        if missing and allowed and self.store.settings.auto_create_topics_enable:
            for name in missing:
                try:
                    self.store.context.auto_create_topics([name])
                except LakelogError as exc:
                    refused[name] = exc
            topics = self.store.context.latest_topics()
        out = []
        for name in names:
            topic = topics.get(name)
            if topic is None:
                code = error_code(refused[name]) if name in refused else ErrorCode.unknown_topic_or_partition
                out.append({"error_code": code, "name": name, "partitions": []})
                continue
            partitions = [
                {
                    "error_code": ErrorCode.none,
                    "partition_index": p,
                    "leader_id": 0,
                    "leader_epoch": LEADER_EPOCH,
                    "replica_nodes": [0],
                    "isr_nodes": [0],
                    "offline_replicas": [],
                }
                for p in range(topic.partitions)
            ]
            out.append(
                {
                    "error_code": ErrorCode.none,
                    "name": name,
                    "topic_id": uuid.UUID(topic.topic_id),
                    "is_internal": topic.internal,
                    "partitions": partitions,
                }
            )
        host, port = advertised_address(request, (self.host, self.port))
        out += [
            {"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id, "partitions": []}
            for topic_id in unknown_ids
        ]
        return build(
            cls,
            error_code=ErrorCode.none,
            brokers=[{"node_id": 0, "host": host, "port": port}],
            cluster_id=self.cluster_id,
            controller_id=0,
            topics=out,
        )

    def describe_cluster(self, request: Request) -> Any:
        """This agent as the cluster's one broker and its controller (Kafka's
        ``handleDescribeClusterRequest``); asked for the controllers' endpoints (v1+
        ``endpoint_type`` 2) it answers MISMATCHED_ENDPOINT_TYPE, as a broker does. Authorized
        operations, when asked for, are every operation a cluster has: the agent has no authorizer."""
        body = request.body
        endpoint_type = int(getattr(body, "endpoint_type", BROKERS_ENDPOINT))
        answer: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None, "brokers": []}
        if endpoint_type != BROKERS_ENDPOINT:
            answer.update(
                error_code=ErrorCode.mismatched_endpoint_type,
                error_message=f"this broker serves endpoint type {BROKERS_ENDPOINT} (brokers), not {endpoint_type}",
            )
        else:
            host, port = advertised_address(request, (self.host, self.port))
            answer["brokers"] = [{"broker_id": 0, "host": host, "port": port, "rack": None}]
        operations = NOT_REQUESTED
        if body.include_cluster_authorized_operations:
            operations = sum(1 << op for op in CLUSTER_OPERATIONS)
        return build(
            response_class(DESCRIBE_CLUSTER, request.api_version),
            **answer,
            endpoint_type=endpoint_type,
            cluster_id=self.cluster_id,
            controller_id=0,
            cluster_authorized_operations=operations,
        )

    def create_topics(self, request: Request) -> Any:
        """Create each topic (one Delta metadata commit each), or with ``validate_only`` only plan
        it against the latest topics (the same checks, nothing committed). As Kafka's controller
        answers from v5 on (ReplicationControlManager.createTopic), a topic that is (or would
        be) created comes with its effective configuration sorted by name, its partition count,
        replication factor 1 and its id (v7+); a refused one with its error, no configs and -1
        counts. Java's Admin.createTopics reads ``configs`` of every success. Any replication
        factor is accepted (-1, 1, or more with a notice logged once per topic: the store's
        durability replaces replication); 0 and below -1 are INVALID_REPLICATION_FACTOR."""
        out = []
        for topic in request.body.topics:
            answer: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none, "configs": []}
            try:
                factor = int(topic.replication_factor)
                if factor == 0 or factor < -1:
                    answer.update(
                        error_code=ErrorCode.invalid_replication_factor,
                        error_message=f"replication factor must be -1 or at least 1, got {factor}",
                    )
                    out.append(answer)
                    continue
                config = {c.name: c.value for c in topic.configs}
                partitions = None if topic.num_partitions == -1 else int(topic.num_partitions)
                if request.body.validate_only:
                    created = self._planned_topic(topic.name, partitions, config)
                else:
                    created = self.store.create_topic(topic.name, partitions, config or None)
                self._replication.note(topic.name, factor, request.client_id)
                answer.update(
                    topic_id=uuid.UUID(created.topic_id),
                    num_partitions=created.partitions,
                    replication_factor=1,
                    configs=[{k: entry[k] for k in CREATED_CONFIG_FIELDS} for entry in topic_config_entries(created)],
                )
            except Exception as exc:
                answer.update(error_code=error_code(exc), error_message=str(exc))
            out.append(answer)
        return build(response_class(CREATE_TOPICS, request.api_version), topics=out)

    def _planned_topic(self, name: str, partitions: int | None, config: dict[str, Any]) -> TopicMetadata:
        """The topic a CreateTopics with ``validate_only`` would create (as the store's
        create_topic plans it, defaults included), nothing committed; raises as it does."""
        state = self.store.log.latest()
        change = plan_create(
            dict(state.topics),
            dict(state.properties),
            name=name,
            partitions=self.store.settings.num_partitions if partitions is None else partitions,
            config={**self.store.settings.topic, **config},
            now_ms=int(time.time() * 1000),
            client_id="lakelog-serve",
        )
        return topics_from_properties(change.properties)[name]

    def delete_topics(self, request: Request) -> Any:
        responses = [
            {"name": name, **outcome(lambda name=name: self.store.delete_topic(name))}
            for name in request.body.topic_names
        ]
        return build(response_class(DELETE_TOPICS, request.api_version), responses=responses)

    def create_partitions(self, request: Request) -> Any:
        def grow(topic: Any) -> None:
            if topic.assignments:
                raise InvalidPartitionsError("manual replica assignments: every partition lives in the store")
            if not request.body.validate_only:
                self.store.create_partitions(topic.name, int(topic.count))

        results = [{"name": t.name, **outcome(lambda t=t: grow(t))} for t in request.body.topics]
        return build(response_class(CREATE_PARTITIONS, request.api_version), results=results)

    def describe_configs(self, request: Request) -> Any:
        topics = self.store.context.latest_topics()
        results = []
        for resource in request.body.resources:
            answer: dict[str, Any] = {
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
                "error_code": ErrorCode.none,
                "error_message": None,
                "configs": [],
            }
            if resource.resource_type == TOPIC_RESOURCE:
                topic = topics.get(resource.resource_name)
                if topic is None:
                    answer.update(error_code=ErrorCode.unknown_topic_or_partition, error_message="no such topic")
                else:
                    answer["configs"] = topic_config_entries(topic, resource.configuration_keys)
            elif resource.resource_type != BROKER_RESOURCE:
                answer.update(error_code=ErrorCode.invalid_request, error_message="only topic and broker configs")
            results.append(answer)
        return build(response_class(DESCRIBE_CONFIGS, request.api_version), results=results)

    def incremental_alter_configs(self, request: Request) -> Any:
        def alter(resource: Any) -> None:
            if resource.resource_type != TOPIC_RESOURCE:
                raise InvalidConfigError("only topic configs can be altered")
            setting = {c.name: c.value for c in resource.configs if c.config_operation == SET}
            deleting = [c.name for c in resource.configs if c.config_operation == DELETE]
            if len(setting) + len(deleting) != len(resource.configs):
                raise InvalidConfigError("APPEND and SUBTRACT apply to list configs, which topics here do not have")
            if not request.body.validate_only:
                self.store.alter_topic_config(resource.resource_name, setting or None, deleting or None)

        responses = [
            {
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                **outcome(lambda r=r: alter(r)),
            }
            for r in request.body.resources
        ]
        return build(response_class(INCREMENTAL_ALTER_CONFIGS, request.api_version), responses=responses)

    def delete_records(self, request: Request) -> Any:
        """Move each partition's log start offset to the offset asked (-1: the high watermark),
        as Kafka's ``handleDeleteRecordsRequest``: each partition answers its new low watermark,
        or its own error (OFFSET_OUT_OF_RANGE past the high watermark, UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_TOPIC_EXCEPTION for an internal topic) with -1; a partition named twice is
        INVALID_REQUEST, the others are still served."""
        asked = [
            (TopicPartition(topic.name, int(part.partition_index)), int(part.offset))
            for topic in request.body.topics
            for part in topic.partitions
        ]
        named = Counter(tp for tp, _ in asked)
        repeated = {tp for tp, n in named.items() if n > 1}
        offsets = {tp: offset for tp, offset in asked if tp not in repeated}
        try:
            results: dict[TopicPartition, Any] = delete_records(self.store.context, offsets, partial=True)
        except Exception as exc:  # a commit that failed as a whole fails every partition it held
            results = dict.fromkeys(offsets, exc)
        out = []
        for topic in request.body.topics:
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, int(part.partition_index))
                found = results.get(tp)
                if tp in repeated:
                    answer = (ErrorCode.invalid_request, INVALID_LOW_WATERMARK)
                elif isinstance(found, int):
                    answer = (ErrorCode.none, found)
                else:
                    answer = (error_code(found), INVALID_LOW_WATERMARK)  # type: ignore[arg-type]
                parts.append({"partition_index": tp.partition, "error_code": answer[0], "low_watermark": answer[1]})
            out.append({"name": topic.name, "partitions": parts})
        return build(response_class(DELETE_RECORDS, request.api_version), topics=out)
