"""Transactions: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn.

An idempotent producer gets a fresh producer id; a transactional id gets a
lakelog transactional producer held in the agent
(:class:`kafka_endpoint.txn_proxy.TxnProxy`), whose epoch bump fences every
older instance in any agent. The records of its transactional produce
requests and the offsets it sends gather there; EndTxn commits them as one
Delta commit, or drops them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from kio.schema.add_offsets_to_txn.v0.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v0.request import AddPartitionsToTxnRequest
from kio.schema.end_txn.v0.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest
from kio.schema.txn_offset_commit.v0.request import TxnOffsetCommitRequest

from lakelog.engine.errors import LakelogError
from lakelog.engine.groups.offsets_topic import OffsetAndMetadata
from lakelog.engine.produce.batches import BatchMetadata
from lakelog.engine.topics import TopicPartition, require_partition
from lakelog.kafka_endpoint.error_codes import error_code
from lakelog.kafka_endpoint.groups import bad_offset
from lakelog.kafka_endpoint.idempotence import new_producer_id
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.record_batches import ProducedBatch
from lakelog.kafka_endpoint.txn_proxy import TxnProxy, UnknownProducerError
from lakelog.store import Store

log = logging.getLogger(__name__)

INIT_PRODUCER_ID = api_key(InitProducerIdRequest)
ADD_PARTITIONS_TO_TXN = api_key(AddPartitionsToTxnRequest)
ADD_OFFSETS_TO_TXN = api_key(AddOffsetsToTxnRequest)
END_TXN = api_key(EndTxnRequest)
TXN_OFFSET_COMMIT = api_key(TxnOffsetCommitRequest)
VERSIONS: dict[int, tuple[int, int]] = {
    INIT_PRODUCER_ID: (0, 4),
    ADD_PARTITIONS_TO_TXN: (0, 3),
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 3),
    TXN_OFFSET_COMMIT: (0, 3),
}


class TransactionApis:
    """Producer ids and transactions over one store: the current producer of each
    transactional id this agent serves."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._txns: dict[str, TxnProxy] = {}  # transactional id -> its current producer
        self._txn_lock = threading.Lock()

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            INIT_PRODUCER_ID: self.init_producer_id,
            ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            END_TXN: self.end_txn,
            TXN_OFFSET_COMMIT: self.txn_offset_commit,
        }

    def close(self) -> None:
        for txn in list(self._txns.values()):
            txn.close()

    def held(self) -> dict[str, TxnProxy]:
        """The transactional ids whose current producer this agent holds, with it."""
        with self._txn_lock:
            return dict(self._txns)

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
            timeout_ms = int(request.body.transaction_timeout.total_seconds() * 1000)
            proxy = TxnProxy(self.store, transactional_id, timeout_ms)
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

    def send(self, topic: str, partition: int, batches: list[ProducedBatch]) -> BatchMetadata:
        """A transactional produce request's batches for one partition, added to their
        producer's open transaction; their offsets come at EndTxn (-1 until then). Raises
        UnknownProducerError / StaleEpochError for a producer this agent does not hold,
        UnknownTopicOrPartitionError for a partition that does not exist."""
        first = batches[0]
        proxy = next((p for p in self._txns.values() if p.producer_id == first.producer_id), None)
        if proxy is None:
            raise UnknownProducerError(f"producer id {first.producer_id} has no transaction here")
        proxy.check(first.producer_id, first.producer_epoch)
        # Kafka's Produce never creates a topic (its Metadata request does), in a transaction too.
        require_partition(self.store.context.latest_topics(), topic, partition)
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
        topics = self.store.context.latest_topics()
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
        refused = {tp for tp, o in offsets.items() if bad_offset(o.offset)}
        code = ErrorCode.none
        try:
            proxy = self._txn(body.transactional_id, int(body.producer_id), int(body.producer_epoch))
            if len(refused) < len(offsets):
                proxy.send_offsets(
                    body.group_id,
                    int(getattr(body, "generation_id", -1)),
                    getattr(body, "member_id", ""),
                    {tp: o for tp, o in offsets.items() if tp not in refused},
                    getattr(body, "group_instance_id", None),
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
