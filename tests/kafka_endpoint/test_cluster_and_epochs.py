"""Metadata with the store's topic ids (v10+, also asked by id), DescribeCluster, and one
leader epoch said alike by Metadata, ListOffsets, the batches Fetch returns and
OffsetForLeaderEpoch (in-process Endpoint, no Spark, no JVM)."""

from __future__ import annotations

import struct
import uuid

import pytest
from kio.schema.errors import ErrorCode

from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.admin import DESCRIBE_CLUSTER, METADATA
from lakelog.kafka_endpoint.endpoint import SUPPORTED, Endpoint
from lakelog.kafka_endpoint.fetch import FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH
from lakelog.kafka_endpoint.record_batches import LEADER_EPOCH, decode_batches
from tests.kafka_endpoint.test_out_of_range import call
from tests.stores import store_with_records


@pytest.fixture
def endpoint(tmp_path):
    served = Endpoint(store_with_records(tmp_path / "store", [3, 1]), "127.0.0.1", 9092)
    yield served
    served.close()


def test_metadata_carries_the_stores_topic_ids_and_finds_topics_by_id(endpoint):
    topic_id = uuid.UUID(endpoint.store.describe_topic("t").topic_id)
    for version in (10, 12, 13):
        answer = call(endpoint, METADATA, version, topics=None, allow_auto_topic_creation=False)
        (topic,) = answer.topics
        assert (topic.name, topic.topic_id, topic.error_code) == ("t", topic_id, ErrorCode.none)
        assert [p.leader_epoch for p in topic.partitions] == [LEADER_EPOCH, LEADER_EPOCH]
    stranger = uuid.uuid4()
    answer = call(
        endpoint, METADATA, 12, allow_auto_topic_creation=False,
        topics=[{"topic_id": topic_id, "name": None}, {"topic_id": stranger, "name": None}],
    )  # fmt: skip
    assert [(t.name, t.topic_id, t.error_code) for t in answer.topics] == [
        ("t", topic_id, ErrorCode.none),
        (None, stranger, ErrorCode.unknown_topic_id),
    ]
    assert SUPPORTED[METADATA] == (1, 13)


def test_describe_cluster_names_the_agent_as_the_one_broker(endpoint):
    for version in (0, 1, 2):
        answer = call(endpoint, DESCRIBE_CLUSTER, version, include_cluster_authorized_operations=False)
        assert answer.error_code == ErrorCode.none
        assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [(0, "127.0.0.1", 9092)]
        assert (answer.cluster_id, answer.controller_id, answer.cluster_authorized_operations) == (
            "lakelog",
            0,
            -(2**31),
        )
    asked = call(endpoint, DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert asked.cluster_authorized_operations & (1 << 8)  # DESCRIBE
    controllers = call(endpoint, DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=2)
    assert controllers.error_code == ErrorCode.mismatched_endpoint_type and controllers.brokers == ()


def test_one_leader_epoch_everywhere(endpoint):
    fetched = call(
        endpoint, FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
        session_id=0, session_epoch=-1, rack_id="",
        topics=[{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                               "current_leader_epoch": LEADER_EPOCH, "log_start_offset": -1,
                                               "last_fetched_epoch": -1}]}],
        forgotten_topics_data=[],
    )  # fmt: skip
    records = fetched.responses[0].partitions[0].records
    assert struct.unpack_from(">i", records, 12)[0] == LEADER_EPOCH
    assert sum(len(b.values) for b in decode_batches(records)) == 3  # the CRC still holds
    listed = call(
        endpoint, LIST_OFFSETS, 7, replica_id=-1, isolation_level=1,
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
    )  # fmt: skip
    assert listed.topics[0].partitions[0].leader_epoch == LEADER_EPOCH


def _epochs(endpoint, partitions: list[dict], version: int = 4):
    answer = call(
        endpoint, OFFSET_FOR_LEADER_EPOCH, version, replica_id=-1, topics=[{"topic": "t", "partitions": partitions}]
    )
    return [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in answer.topics[0].partitions]


def test_offset_for_leader_epoch_ends_the_one_epoch_at_the_high_watermark(endpoint):
    asked = [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": LEADER_EPOCH},
        {"partition": 1, "current_leader_epoch": LEADER_EPOCH, "leader_epoch": LEADER_EPOCH},
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": LEADER_EPOCH + 3},
        {"partition": 0, "current_leader_epoch": LEADER_EPOCH + 1, "leader_epoch": LEADER_EPOCH},
        {"partition": 5, "current_leader_epoch": -1, "leader_epoch": LEADER_EPOCH},
    ]
    assert _epochs(endpoint, asked) == [
        (0, ErrorCode.none, LEADER_EPOCH, 3),
        (1, ErrorCode.none, LEADER_EPOCH, 1),
        (0, ErrorCode.none, -1, -1),
        (0, ErrorCode.unknown_leader_epoch, -1, -1),
        (5, ErrorCode.unknown_topic_or_partition, -1, -1),
    ]
    endpoint.store.delete_records({TopicPartition("t", 0): 2})  # the epoch's end is not its start
    assert _epochs(endpoint, asked[:1], version=2) == [(0, ErrorCode.none, LEADER_EPOCH, 3)]
