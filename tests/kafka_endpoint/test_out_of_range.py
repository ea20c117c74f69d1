"""lakelog serve answers offsets and timestamps outside what the store holds with Kafka's error codes
and answers, never a crash, and commits nothing for them (in-process Endpoint, no Spark)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.fetch import LIST_OFFSETS
from lakelog.kafka_endpoint.groups import OFFSET_COMMIT
from lakelog.kafka_endpoint.messages import Request, build
from lakelog.kafka_endpoint.transactions import ADD_OFFSETS_TO_TXN, END_TXN, INIT_PRODUCER_ID, TXN_OFFSET_COMMIT
from tests.stores import store_with_records

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def endpoint(tmp_path):
    served = Endpoint(store_with_records(tmp_path / "store", [3, 0]), "127.0.0.1", 9092)
    yield served
    served.close()


def call(endpoint: Endpoint, api: int, version: int, **body):
    return endpoint.handle(Request(api, version, 1, "test", build(load_request_schema(api, version), **body)))


def committed(endpoint: Endpoint, group: str) -> dict[TopicPartition, int | None]:
    consumer = endpoint.store.consumer(group)
    found = consumer.committed([TP0, TP1])
    consumer.close()
    return {tp: None if o is None else o.offset for tp, o in found.items()}


def codes(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def partitions(offsets: dict[int, int]) -> list[dict]:
    return [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1} for p, o in offsets.items()]


def test_offset_commit_of_a_negative_offset_answers_invalid_commit_offset_size_for_it_alone(endpoint):
    response = call(
        endpoint, OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="",
        topics=[{"name": "t", "partitions": partitions({0: 2, 1: -5})}],
    )  # fmt: skip
    # Kafka's consumer treats INVALID_COMMIT_OFFSET_SIZE as fatal for the commit (it does not retry).
    assert codes(response) == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.invalid_commit_offset_size}
    assert committed(endpoint, "g") == {TP0: 2, TP1: None}


def test_txn_offset_commit_of_a_negative_offset_is_refused_and_the_rest_commit_with_the_transaction(endpoint):
    ids = call(endpoint, INIT_PRODUCER_ID, 4, transactional_id="tx", transaction_timeout=timedelta(seconds=60))
    txn = {"transactional_id": "tx", "producer_id": int(ids.producer_id), "producer_epoch": int(ids.producer_epoch)}
    assert call(endpoint, ADD_OFFSETS_TO_TXN, 3, **txn, group_id="g").error_code == ErrorCode.none
    response = call(
        endpoint, TXN_OFFSET_COMMIT, 3, **txn, group_id="g", generation_id=-1, member_id="",
        topics=[{"name": "t", "partitions": partitions({0: 3, 1: -2})}],
    )  # fmt: skip
    assert codes(response) == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.invalid_commit_offset_size}
    assert call(endpoint, END_TXN, 3, **txn, committed=True).error_code == ErrorCode.none
    assert committed(endpoint, "g") == {TP0: 3, TP1: None}


@pytest.mark.parametrize("timestamp", [253_402_300_800_000, 2**62, 2**63 - 1])
def test_list_offsets_for_a_time_no_record_can_have_answers_no_offset_as_kafka_does(endpoint, timestamp):
    asked = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
    response = call(endpoint, LIST_OFFSETS, 7, replica_id=-1, topics=[{"name": "t", "partitions": [asked]}])
    (answer,) = response.topics[0].partitions
    assert (answer.error_code, answer.offset, answer.timestamp) == (ErrorCode.none, -1, -1)
