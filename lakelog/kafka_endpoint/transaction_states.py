"""What ``kafka-transactions`` asks: ListTransactions, DescribeTransactions, DescribeProducers.

Answered from what the store holds (:mod:`transactions.states`: each transactional id's
producer id, epoch and whether its epoch committed a transaction; :mod:`engine.admin.producers`:
the producers recently active on a partition, from the producer columns of its rows), as
Kafka's ``KafkaApis.handleListTransactionsRequest`` / ``handleDescribeTransactionsRequest`` /
``handleDescribeProducersRequest`` answer from the transaction coordinator and the partition
leaders' producer state. A transaction is one Delta commit made at EndTxn, so the store never
holds an open one: a transactional id whose producer this agent holds with a transaction open
is ``Ongoing`` here (with its start time, timeout and partitions); any other agent reports the
store's state. Transactions are never open in the table, so no producer has a
``current_txn_start_offset`` and no coordinator epoch (-1, as Kafka reports a producer without
transaction markers).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v0.request import ListTransactionsRequest

from lakelog.engine.admin.producers import active_producers
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.error_codes import error_code
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.txn_proxy import TxnProxy
from lakelog.store import Store
from lakelog.transactions.states import (
    TransactionalIdState,
    describe_transactional_id,
    list_transactional_ids,
)

LIST_TRANSACTIONS = api_key(ListTransactionsRequest)
DESCRIBE_TRANSACTIONS = api_key(DescribeTransactionsRequest)
DESCRIBE_PRODUCERS = api_key(DescribeProducersRequest)
# ListTransactions v2 adds a transactional id pattern (KIP-1152), not served yet.
VERSIONS: dict[int, tuple[int, int]] = {
    LIST_TRANSACTIONS: (0, 1),
    DESCRIBE_TRANSACTIONS: (0, 0),
    DESCRIBE_PRODUCERS: (0, 0),
}

ONGOING = "Ongoing"
# Kafka's TransactionState names (ListTransactions' state filters are checked against them).
KAFKA_STATES = frozenset(
    {
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    }
)
# Kafka's epoch is an int16; lakelog's grows per init (the agent hands clients the same fold).
_EPOCH_RANGE = 32_767


def _epoch(epoch: int) -> int:
    return epoch % _EPOCH_RANGE


def _time(ms: int) -> dt.datetime:
    # -1 is Kafka's "none"; kio writes any aware datetime as its epoch milliseconds.
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


class TransactionStateApis:
    """ListTransactions, DescribeTransactions and DescribeProducers over one store; ``held``
    gives the transactional ids whose producer this agent holds."""

    def __init__(self, store: Store, held: Callable[[], Mapping[str, TxnProxy]]) -> None:
        self.store = store
        self._held = held

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            LIST_TRANSACTIONS: self.list_transactions,
            DESCRIBE_TRANSACTIONS: self.describe_transactions,
            DESCRIBE_PRODUCERS: self.describe_producers,
        }

    def _open(self, transactional_id: str) -> tuple[TxnProxy, list[TopicPartition]] | None:
        proxy = self._held().get(transactional_id)
        if proxy is None:
            return None
        partitions = proxy.open_partitions()
        return None if partitions is None else (proxy, partitions)

    def _kafka_state(self, found: TransactionalIdState) -> str:
        return ONGOING if self._open(found.transactional_id) is not None else found.state

    def list_transactions(self, request: Request) -> Any:
        """Every transactional id the store holds, filtered as Kafka filters: by state (an
        unknown state name is echoed in ``unknown_state_filters``), by producer id, and (v1) by
        how long the transaction has been open (a transaction not open counts from -1)."""
        body = request.body
        wanted_states = set(body.state_filters)
        producers = {int(p) for p in body.producer_id_filters}
        duration = int(getattr(body, "duration_filter", -1))
        now = int(time.time() * 1000)
        out = []
        for found in list_transactional_ids(self.store.context):
            state = self._kafka_state(found)
            opened = self._open(found.transactional_id)
            started = opened[0].started_ms if opened is not None else -1
            if wanted_states and state not in wanted_states:
                continue
            if producers and found.producer_id not in producers:
                continue
            if duration >= 0 and now - started < duration:
                continue
            out.append(
                {
                    "transactional_id": found.transactional_id,
                    "producer_id": found.producer_id,
                    "transaction_state": state,
                }
            )
        return build(
            response_class(LIST_TRANSACTIONS, request.api_version),
            error_code=ErrorCode.none,
            unknown_state_filters=sorted(wanted_states - KAFKA_STATES),
            transaction_states=out,
        )

    def describe_transactions(self, request: Request) -> Any:
        """Each transactional id's state, producer id and epoch; with a transaction open in this
        agent its start time, the client's timeout and its partitions. An id the store does
        not hold is TRANSACTIONAL_ID_NOT_FOUND."""
        out = []
        for transactional_id in request.body.transactional_ids:
            answer: dict[str, Any] = {
                "transactional_id": transactional_id,
                "transaction_state": "",
                "transaction_timeout": 0,
                "transaction_start_time": _time(-1),
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
            try:
                found = describe_transactional_id(self.store.context, transactional_id)
            except Exception as exc:
                out.append({**answer, "error_code": error_code(exc)})
                continue
            if found is None:
                out.append({**answer, "error_code": ErrorCode.transactional_id_not_found})
                continue
            proxy = self._held().get(transactional_id)
            opened = self._open(transactional_id)
            topics: dict[str, list[int]] = {}
            for tp in opened[1] if opened is not None else []:
                topics.setdefault(tp.topic, []).append(tp.partition)
            answer.update(
                error_code=ErrorCode.none,
                transaction_state=self._kafka_state(found),
                transaction_timeout=max(proxy.timeout_ms, 0) if proxy is not None else 0,
                transaction_start_time=_time(opened[0].started_ms if opened is not None else -1),
                producer_id=found.producer_id,
                producer_epoch=_epoch(found.epoch),
                topics=[{"topic": t, "partitions": ps} for t, ps in sorted(topics.items())],
            )
            out.append(answer)
        return build(response_class(DESCRIBE_TRANSACTIONS, request.api_version), transaction_states=out)

    def describe_producers(self, request: Request) -> Any:
        """Per partition asked, the producers with records committed there within Kafka's
        ``producer.id.expiration.ms`` (a day): id, epoch, last sequence and timestamp."""
        topics = []
        for topic in request.body.topics:
            parts = []
            for partition in topic.partition_indexes:
                tp = TopicPartition(topic.name, int(partition))
                answer: dict[str, Any] = {"partition_index": tp.partition, "active_producers": []}
                try:
                    producers = active_producers(self.store.context, tp)
                except Exception as exc:
                    answer.update(error_code=error_code(exc), error_message=str(exc))
                else:
                    answer.update(
                        error_code=ErrorCode.none,
                        error_message=None,
                        active_producers=[
                            {
                                "producer_id": p.producer_id,
                                "producer_epoch": _epoch(p.producer_epoch) if p.producer_epoch >= 0 else -1,
                                "last_sequence": p.last_sequence,
                                "last_timestamp": p.last_timestamp_ms,
                                "coordinator_epoch": -1,
                                "current_txn_start_offset": -1,
                            }
                            for p in producers
                        ],
                    )
                parts.append(answer)
            topics.append({"name": topic.name, "partitions": parts})
        return build(response_class(DESCRIBE_PRODUCERS, request.api_version), topics=topics)
