"""CreateTopics as Kafka's broker answers it from v5 on: the created topic's effective
configuration (``configs``), its id (v7+), partition count and replication factor, also for
``validate_only``; Java's Admin.createTopics reads ``configs`` and fails with a
NullPointerException without it (``kafka-topics --create`` exits 1, Connect's workers die
creating their topics). Handler cases in-process, no agent process."""

from __future__ import annotations

import uuid

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from lakelog.kafka_endpoint.admin import CREATE_TOPICS, DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG
from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.messages import Request, build
from lakelog.store import Store


@pytest.fixture
def endpoint(tmp_path):
    served = Endpoint(Store.open(tmp_path / "store", num_partitions=2), "127.0.0.1", 9092)
    yield served
    served.close()


def _create(endpoint: Endpoint, version: int, name: str, partitions: int, validate_only: bool = False, **config):
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": -1,
        "assignments": [],
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in config.items()],
    }
    body = build(
        load_request_schema(CREATE_TOPICS, version), topics=[topic], timeout=30_000, validate_only=validate_only
    )
    (result,) = endpoint.handle(Request(CREATE_TOPICS, version, 1, "test", body)).topics
    return result


@pytest.mark.parametrize("version", [5, 7])
def test_a_created_topic_is_answered_with_its_configs_partitions_and_replication_factor(endpoint, version):
    result = _create(endpoint, version, "made", 3, cleanup_policy="compact")
    assert result.error_code == ErrorCode.none
    assert (result.num_partitions, result.replication_factor, result.topic_config_error_code) == (3, 1, 0)
    configs = {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in result.configs}
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG, False, False)
    assert configs["retention.ms"] == ("604800000", DEFAULT_CONFIG, False, False)
    assert [c.name for c in result.configs] == sorted(configs)  # Kafka's order: by name
    topic = endpoint.store.describe_topic("made")
    if version >= 7:
        assert result.topic_id == uuid.UUID(topic.topic_id)


def test_validate_only_answers_what_would_be_created_and_creates_nothing(endpoint):
    result = _create(endpoint, 7, "checked", -1, validate_only=True, retention_ms="1000")
    assert result.error_code == ErrorCode.none
    assert (result.num_partitions, result.replication_factor) == (2, 1)  # the store's num.partitions
    assert {c.name: c.value for c in result.configs}["retention.ms"] == "1000"
    assert endpoint.store.list_topics() == []
    bad = _create(endpoint, 7, "checked", 1, validate_only=True, no_such_config="1")
    assert bad.error_code == ErrorCode.invalid_config
    assert endpoint.store.list_topics() == []


def test_a_refused_topic_has_empty_configs_and_unknown_counts_as_kafka_answers(endpoint):
    _create(endpoint, 7, "twice", 1)
    again = _create(endpoint, 7, "twice", 1)
    assert again.error_code == ErrorCode.topic_already_exists
    assert (again.num_partitions, again.replication_factor, tuple(again.configs)) == (-1, -1, ())


def test_any_replication_factor_is_accepted_with_one_notice_per_topic(endpoint, caplog):
    def create(name: str, factor: int):
        topic = {"name": name, "num_partitions": 1, "replication_factor": factor, "assignments": [], "configs": []}
        body = build(load_request_schema(CREATE_TOPICS, 7), topics=[topic], timeout=30_000, validate_only=False)
        (result,) = endpoint.handle(Request(CREATE_TOPICS, 7, 1, "connect-worker", body)).topics
        return result

    with caplog.at_level("WARNING", logger="lakelog.kafka_endpoint.admin"):
        assert (create("connect-offsets", 3).error_code, create("connect-offsets", 3).error_code) == (
            ErrorCode.none,
            ErrorCode.topic_already_exists,
        )
        assert create("plain", 1).replication_factor == 1
        assert create("defaulted", -1).error_code == ErrorCode.none
        for bad in (0, -2):
            refused = create(f"bad{-bad}", bad)
            assert refused.error_code == ErrorCode.invalid_replication_factor
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1, notices
    assert "'connect-offsets': replication factor 3 asked by client 'connect-worker' is accepted as 1" in notices[0]
    assert endpoint.store.list_topics() == ["connect-offsets", "defaulted", "plain"]
