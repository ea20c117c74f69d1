"""What the endpoint answers, per Kafka API, over one store.

Every write goes through the one commit core: the records of produce
requests arriving together (any connections, any partitions) share one
Delta commit (:mod:`kafka_endpoint.produce_linger`; an idempotent producer's
batch is a commit of its own, :mod:`kafka_endpoint.idempotence`), and the
response is sent only after the Delta commit holding them landed (acks=1
and acks=all mean the same here: the commit is durable when it lands). The agent names itself the leader of every
partition (node 0 at its own address); it keeps no state of its own, so
several agents may serve one store.

Errors are Kafka's codes (``kio.schema.errors.ErrorCode``): an unknown
topic or partition, a record over ``max.message.bytes``, invalid
timestamps, offsets out of range; a store that cannot be read is
KAFKA_STORAGE_ERROR. Nothing is committed for a refused partition.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from kio.schema.errors import ErrorCode

from lakelog.engine.commit import RetryPolicy
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import (
    CommitFailedError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    GroupSubscribedToTopicError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTopicError,
    InvalidTxnStateError,
    LakelogError,
    ProducerFencedError,
    RebalanceInProgressError,
    RecordTooLargeError,
    RetriableError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.groups.offsets_topic import MAX_OFFSET, OffsetAndMetadata
from lakelog.engine.offsets import TopicPartition
from lakelog.engine.produce.placement import columns_for_batch, place_records
from lakelog.engine.records import MAX_TIMESTAMP_MS
from lakelog.engine.topic_changes import plan_create, require_partition
from lakelog.engine.topics import TopicMetadata, topics_from_properties
from lakelog.kafka_endpoint import admin
from lakelog.kafka_endpoint.group_members import ProxyMember, UnknownMemberError, choose_protocol, subscribed_topics
from lakelog.kafka_endpoint.idempotence import (
    DuplicateSequenceError,
    OutOfOrderSequenceError,
    SequencedBatch,
    app_id,
    new_producer_id,
)
from lakelog.kafka_endpoint.messages import Request, build, response_class
from lakelog.kafka_endpoint.produce_linger import GroupCommit
from lakelog.kafka_endpoint.record_batches import InvalidRecordBatchError, decode_batches, encode_batch
from lakelog.kafka_endpoint.txn_proxy import StaleEpochError, TxnProxy, UnknownProducerError

log = logging.getLogger(__name__)

API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS = 18, 3, 0, 1, 2, 19
FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, INIT_PRODUCER_ID = 10, 8, 9, 22
JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 11, 14, 12, 13
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
# Rows read back from a partition's end to find the offsets a duplicate batch got the first time
# (a broker remembers its producers' last five batches; older duplicates are answered as Kafka
# answers them, DUPLICATE_SEQUENCE_NUMBER).
DUPLICATE_WINDOW = 100_000

# The versions this endpoint parses and answers, per API key (ApiVersions tells clients).
# Produce from v3 and Fetch from v4: record batches v2. Fetch stops before v13 (topic ids).
SUPPORTED: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 3),
    METADATA: (1, 12),
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 7),
    CREATE_TOPICS: (2, 7),
    FIND_COORDINATOR: (0, 4),
    # Offsets of members (a generation) and of consumers that assign() their partitions
    # (Kafka's "simple" consumer groups: generation -1).
    OFFSET_COMMIT: (2, 8),
    OFFSET_FETCH: (1, 7),
    INIT_PRODUCER_ID: (0, 4),
    JOIN_GROUP: (2, 7),
    SYNC_GROUP: (1, 5),
    HEARTBEAT: (1, 4),
    LEAVE_GROUP: (1, 4),
    ADD_PARTITIONS_TO_TXN: (0, 3),
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 3),
    TXN_OFFSET_COMMIT: (0, 3),
    **admin.VERSIONS,
}

EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# ListOffsets v7+ (KIP-734): the record with the largest timestamp.
MAX_TIMESTAMP = -3
RETRY_POLICY = RetryPolicy(retries=20, backoff_ms=10, backoff_max_ms=200, timeout_ms=30_000)
# How long a Fetch with nothing to return waits between looks at the log.
FETCH_POLL_S = 0.02


# lakelog's errors as Kafka's codes, most specific first.
ERROR_CODES: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (UnknownTopicOrPartitionError, ErrorCode.unknown_topic_or_partition),
    (RecordTooLargeError, ErrorCode.message_too_large),
    (InvalidRecordBatchError, ErrorCode.corrupt_message),
    (InvalidRecordError, ErrorCode.invalid_record),
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (TopicExistsError, ErrorCode.topic_already_exists),
    (InvalidPartitionsError, ErrorCode.invalid_partitions),
    (InvalidConfigError, ErrorCode.invalid_config),
    (GroupNotEmptyError, ErrorCode.non_empty_group),
    (GroupIdNotFoundError, ErrorCode.group_id_not_found),
    (GroupSubscribedToTopicError, ErrorCode.group_subscribed_to_topic),
    (CommitFailedError, ErrorCode.illegal_generation),
    (OutOfOrderSequenceError, ErrorCode.out_of_order_sequence_number),
    (UnknownProducerError, ErrorCode.invalid_producer_id_mapping),
    (StaleEpochError, ErrorCode.invalid_producer_epoch),
    (ProducerFencedError, ErrorCode.producer_fenced),
    (InvalidTxnStateError, ErrorCode.invalid_txn_state),
    (RebalanceInProgressError, ErrorCode.rebalance_in_progress),
    (RetriableError, ErrorCode.request_timed_out),
    (LakelogError, ErrorCode.kafka_storage_error),
)


def _bad_offset(offset: int) -> bool:
    """Whether an offset a client asks to commit is one no log holds (a negative one: the wire's
    int64 carries no larger than Kafka's longest). Kafka's Java client refuses those itself
    (OffsetAndMetadata: "Invalid negative offset"); a client that sends one anyway gets
    INVALID_COMMIT_OFFSET_SIZE for that partition, which Kafka's consumers raise rather than retry
    (ConsumerCoordinator), and nothing is committed for it."""
    return not 0 <= int(offset) <= MAX_OFFSET


def error_code(exc: BaseException) -> ErrorCode:
    """Kafka's error code for a lakelog failure (UNKNOWN_SERVER_ERROR for anything else)."""
    return next((code for kind, code in ERROR_CODES if isinstance(exc, kind)), ErrorCode.unknown_server_error)


@dataclass(frozen=True)
class _Done:
    """A partition's records already committed (or refused) while the request was read."""

    metadata: Any


@dataclass
class Endpoint:
    """The store behind one agent: its address (advertised as node 0) and what it answers."""

    store: Any  # store.Store
    host: str
    port: int
    cluster_id: str = "lakelog"
    # Produce requests arriving within this long of each other share one Delta commit.
    linger_ms: float = 5.0

    def __post_init__(self) -> None:
        self._group_commit = GroupCommit(self.store._new_writer("lakelog-serve"), RETRY_POLICY, self.linger_ms)
        self._reader = PartitionReader(self.store.uri)
        self._groups: dict[str, Any] = {}  # group id -> a lakelog consumer that commits for it
        self._members: dict[tuple[str, str], ProxyMember] = {}  # (group, member id) -> its proxy
        self._txns: dict[str, TxnProxy] = {}  # transactional id -> its current producer
        self._txn_lock = threading.Lock()
        self._writer = self.store._new_writer("lakelog-serve-idempotent")
        self._groups_lock = threading.Lock()

    def close(self) -> None:
        self._group_commit.close()
        for consumer in self._groups.values():
            consumer.close(autocommit=False)
        for member in list(self._members.values()):
            member.leave()
        for txn in list(self._txns.values()):
            txn.close()

    def handle(self, request: Request, stopping: Callable[[], bool] = lambda: False) -> Any | None:
        """The response body for ``request``; None when none is sent (Produce with acks=0)."""
        handler = {
            API_VERSIONS: self.api_versions,
            METADATA: self.metadata,
            PRODUCE: self.produce,
            FETCH: lambda r: self.fetch(r, stopping),
            LIST_OFFSETS: self.list_offsets,
            CREATE_TOPICS: self.create_topics,
            FIND_COORDINATOR: self.find_coordinator,
            OFFSET_COMMIT: self.offset_commit,
            OFFSET_FETCH: self.offset_fetch,
            INIT_PRODUCER_ID: self.init_producer_id,
            ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            END_TXN: self.end_txn,
            TXN_OFFSET_COMMIT: self.txn_offset_commit,
            JOIN_GROUP: self.join_group,
            SYNC_GROUP: self.sync_group,
            HEARTBEAT: self.heartbeat,
            LEAVE_GROUP: self.leave_group,
            admin.DELETE_TOPICS: lambda r: admin.delete_topics(self.store, r, error_code),
            admin.CREATE_PARTITIONS: lambda r: admin.create_partitions(self.store, r, error_code),
            admin.DESCRIBE_CONFIGS: lambda r: admin.describe_configs(self.store, r, error_code),
            admin.INCREMENTAL_ALTER_CONFIGS: lambda r: admin.incremental_alter_configs(self.store, r, error_code),
            admin.LIST_GROUPS: lambda r: admin.list_consumer_groups(self.store, r),
            admin.DESCRIBE_GROUPS: lambda r: admin.describe_consumer_groups(self.store, r),
            admin.DELETE_GROUPS: lambda r: admin.delete_consumer_groups(self.store, r, error_code),
            admin.OFFSET_DELETE: lambda r: admin.delete_consumer_group_offsets(self.store, r, error_code),
        }[request.api_key]
        return handler(request)

    # -- ApiVersions, Metadata ---------------------------------------------------------

    def api_versions(self, request: Request) -> Any:
        cls = response_class(API_VERSIONS, request.api_version)
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(SUPPORTED.items())]
        return build(cls, error_code=ErrorCode.none, api_keys=keys)

    def metadata(self, request: Request) -> Any:
        """The brokers (this agent) and the topics asked for (all when none are named). A named
        topic that does not exist is created, ready at once, when the store's
        ``auto.create.topics.enable`` is true and the request allows it (``allow_auto_topic_creation``,
        v4+; always before v4, as Kafka's broker); otherwise it is UNKNOWN_TOPIC_OR_PARTITION, and a
        name that cannot be created gets the reason's code (INVALID_TOPIC_EXCEPTION)."""
        cls = response_class(METADATA, request.api_version)
        topics = self.store._latest_topics()
        wanted = request.body.topics
        names = sorted(n for n, t in topics.items() if not t.internal) if wanted is None else [t.name for t in wanted]
        missing = [n for n in names if n not in topics]
        refused: dict[str, BaseException] = {}
        allowed = getattr(request.body, "allow_auto_topic_creation", True)  # no such field before v4
        if missing and allowed and self.store.settings.auto_create_topics_enable:
            for name in missing:
                try:
                    self.store._auto_create_topics([name])
                except LakelogError as exc:
                    refused[name] = exc
            topics = self.store._latest_topics()
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
                    "leader_epoch": -1,
                    "replica_nodes": [0],
                    "isr_nodes": [0],
                    "offline_replicas": [],
                }
                for p in range(topic.partitions)
            ]
            out.append(
                {"error_code": ErrorCode.none, "name": name, "is_internal": topic.internal, "partitions": partitions}
            )
        return build(
            cls,
            brokers=[{"node_id": 0, "host": self.host, "port": self.port}],
            cluster_id=self.cluster_id,
            controller_id=0,
            topics=out,
        )

    # -- Produce -------------------------------------------------------------------

    def produce(self, request: Request) -> Any | None:
        """The records committed; the answer after every commit holding them landed."""
        return self.start_produce(request)()

    def start_produce(self, request: Request) -> Callable[[], Any | None]:
        """Decode and check the request's records and hand them to the group commit (in
        the order requests arrive: a connection's requests commit in its order); returns
        what waits for the commits and builds the response. An idempotent producer's
        batches are committed here, before the next request of the connection is read."""
        body = request.body
        pending = []
        for topic in body.topic_data:
            for part in topic.partition_data:
                pending.append((topic.name, part.index, self._send(topic.name, part.index, part.records)))
        return lambda: self._produce_response(request, pending)

    def _produce_response(self, request: Request, pending: list[tuple[str, int, Any]]) -> Any | None:
        body = request.body
        results: dict[str, list[dict]] = {}
        for name, index, sent in pending:
            try:
                if isinstance(sent, BaseException):
                    raise sent
                future = sent.metadata if isinstance(sent, _Done) else sent.result()
                base = int(future.offsets[0]) if len(future) else -1
                answer = {"index": index, "error_code": ErrorCode.none, "base_offset": base}
            except DuplicateSequenceError as exc:  # committed before, its offsets no longer known
                answer = {"index": index, "error_code": ErrorCode.duplicate_sequence_number, "base_offset": -1}
                answer["error_message"] = str(exc)
            except Exception as exc:
                if not isinstance(exc, LakelogError | InvalidRecordBatchError):
                    log.exception("produce to %s-%s failed", name, index)
                answer = {"index": index, "error_code": error_code(exc), "base_offset": -1, "error_message": str(exc)}
            answer.update(log_append_time_ms=-1, log_start_offset=-1)
            results.setdefault(name, []).append(answer)
        if body.acks == 0:
            return None
        cls = response_class(PRODUCE, request.api_version)
        responses = [{"name": n, "partition_responses": parts} for n, parts in results.items()]
        return build(cls, responses=responses)

    def _send(self, topic: str, partition: int, records: bytes | None) -> Any:
        try:
            batches = decode_batches(records)
            if batches and batches[0].transactional:
                return _Done(self._send_transactional(topic, partition, batches))
            if batches and batches[0].producer_id >= 0:
                return _Done(self._send_sequenced(topic, partition, batches))
            keys = [k for b in batches for k in b.keys]
            values = [v for b in batches for v in b.values]
            stamps = [t for b in batches for t in b.timestamps]
            headers = [
                None if hs is None else [{"key": k, "value": v} for k, v in hs] for b in batches for hs in b.headers
            ]
            if not values:
                raise InvalidRecordBatchError("a produce request without records")
            table = columns_for_batch(topic, values, keys, partition, headers, stamps)
            place_records(self.store.log.latest(), [table])  # refused here, alone, not in the group
            return self._group_commit.submit(table)
        except (LakelogError, InvalidRecordBatchError) as exc:
            return exc

    def _send_sequenced(self, topic: str, partition: int, batches: list[Any]) -> Any:
        """An idempotent producer's batches for one partition, committed at most once (see
        :mod:`kafka_endpoint.idempotence`); a duplicate gets the offsets of its first commit."""
        from lakelog.engine.produce.batches import BatchMetadata

        first = batches[0]
        count = sum(len(b) for b in batches)
        expected = first.base_sequence
        for b in batches:
            if (b.producer_id, b.producer_epoch, b.base_sequence) != (
                first.producer_id,
                first.producer_epoch,
                expected,
            ):
                raise InvalidRecordBatchError("the batches of one partition must continue one producer's sequence")
            expected += len(b)
        state = self.store.log.latest()
        meta = require_partition(state.topics, topic, partition)
        table = columns_for_batch(
            topic,
            [v for b in batches for v in b.values],
            [k for b in batches for k in b.keys],
            partition,
            [None if hs is None else [{"key": k, "value": v} for k, v in hs] for b in batches for hs in b.headers],
            [t for b in batches for t in b.timestamps],
        )
        placed = place_records(state, [table])
        batch = SequencedBatch(
            placed,
            first.producer_id,
            first.producer_epoch,
            first.base_sequence,
            app_id(first.producer_id, meta.topic_id, partition),
        )
        tp = TopicPartition(topic, partition)
        try:
            result = self._writer.append(batch, RETRY_POLICY)
            start = result.ranges[tp].start
        except DuplicateSequenceError:
            start = self._first_commit_of(tp, first.producer_id, first.base_sequence)
            if start is None:
                raise
        return BatchMetadata(topic, np.full(count, partition), np.arange(start, start + count))

    def _first_commit_of(self, tp: TopicPartition, producer_id: int, sequence: int) -> int | None:
        """The offset of the record ``producer_id`` sent with ``sequence`` to ``tp``, if it
        is among the partition's last DUPLICATE_WINDOW records."""
        import pyarrow.compute as pc

        state = self.store.log.latest()
        files = state.files_of(tp)
        bounds = self._reader.bounds(state, tp)
        rows = self._reader.read(files, tp, max(bounds.start, bounds.end - DUPLICATE_WINDOW))
        mine = rows.filter(
            pc.and_(pc.equal(rows.column("producer_id"), producer_id), pc.equal(rows.column("sequence"), sequence))
        )
        return int(mine.column("offset")[0].as_py()) if mine.num_rows else None

    def init_producer_id(self, request: Request) -> Any:
        """A new producer id, epoch 0, for an idempotent producer (also when a producer asks
        to bump its epoch: a new id starts its sequences over, as the client then does); for a
        transactional id, its producer's id and a new epoch that fences the older ones
        (:mod:`kafka_endpoint.txn_proxy`)."""
        cls = response_class(INIT_PRODUCER_ID, request.api_version)
        transactional_id = request.body.transactional_id
        if transactional_id is None:
            return build(cls, error_code=ErrorCode.none, producer_id=new_producer_id(), producer_epoch=0)
        try:
            proxy = TxnProxy(self.store, transactional_id)
        except Exception as exc:
            return build(cls, error_code=error_code(exc), producer_id=-1, producer_epoch=-1)
        with self._txn_lock:
            older = self._txns.get(transactional_id)
            self._txns[transactional_id] = proxy
        if older is not None:
            older.close()
        return build(cls, error_code=ErrorCode.none, producer_id=proxy.producer_id, producer_epoch=proxy.epoch)

    def _txn(self, transactional_id: str, producer_id: int, epoch: int) -> TxnProxy:
        proxy = self._txns.get(transactional_id)
        if proxy is None:
            raise UnknownProducerError(f"transactional id {transactional_id!r} has no producer here: init first")
        proxy.check(producer_id, epoch)
        return proxy

    def _send_transactional(self, topic: str, partition: int, batches: list[Any]) -> Any:
        from lakelog.engine.produce.batches import BatchMetadata

        first = batches[0]
        proxy = next((p for p in self._txns.values() if p.producer_id == first.producer_id), None)
        if proxy is None:
            raise UnknownProducerError(f"producer id {first.producer_id} has no transaction here")
        proxy.check(first.producer_id, first.producer_epoch)
        # Kafka's Produce never creates a topic (its Metadata request does), in a transaction too.
        require_partition(self.store._latest_topics(), topic, partition)
        proxy.send(topic, partition, batches)
        count = sum(len(b) for b in batches)
        return BatchMetadata(topic, np.full(count, partition), np.full(count, -1))  # offsets come at EndTxn

    def add_partitions_to_txn(self, request: Request) -> Any:
        body = request.body
        cls = response_class(ADD_PARTITIONS_TO_TXN, request.api_version)
        try:
            proxy = self._txn(
                body.v3_and_below_transactional_id,
                int(body.v3_and_below_producer_id),
                int(body.v3_and_below_producer_epoch),
            )
            proxy.add()
            code = ErrorCode.none
        except Exception as exc:
            code = error_code(exc)
        topics = self.store._latest_topics()
        results = []
        for topic in body.v3_and_below_topics:
            meta = topics.get(topic.name)
            parts = [
                {
                    "partition_index": p,
                    "partition_error_code": code
                    if meta is not None and 0 <= p < meta.partitions
                    else ErrorCode.unknown_topic_or_partition,
                }
                for p in topic.partitions
            ]
            results.append({"name": topic.name, "results_by_partition": parts})
        return build(cls, results_by_topic_v3_and_below=results)

    def add_offsets_to_txn(self, request: Request) -> Any:
        body = request.body
        try:
            self._txn(body.transactional_id, int(body.producer_id), int(body.producer_epoch)).add()
            code = ErrorCode.none
        except Exception as exc:
            code = error_code(exc)
        return build(response_class(ADD_OFFSETS_TO_TXN, request.api_version), error_code=code)

    def txn_offset_commit(self, request: Request) -> Any:
        body = request.body
        offsets = {
            TopicPartition(t.name, p.partition_index): OffsetAndMetadata(
                int(p.committed_offset), p.committed_metadata or ""
            )
            for t in body.topics
            for p in t.partitions
        }
        refused = {tp for tp, o in offsets.items() if _bad_offset(o.offset)}
        code = ErrorCode.none
        try:
            proxy = self._txn(body.transactional_id, int(body.producer_id), int(body.producer_epoch))
            if len(refused) < len(offsets):
                proxy.send_offsets(
                    body.group_id,
                    int(getattr(body, "generation_id", -1)),
                    getattr(body, "member_id", ""),
                    {tp: o for tp, o in offsets.items() if tp not in refused},
                )
        except Exception as exc:
            if not isinstance(exc, LakelogError | LookupError):
                log.exception("TxnOffsetCommit of %s failed", body.transactional_id)
            code = error_code(exc)
        out: dict[str, list[dict]] = {}
        for tp in offsets:
            answer = ErrorCode.invalid_commit_offset_size if tp in refused else code
            out.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": answer})
        topics = [{"name": n, "partitions": parts} for n, parts in out.items()]
        return build(response_class(TXN_OFFSET_COMMIT, request.api_version), topics=topics)

    def end_txn(self, request: Request) -> Any:
        """Commit the transaction's records and offsets as one Delta commit, or drop them."""
        body = request.body
        try:
            self._txn(body.transactional_id, int(body.producer_id), int(body.producer_epoch)).end(bool(body.committed))
            code = ErrorCode.none
        except Exception as exc:
            if not isinstance(exc, LakelogError | LookupError):
                log.exception("EndTxn of %s failed", body.transactional_id)
            code = error_code(exc)
        return build(response_class(END_TXN, request.api_version), error_code=code)

    # -- Fetch, ListOffsets ----------------------------------------------------------

    def fetch(self, request: Request, stopping: Callable[[], bool]) -> Any:
        """Records from each asked offset, re-encoded as one v2 batch per partition; with
        nothing to return, waits up to max_wait_ms for records to land (long polling)."""
        body = request.body
        deadline = time.monotonic() + max(0, int(body.max_wait.total_seconds() * 1000)) / 1000
        while True:
            responses, total = self._fetch_once(body)
            if total >= max(1, body.min_bytes) or time.monotonic() >= deadline or stopping():
                break
            time.sleep(FETCH_POLL_S)
        cls = response_class(FETCH, request.api_version)
        return build(cls, error_code=ErrorCode.none, session_id=0, responses=responses)

    def _fetch_once(self, body: Any) -> tuple[list[dict], int]:
        state = self.store.log.latest()
        budget = body.max_bytes
        responses, total = [], 0
        for topic in body.topics:
            meta = state.topics.get(topic.topic)
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                # An empty record set, never a null one: clients read its size first.
                answer: dict[str, Any] = {
                    "partition_index": part.partition,
                    "aborted_transactions": None,
                    "records": b"",
                }
                if meta is None or not 0 <= part.partition < meta.partitions:
                    answer.update(error_code=ErrorCode.unknown_topic_or_partition, high_watermark=-1)
                    parts.append(answer)
                    continue
                bounds = self._reader.bounds(state, tp)
                answer.update(high_watermark=bounds.end, last_stable_offset=bounds.end, log_start_offset=bounds.start)
                if not bounds.start <= part.fetch_offset <= bounds.end:
                    answer.update(error_code=ErrorCode.offset_out_of_range)
                elif part.fetch_offset == bounds.end or budget <= 0:
                    answer.update(error_code=ErrorCode.none)
                else:
                    limit = min(part.partition_max_bytes, budget)
                    rows = self._reader.read(
                        state.files_of(tp), tp, part.fetch_offset, bounds.end, max_records=_rows_for(limit)
                    )
                    rows = _within_bytes(rows, limit)
                    data = encode_batch(rows)
                    budget -= len(data)
                    total += len(data)
                    answer.update(error_code=ErrorCode.none, records=data)
                parts.append(answer)
            responses.append({"topic": topic.topic, "partitions": parts})
        return responses, total

    def list_offsets(self, request: Request) -> Any:
        state = self.store.log.latest()
        out = []
        for topic in request.body.topics:
            meta = state.topics.get(topic.name)
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                answer: dict[str, Any] = {"partition_index": part.partition_index, "timestamp": -1, "offset": -1}
                if meta is None or not 0 <= part.partition_index < meta.partitions:
                    answer["error_code"] = ErrorCode.unknown_topic_or_partition
                    parts.append(answer)
                    continue
                bounds = self._reader.bounds(state, tp)
                stamp = int(part.timestamp)
                if stamp == EARLIEST_TIMESTAMP:
                    answer["offset"] = bounds.start
                elif stamp == LATEST_TIMESTAMP:
                    answer["offset"] = bounds.end
                elif stamp == MAX_TIMESTAMP:
                    found = self._reader.max_timestamp(state.files_of(tp), tp)
                    if found is not None:
                        answer["offset"], answer["timestamp"] = found
                elif stamp <= MAX_TIMESTAMP_MS:
                    found = self._reader.first_at(state.files_of(tp), tp, stamp)
                    if found is not None:
                        answer["offset"], answer["timestamp"] = found
                # A later time than any record can carry finds none: Kafka answers -1 then too.
                answer["error_code"] = ErrorCode.none
                parts.append(answer)
            out.append({"name": topic.name, "partitions": parts})
        return build(response_class(LIST_OFFSETS, request.api_version), topics=out)

    # -- CreateTopics ------------------------------------------------------------------

    def create_topics(self, request: Request) -> Any:
        """Create each topic (one Delta metadata commit each), or with ``validate_only`` only plan
        it against the latest topics (the same checks, nothing committed). As Kafka's controller
        answers from v5 on (ReplicationControlManager.createTopic), a topic that is (or would
        be) created comes with its effective configuration sorted by name, its partition count,
        replication factor 1 and its id (v7+); a refused one with its error, no configs and -1
        counts. Java's Admin.createTopics reads ``configs`` of every success."""
        out = []
        for topic in request.body.topics:
            answer: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none, "configs": []}
            try:
                if topic.replication_factor not in (-1, 1) and topic.replication_factor < 1:
                    raise InvalidTopicError(f"replication factor {topic.replication_factor}")
                config = {c.name: c.value for c in topic.configs}
                partitions = None if topic.num_partitions == -1 else int(topic.num_partitions)
                if request.body.validate_only:
                    created = self._planned_topic(topic.name, partitions, config)
                else:
                    created = self.store.create_topic(topic.name, partitions, config or None)
                answer.update(
                    topic_id=uuid.UUID(created.topic_id),
                    num_partitions=created.partitions,
                    replication_factor=1,
                    configs=admin.topic_config_entries(created),
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

    # -- FindCoordinator, OffsetCommit, OffsetFetch ----------------------------------------

    def find_coordinator(self, request: Request) -> Any:
        """This agent coordinates every group (groups live in the store, not in an agent)."""
        me = {"node_id": 0, "host": self.host, "port": self.port, "error_code": ErrorCode.none}
        cls = response_class(FIND_COORDINATOR, request.api_version)
        if request.api_version >= 4:
            return build(cls, coordinators=[{"key": key, **me} for key in request.body.coordinator_keys])
        return build(cls, **me)

    def _group(self, group_id: str) -> Any:
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
        topics = self.store._latest_topics()
        answers: dict[tuple[str, int], ErrorCode] = {}
        chosen = {}
        for topic in body.topics:
            for part in topic.partitions:
                meta = topics.get(topic.name)
                if meta is None or not 0 <= part.partition_index < meta.partitions:
                    answers[(topic.name, part.partition_index)] = ErrorCode.unknown_topic_or_partition
                elif _bad_offset(part.committed_offset):
                    answers[(topic.name, part.partition_index)] = ErrorCode.invalid_commit_offset_size
                else:
                    tp = TopicPartition(topic.name, part.partition_index)
                    chosen[tp] = OffsetAndMetadata(int(part.committed_offset), part.committed_metadata or "")
        code = ErrorCode.none
        generation = int(body.generation_id_or_member_epoch)
        member = self._members.get((body.group_id, body.member_id)) if generation >= 0 else None
        if generation >= 0 and member is None:
            code = ErrorCode.unknown_member_id
        elif member is not None and generation != member.generation:
            code = ErrorCode.illegal_generation
        elif chosen:
            try:
                committer = member.consumer if member is not None else self._group(body.group_id)
                committer.commit(chosen)
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
        """Join (or rejoin) lakelog's group through a proxy member; every client is a follower."""
        body = request.body
        cls = response_class(JOIN_GROUP, request.api_version)
        offered = {p.name: p.metadata for p in body.protocols}
        protocol = choose_protocol(list(offered)) if body.protocol_type == "consumer" else None
        if protocol is None:
            return build(
                cls, error_code=ErrorCode.inconsistent_group_protocol, generation_id=-1, member_id="", leader=""
            )
        key = (body.group_id, body.member_id)
        member = self._members.get(key)
        if body.member_id and member is None:
            return build(cls, error_code=ErrorCode.unknown_member_id, generation_id=-1, member_id="", leader="")
        try:
            if member is None:
                member = ProxyMember(
                    self.store,
                    body.group_id,
                    request.client_id or "",
                    subscribed_topics(offered[protocol]),
                    protocol,
                    int(body.session_timeout.total_seconds() * 1000),
                    int(getattr(body, "rebalance_timeout", body.session_timeout).total_seconds() * 1000),
                    getattr(body, "group_instance_id", None),
                )
            member.join()
            self._members[(body.group_id, member.member_id)] = member
            for stale in [k for k, m in self._members.items() if m.gone]:  # clients that went silent
                self._members.pop(stale, None)
        except UnknownMemberError:
            self._members.pop(key, None)
            return build(cls, error_code=ErrorCode.unknown_member_id, generation_id=-1, member_id="", leader="")
        return build(
            cls,
            error_code=ErrorCode.none,
            generation_id=member.generation,
            protocol_type="consumer",
            protocol_name=protocol,
            leader="lakelog-coordinator",  # not any client: the group's assignor runs in lakelog
            member_id=member.member_id,
            members=[],
        )

    def sync_group(self, request: Request) -> Any:
        body = request.body
        cls = response_class(SYNC_GROUP, request.api_version)
        member = self._members.get((body.group_id, body.member_id))
        if member is None:
            return build(cls, error_code=ErrorCode.unknown_member_id, assignment=b"")
        if int(body.generation_id) != member.generation:
            return build(cls, error_code=ErrorCode.illegal_generation, assignment=b"")
        return build(
            cls,
            error_code=ErrorCode.none,
            protocol_type="consumer",
            protocol_name=member.protocol,
            assignment=admin.encode_assignment(member.assignment()),
        )

    def heartbeat(self, request: Request) -> Any:
        body = request.body
        cls = response_class(HEARTBEAT, request.api_version)
        member = self._members.get((body.group_id, body.member_id))
        if member is None:
            return build(cls, error_code=ErrorCode.unknown_member_id)
        if int(body.generation_id) != member.generation:
            return build(cls, error_code=ErrorCode.illegal_generation)
        try:
            rejoin = member.heartbeat()
        except UnknownMemberError:
            self._members.pop((body.group_id, body.member_id), None)
            return build(cls, error_code=ErrorCode.unknown_member_id)
        return build(cls, error_code=ErrorCode.rebalance_in_progress if rejoin else ErrorCode.none)

    def leave_group(self, request: Request) -> Any:
        body = request.body
        ids = [m.member_id for m in body.members] if hasattr(body, "members") else [body.member_id]
        answers = []
        for member_id in ids:
            member = self._members.pop((body.group_id, member_id), None)
            if member is not None:
                member.leave()
            code = ErrorCode.none if member is not None else ErrorCode.unknown_member_id
            answers.append({"member_id": member_id, "group_instance_id": None, "error_code": code})
        cls = response_class(LEAVE_GROUP, request.api_version)
        return build(cls, error_code=ErrorCode.none, members=answers)


def _rows_for(max_bytes: int) -> int:
    # Rows to read for a fetch of max_bytes: records of ~100 bytes, at least one.
    return max(1, min(100_000, max_bytes // 64))


def _within_bytes(rows: Any, max_bytes: int) -> Any:
    """The longest prefix of ``rows`` whose keys and values fit ``max_bytes`` (at least one
    row, as Kafka returns a first record larger than the limit so a consumer is never stuck)."""
    if rows.num_rows <= 1:
        return rows
    import pyarrow.compute as pc

    sizes = pc.add(
        pc.binary_length(rows.column("key")).fill_null(0), pc.binary_length(rows.column("value")).fill_null(0)
    )
    running = pc.cumulative_sum(pc.add(sizes, 20)).to_numpy()
    keep = max(1, int((running <= max_bytes).sum()))
    return rows.slice(0, keep)
