"""ListTransactions, DescribeTransactions and DescribeProducers as the agent answers them from the
store (in-process Endpoint, no JVM): a transaction a Kafka client runs through the agent is
Ongoing while open there and CompleteCommit once EndTxn committed it; its rows name the same
producer id; an unknown id is TRANSACTIONAL_ID_NOT_FOUND."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.record_batches import ProducedBatch
from lakelog.kafka_endpoint.transaction_states import DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS
from lakelog.kafka_endpoint.transactions import ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID
from lakelog.transactions.producer import producer_id_for
from tests.kafka_endpoint.test_out_of_range import call
from tests.stores import store_with_records


@pytest.fixture
def endpoint(tmp_path):
    served = Endpoint(store_with_records(tmp_path / "store", [0, 0]), "127.0.0.1", 9092)
    yield served
    served.close()


def _listed(endpoint, version: int = 1, **filters):
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, **filters}
    answer = call(endpoint, LIST_TRANSACTIONS, version, **body)
    return answer, [(t.transactional_id, t.producer_id, t.transaction_state) for t in answer.transaction_states]


def _described(endpoint, *ids: str):
    return call(endpoint, DESCRIBE_TRANSACTIONS, 0, transactional_ids=list(ids)).transaction_states


def test_a_transaction_through_the_agent_is_listed_described_and_its_producer_found(endpoint):
    ids = call(endpoint, INIT_PRODUCER_ID, 4, transactional_id="tx", transaction_timeout=timedelta(seconds=45))
    txn = {"transactional_id": "tx", "producer_id": int(ids.producer_id), "producer_epoch": int(ids.producer_epoch)}
    assert txn["producer_id"] == producer_id_for("tx")
    assert _listed(endpoint)[1] == [("tx", producer_id_for("tx"), "Empty")]
    added = call(
        endpoint, ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=txn["producer_id"], v3_and_below_producer_epoch=txn["producer_epoch"],
        v3_and_below_topics=[{"name": "t", "partitions": [1]}],
    )  # fmt: skip
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.none
    # What a transactional Produce request hands the transaction.
    batch = ProducedBatch(txn["producer_id"], txn["producer_epoch"], 0, True, [None], [b"in-it"], [None], [1_000])
    endpoint.transactions.send("t", 1, [batch])
    (open_one,) = _described(endpoint, "tx")
    assert (open_one.transaction_state, open_one.producer_id, open_one.producer_epoch) == (
        "Ongoing",
        producer_id_for("tx"),
        txn["producer_epoch"],
    )
    assert open_one.transaction_timeout == timedelta(seconds=45)
    assert [(t.topic, tuple(t.partitions)) for t in open_one.topics] == [("t", (1,))]
    assert _listed(endpoint, state_filters=["Ongoing", "Bogus"])[0].unknown_state_filters == ("Bogus",)
    assert call(endpoint, END_TXN, 3, **txn, committed=True).error_code == ErrorCode.none
    (done,) = _described(endpoint, "tx")
    assert (done.error_code, done.transaction_state, tuple(done.topics)) == (ErrorCode.none, "CompleteCommit", ())
    assert _listed(endpoint, state_filters=["Ongoing"])[1] == []
    assert _listed(endpoint, version=0, producer_id_filters=[producer_id_for("tx")])[1] == [
        ("tx", producer_id_for("tx"), "CompleteCommit")
    ]
    (missing,) = _described(endpoint, "nobody")
    assert missing.error_code == ErrorCode.transactional_id_not_found
    producers = (
        call(endpoint, DESCRIBE_PRODUCERS, 0, topics=[{"name": "t", "partition_indexes": [0, 1, 7]}])
        .topics[0]
        .partitions
    )
    assert [(p.partition_index, p.error_code) for p in producers] == [
        (0, ErrorCode.none),
        (1, ErrorCode.none),
        (7, ErrorCode.unknown_topic_or_partition),
    ]
    assert producers[0].active_producers == ()
    (active,) = producers[1].active_producers
    assert (active.producer_id, active.producer_epoch, active.current_txn_start_offset) == (
        producer_id_for("tx"),
        txn["producer_epoch"],
        -1,
    )
