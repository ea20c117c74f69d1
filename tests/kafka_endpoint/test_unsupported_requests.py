"""Requests ``lakelog serve`` answers with UNSUPPORTED_VERSION are logged, one warning per
client and API (naming the client, the API and version, and what the agent serves), so that
what a framework needs and the agent lacks shows in the agent's log; ApiVersions' own version
negotiation is not logged."""

from __future__ import annotations

import logging
import re
import socket
import struct
from pathlib import Path

import pytest

from lakelog.kafka_endpoint.endpoint import API_VERSIONS, SUPPORTED
from lakelog.kafka_endpoint.messages import api_name, header_client_id
from lakelog.kafka_endpoint.server import UnsupportedRequests, error_response
from lakelog.store import Store
from tests.kafka_endpoint.conftest import Agent, wait_for

DELETE_RECORDS = 21
# Served by no version (DescribeTopicPartitions, KIP-714's telemetry): Java clients fall back or skip.
DESCRIBE_TOPIC_PARTITIONS, GET_TELEMETRY_SUBSCRIPTIONS = 75, 71


def _frame(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    header = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        return header + struct.pack(">h", -1) + b"\0"
    raw = client_id.encode()
    return header + struct.pack(">h", len(raw)) + raw + b"\0"  # header v2's empty tagged fields


def test_the_client_id_is_read_from_any_request_header():
    assert header_client_id(_frame(DELETE_RECORDS, 2, 1, "kafka-delete-records")) == "kafka-delete-records"
    assert header_client_id(_frame(3, 1, 1, None)) is None
    assert header_client_id(b"\0\x03\0\x01\0\0\0\x01\0\x09ab") is None  # cut short


def test_apis_are_named_as_kafka_names_them():
    assert api_name(DELETE_RECORDS, 99) == "delete_records"
    assert api_name(68, 0) == "consumer_group_heartbeat"
    assert api_name(9999, 0) == "api 9999"


def test_one_warning_per_client_and_api(caplog):
    noted = UnsupportedRequests(SUPPORTED, limit=3)
    with caplog.at_level(logging.WARNING, logger="lakelog.kafka_endpoint.server"):
        assert noted.note(_frame(DESCRIBE_TOPIC_PARTITIONS, 0, 1, "a"), DESCRIBE_TOPIC_PARTITIONS, 0, "peer")
        assert not noted.note(
            _frame(DESCRIBE_TOPIC_PARTITIONS, 1, 2, "a"), DESCRIBE_TOPIC_PARTITIONS, 1, "peer"
        )  # same client and API
        assert noted.note(_frame(DESCRIBE_TOPIC_PARTITIONS, 0, 3, "b"), DESCRIBE_TOPIC_PARTITIONS, 0, "peer")
        assert noted.note(_frame(GET_TELEMETRY_SUBSCRIPTIONS, 0, 4, "a"), GET_TELEMETRY_SUBSCRIPTIONS, 0, "peer")
        assert not noted.note(_frame(API_VERSIONS, 9, 5, "a"), API_VERSIONS, 9, "peer")  # negotiation
        assert not noted.note(
            _frame(GET_TELEMETRY_SUBSCRIPTIONS, 0, 6, "c"), GET_TELEMETRY_SUBSCRIPTIONS, 0, "peer"
        )  # limit
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "answered UNSUPPORTED_VERSION to client 'a' at peer: describe_topic_partitions (key 75) v0; "
        "this agent serves no version of it",
        "answered UNSUPPORTED_VERSION to client 'b' at peer: describe_topic_partitions (key 75) v0; "
        "this agent serves no version of it",
        "answered UNSUPPORTED_VERSION to client 'a' at peer: get_telemetry_subscriptions (key 71) v0; "
        "this agent serves no version of it",
    ]
    low, high = SUPPORTED[3]
    with caplog.at_level(logging.WARNING, logger="lakelog.kafka_endpoint.server"):
        UnsupportedRequests(SUPPORTED).note(_frame(3, high + 1, 7, "a"), 3, high + 1, "peer")
    assert caplog.records[-1].getMessage().endswith(f"metadata (key 3) v{high + 1}; this agent serves v{low}-v{high}")


def _ask(port: int, frame: bytes) -> int:
    """Send one request; the correlation id of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", sock.recv(4))[0]
        answer = b""
        while len(answer) < size:
            answer += sock.recv(size - len(answer))
        return struct.unpack_from(">i", answer, 0)[0]


@pytest.mark.slow
def test_the_agent_logs_each_unsupported_client_and_api_once(tmp_path: Path):
    store = tmp_path / "store"
    Store.open(store).close()
    log = tmp_path / "agent.log"
    agent = Agent(store, log=log)
    try:
        asked = [
            _frame(GET_TELEMETRY_SUBSCRIPTIONS, 0, 11, "tool-1"),
            _frame(GET_TELEMETRY_SUBSCRIPTIONS, 0, 12, "tool-1"),
            _frame(GET_TELEMETRY_SUBSCRIPTIONS, 0, 13, "tool-2"),
            _frame(API_VERSIONS, 99, 14, "tool-1"),
        ]
        assert [_ask(agent.port, frame) for frame in asked] == [11, 12, 13, 14]  # each answered
        wait_for(lambda: len(re.findall("UNSUPPORTED_VERSION", log.read_text())) >= 2, 10)
    finally:
        agent.stop()
    warnings = [line for line in log.read_text().splitlines() if "UNSUPPORTED_VERSION" in line]
    assert len(warnings) == 2, warnings
    assert "client 'tool-1'" in warnings[0] and "get_telemetry_subscriptions (key 71) v0" in warnings[0]
    assert "client 'tool-2'" in warnings[1]


@pytest.mark.parametrize(("api_key", "version"), [(0, 9), (1, 12), (DELETE_RECORDS, 2), (11, 7)])
def test_an_error_answer_is_written_also_where_errors_are_per_partition(api_key: int, version: int):
    """Produce, Fetch and DeleteRecords carry error codes only per partition: the answer is still
    a response of the asked API and version carrying the request's correlation id."""
    answer = error_response(api_key, version, 77)
    assert answer is not None
    size, correlation_id = struct.unpack(">ii", answer[:8])
    assert (size, correlation_id) == (len(answer) - 4, 77)
