"""format("lakelog") options: Kafka's names, clear errors -- no Spark."""

from __future__ import annotations

import logging

import pytest

from lakelog.engine.errors import InvalidConfigError
from lakelog.spark_connector.options import (
    QUERY_KIND_OPTION,
    parse_sink_options,
    parse_source_options,
    warn_ignored,
)


def parse(streaming=True, **options):
    return parse_source_options({"path": "/tmp/store", **options}, streaming=streaming)


def test_defaults_are_the_kafka_sources():
    stream = parse(subscribe="a,b")
    assert stream.subscription.topics == ("a", "b")
    assert stream.starting == "latest" and stream.fail_on_data_loss and not stream.include_headers
    assert stream.max_trigger_delay_ms == 15 * 60 * 1000
    assert parse(streaming=False, subscribe="a").starting == "earliest"
    batch = parse(streaming=False, subscribe="a", endingOffsetsByTimestamp='{"a":{"1":1700000000000}}')
    assert batch.ending_by_timestamp == {"a": {1: 1_700_000_000_000}} and batch.ending_timestamp is None
    assert parse(streaming=False, subscribe="a", endingTimestamp="42").ending_timestamp == 42


def test_options_are_case_insensitive_and_typed():
    opts = parse(SUBSCRIBEPATTERN="ord.*", maxoffsetspertrigger="100", failondataloss="False", includeHeaders="true")
    assert opts.subscription.pattern == "ord.*"
    assert opts.max_offsets_per_trigger == 100 and not opts.fail_on_data_loss and opts.include_headers
    assert parse(assign='{"a":[1,0]}').subscription.assignment == {"a": (0, 1)}
    timed = parse(subscribe="a", minOffsetsPerTrigger="10", maxTriggerDelay="30s")
    assert timed.min_offsets_per_trigger == 10 and timed.max_trigger_delay_ms == 30_000


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        (
            {"subscribe": "a", "kafkaConsumer.pollTimeout": "5"},
            True,
            "unknown source option 'kafkaConsumer.pollTimeout'",
        ),
        ({"subscribe": "a", "minPartitions": "0"}, True, "'minPartitions' must be a positive integer"),
        ({"subscribe": "a", "maxRecordsPerPartition": "x"}, False, "'maxRecordsPerPartition' must be a positive"),
        ({"subscribe": "a", "maxOffsetPerTrigger": "5"}, True, "unknown source option 'maxOffsetPerTrigger'"),
        ({"subscribe": "a", "subscribePattern": "x"}, True, "exactly one"),
        ({}, True, "exactly one"),
        ({"subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "5"}, True, "contradict"),
        ({"subscribe": "a", "startingOffsets": "latest"}, False, "cannot be latest"),
        ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False, "cannot be earliest"),
        ({"subscribe": "a", "endingOffsets": "latest"}, True, "only applies to batch"),
        ({"subscribe": "a", "groupId": "g"}, False, "only applies to streaming"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
        ({"subscribe": "a", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, True, "larger than"),
        ({"subscribe": "a", "maxTriggerDelay": "5m"}, True, "together with 'minOffsetsPerTrigger'"),
        ({"subscribe": "a", "minOffsetsPerTrigger": "1", "maxTriggerDelay": "soon"}, True, "duration"),
        ({"assign": '{"a": "0"}'}, True, "assign"),
        ({"subscribePattern": "("}, True, "not a valid regex"),
        ({"subscribe": "a", "startingOffsets": "{oops"}, True, "startingOffsets"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, True, "true or false"),
        ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -1}}'}, True, ">= 0"),
        ({"subscribe": "a", "endingTimestamp": "5"}, True, "'endingTimestamp' only applies to batch"),
        ({"subscribe": "a", "endingOffsetsByTimestamp": '{"a":{"0":5}}'}, True, "only applies to batch"),
        ({"subscribe": "a", "endingOffsets": "latest", "endingTimestamp": "5"}, False, "contradict"),
        ({"subscribe": "a", "endingTimestamp": "soon"}, False, "'endingTimestamp' must be milliseconds"),
        ({"subscribe": "a", "endingOffsetsByTimestamp": "[1]"}, False, "'endingOffsetsByTimestamp' must be JSON"),
        ({"subscribe": "a", "endingOffsetsByTimestamp": '{"a": {"0": -1}}'}, False, "'endingOffsetsByTimestamp'.*>= 0"),
    ],
)
def test_bad_options_name_what_is_wrong(options, streaming, message):
    with pytest.raises(InvalidConfigError, match=message.replace("(", r"\(")):
        parse(streaming=streaming, **options)


def test_path_is_required():
    with pytest.raises(InvalidConfigError, match="'path'"):
        parse_source_options({"subscribe": "a"}, streaming=True)
    with pytest.raises(InvalidConfigError, match="'path'"):
        parse_sink_options({"topic": "a"})


def test_sink_options():
    assert parse_sink_options({"path": "/s", "topic": "t", "checkpointLocation": "/c"}).topic == "t"
    with pytest.raises(InvalidConfigError, match="unknown sink option 'subscribe'"):
        parse_sink_options({"path": "/s", "subscribe": "t"})


def test_s3a_settings_given_as_options_reach_the_python_side(monkeypatch):
    """As Delta's fs.* DataFrame options: per-bucket keys first, then fs.s3a.*, then the worker's env."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    options = {
        "path": "s3a://Logs/store",
        "subscribe": "a",
        "fs.s3a.endpoint": "127.0.0.1:9000",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.path.style.access": "true",
        "FS.S3A.BUCKET.LOGS.ACCESS.KEY": "bucket-key",  # Spark lower-cases option names
    }
    access = parse_source_options(options, streaming=True).access
    settings = access.settings
    assert access.uri == "s3a://Logs/store"
    assert settings.endpoint == "http://127.0.0.1:9000" and settings.path_style
    assert settings.access_key == "bucket-key"  # the bucket's own key wins
    assert settings.secret_key == "env-secret"  # what the options leave unset comes from the env
    assert "bucket-key" not in repr(access) and "env-secret" not in repr(access)
    sink = parse_sink_options({"path": "s3a://logs/store", "fs.s3a.endpoint": "http://h:1"})
    assert sink.access.settings.endpoint == "http://h:1"


def test_without_s3a_options_workers_keep_their_own_settings():
    assert parse(subscribe="a").access.settings is None  # a local store
    assert parse_sink_options({"path": "s3a://b/store"}).access.settings is None
    # fs.s3a.* on a local store mean nothing and change nothing
    assert parse(subscribe="a", **{"fs.s3a.endpoint": "http://h:1"}).access.settings is None


def test_other_hadoop_options_are_refused_by_name():
    with pytest.raises(InvalidConfigError, match=r"unknown source option 'fs.gs.project.id'.*fs\.s3a\.\*"):
        parse(subscribe="a", **{"fs.gs.project.id": "p"})


def test_kafka_options_without_meaning_here_are_accepted_and_each_named_once_in_a_warning(caplog):
    kafka_only = {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.group.id": "g",
        "kafka.max.poll.records": "10",
        "kafkaConsumer.pollTimeoutMs": "512",
        "groupIdPrefix": "spark-kafka-source",
        "fetchOffset.numRetries": "3",
        "fetchOffset.retryIntervalMs": "10",
    }
    opts = parse(subscribe="a", **kafka_only)
    assert [key for key, _ in opts.ignored] == list(kafka_only)
    assert opts.subscription.topics == ("a",) and opts.group_id is None  # kafka.group.id is not groupId
    with caplog.at_level(logging.WARNING, logger="lakelog.spark_connector"):
        warn_ignored(opts.ignored, "source")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(kafka_only)
    for key, message in zip(kafka_only, warnings, strict=True):
        assert f"option {key!r} is ignored" in message
    assert "no brokers" in warnings[0] and "'groupId'" in warnings[1] and "polls" in warnings[3]
    sink = parse_sink_options({"path": "/s", "topic": "t", "kafka.acks": "all", "kafka.linger.ms": "5"})
    assert [key for key, _ in sink.ignored] == ["kafka.acks", "kafka.linger.ms"]
    assert parse(subscribe="a").ignored == () and parse_sink_options({"path": "/s"}).ignored == ()


def test_the_query_kind_the_jvm_provider_passes_at_load_checks_batch_and_streaming_options():
    """LakelogProvider adds QUERY_KIND_OPTION at load(); schema() parses with streaming=None."""
    with pytest.raises(InvalidConfigError, match="'endingOffsets' only applies to batch"):
        parse(streaming=None, subscribe="a", endingOffsets="latest", **{QUERY_KIND_OPTION: "streaming"})
    with pytest.raises(InvalidConfigError, match="'groupId' only applies to streaming"):
        parse(streaming=None, subscribe="a", groupId="g", **{QUERY_KIND_OPTION: "batch"})
    with pytest.raises(InvalidConfigError, match="cannot be latest"):
        parse(streaming=None, subscribe="a", startingOffsets="latest", **{QUERY_KIND_OPTION: "batch"})
    # without it (no jar, or a read of neither kind) only what applies to both is checked
    assert parse(streaming=None, subscribe="a", endingOffsets="latest").ending == "latest"
    # the option is lakelog's own, never "unknown"; the defaults follow the kind
    assert parse(streaming=None, subscribe="a", **{QUERY_KIND_OPTION: "streaming"}).starting == "latest"
    assert parse(streaming=None, subscribe="a", **{QUERY_KIND_OPTION: "batch"}).starting == "earliest"


def test_min_partitions_and_max_records_per_partition():
    opts = parse(streaming=False, subscribe="a", minPartitions="8", maxRecordsPerPartition="1000")
    assert opts.min_partitions == 8 and opts.max_records_per_partition == 1000
    assert parse(subscribe="a").min_partitions is None
