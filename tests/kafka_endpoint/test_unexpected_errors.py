"""Answers carrying an error code the agent does not expect to use are logged, one warning per
client id, API and code, naming the client, the API and the message; routine codes (a Fetch out
of range, a group rebalancing, a topic created twice) are not; memory stays bounded."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kio.schema.errors import ErrorCode

from lakelog.kafka_endpoint.messages import build, response_class
from lakelog.kafka_endpoint.unexpected_errors import ROUTINE, UnexpectedErrors, response_errors
from lakelog.store import Store
from tests.kafka_endpoint.conftest import Agent, wait_for

JOIN_GROUP, DESCRIBE_CONFIGS = 11, 32


def _join_answer(code: ErrorCode):
    return build(response_class(JOIN_GROUP, 7), error_code=code, member_id="m", protocol_name="range")


def test_error_codes_are_found_at_any_depth():
    body = build(
        response_class(DESCRIBE_CONFIGS, 4),
        results=[
            {"error_code": ErrorCode.none, "resource_name": "a", "resource_type": 2},
            {
                "error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": "no such topic",
                "resource_name": "b",
                "resource_type": 2,
            },
        ],
    )  # fmt: skip
    assert list(response_errors(body)) == [(ErrorCode.unknown_topic_or_partition, "no such topic")]
    assert list(response_errors(_join_answer(ErrorCode.none))) == []


def test_one_warning_per_client_api_and_code_and_none_for_routine_codes(caplog):
    noted = UnexpectedErrors(limit=2)
    assert ErrorCode.rebalance_in_progress in ROUTINE[JOIN_GROUP]
    with caplog.at_level(logging.WARNING, logger="lakelog.kafka_endpoint.server"):
        assert noted.note("streams-1", JOIN_GROUP, 7, _join_answer(ErrorCode.inconsistent_group_protocol), "peer") == 1
        assert noted.note("streams-1", JOIN_GROUP, 7, _join_answer(ErrorCode.inconsistent_group_protocol), "peer") == 0
        assert noted.note("streams-1", JOIN_GROUP, 7, _join_answer(ErrorCode.rebalance_in_progress), "peer") == 0
        assert noted.note("connect-1", JOIN_GROUP, 7, _join_answer(ErrorCode.inconsistent_group_protocol), "peer") == 1
        assert noted.note("connect-2", JOIN_GROUP, 7, _join_answer(ErrorCode.inconsistent_group_protocol), "peer") == 0
    assert [r.getMessage() for r in caplog.records] == [
        "answered INCONSISTENT_GROUP_PROTOCOL (23) to client 'streams-1' at peer: join_group (key 11) v7",
        "answered INCONSISTENT_GROUP_PROTOCOL (23) to client 'connect-1' at peer: join_group (key 11) v7",
    ]  # the third client is past the limit


@pytest.mark.slow
def test_the_agent_logs_what_it_did_not_expect_to_answer(tmp_path: Path):
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        producer.send("t", b"x", partition=0).get()
    log = tmp_path / "agent.log"
    agent = Agent(tmp_path / "store", log=log)
    try:
        admin = AdminClient({"bootstrap.servers": agent.bootstrap, "client.id": "my-admin"})
        for _ in range(2):  # asked twice, logged once
            found = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "missing")])
            with pytest.raises(KafkaException):
                next(iter(found.values())).result(30)
        with pytest.raises(KafkaException):  # routine: a topic created twice
            admin.create_topics([NewTopic("t", num_partitions=1)])["t"].result(30)
        consumer = Consumer(
            {
                "bootstrap.servers": agent.bootstrap,
                "group.id": "g",
                "client.id": "my-reader",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([KafkaTP("t", 0, 7)])  # past the end: OFFSET_OUT_OF_RANGE, routine for Fetch
        message = consumer.poll(15)
        consumer.close()
        assert message is not None and message.offset() == 0
        wait_for(lambda: "UNKNOWN_TOPIC_OR_PARTITION" in log.read_text(), 10)
    finally:
        agent.stop()
    lines = [line for line in log.read_text().splitlines() if "answered" in line]
    assert len(lines) == 1, lines
    assert "UNKNOWN_TOPIC_OR_PARTITION (3) to client 'my-admin'" in lines[0]
    assert "describe_configs (key 32)" in lines[0] and "no such topic" in lines[0]
