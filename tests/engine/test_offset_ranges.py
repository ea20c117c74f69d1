"""Offsets and timestamps outside what Kafka (a Java long) and the log table hold are refused by
name, at every entry point, before anything is committed (no Spark)."""

from __future__ import annotations

import pytest

from lakelog.engine.admin.groups import alter_group_offsets, describe_group, reset_offsets
from lakelog.engine.errors import InvalidOffsetError
from lakelog.engine.topics import TopicPartition
from tests.stores import BASE_MS, store_with_records

LONG_MAX = 2**63 - 1
TIMESTAMP_MAX = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the newest a record can carry
TP = TopicPartition("t", 0)


@pytest.fixture
def store(tmp_path):
    store = store_with_records(tmp_path / "store", [7, 0])
    consumer = store.consumer("g")
    consumer.assign([TP])
    consumer.commit({TP: 3})
    consumer.close()
    return store


@pytest.mark.parametrize("offset", [2**63, 2**64 + 5, -1])
def test_commit_of_an_offset_outside_a_java_long_is_refused_and_nothing_is_committed(store, offset):
    version = store.log.latest_version()
    consumer = store.consumer("g")
    consumer.assign([TP])
    with pytest.raises(InvalidOffsetError, match=rf"t-0.*{offset}.*0\.\.{LONG_MAX}"):
        consumer.commit({(TP.topic, TP.partition): offset})
    with pytest.raises(InvalidOffsetError, match=rf"{offset}.*0\.\.{LONG_MAX}"):
        consumer.commit({TP: 2, TopicPartition("t", 1): offset})  # all or nothing
    with pytest.raises(InvalidOffsetError, match=rf"{offset}.*0\.\.{LONG_MAX}"):
        consumer.seek(TP, offset)
    assert consumer.position(TP) == 3
    consumer.close()
    with pytest.raises(InvalidOffsetError, match=rf"{offset}.*0\.\.{LONG_MAX}"):
        alter_group_offsets(store.context, "g", {TP: offset})
    producer = store.transactional_producer("tx")
    producer.init_transactions()
    producer.begin_transaction()
    with pytest.raises(InvalidOffsetError, match=rf"{offset}.*0\.\.{LONG_MAX}"):
        producer.send_offsets_to_transaction({TP: offset}, "g")
    producer.send_offsets_to_transaction({TP: 5}, "g")  # the transaction stays usable
    producer.abort_transaction()
    producer.close()
    assert store.log.latest_version() == version + 2  # init_transactions and the abort marker only
    (partition,) = [p for p in describe_group(store.context, "g").partitions if p.partition == 0]
    assert (partition.committed, partition.lag) == (3, 4)


def test_the_largest_java_long_is_a_valid_offset_to_commit(store):
    consumer = store.consumer("g")
    consumer.assign([TP])
    consumer.commit({TP: LONG_MAX})
    assert consumer.committed([TP])[TP].offset == LONG_MAX
    consumer.close()


def test_a_reset_to_an_offset_outside_a_java_long_is_refused(store):
    version = store.log.latest_version()
    for value in (2**63, -(2**63) - 1):
        with pytest.raises(InvalidOffsetError, match=rf"{value}.*{-(2**63)}\.\.{LONG_MAX}"):
            reset_offsets(store.context, "g", "t", to="offset", value=value)
    assert store.log.latest_version() == version
    # Inside the range it is clamped into the log, as Kafka does.
    assert reset_offsets(store.context, "g", "t", to="offset", value=-(2**63), dry_run=True)[TP] == 0
    assert reset_offsets(store.context, "g", "t", to="offset", value=LONG_MAX, dry_run=True)[TP] == 7


@pytest.mark.parametrize("timestamp", [2**62, TIMESTAMP_MAX + 1, 2**63, 2**70])
def test_a_timestamp_no_record_can_carry_is_refused_by_name(store, timestamp):
    with pytest.raises(InvalidOffsetError, match=rf"t-0.*{timestamp}.*0\.\.{TIMESTAMP_MAX}"):
        store.offsets_for_times("t", {0: timestamp})
    with pytest.raises(InvalidOffsetError, match=rf"{timestamp}.*0\.\.{TIMESTAMP_MAX}"):
        reset_offsets(store.context, "g", "t", to="datetime", value=timestamp)


def test_the_newest_timestamp_a_record_can_carry_finds_no_record(store):
    assert store.offsets_for_times("t", {0: TIMESTAMP_MAX, 1: 0}) == {0: None, 1: None}
    assert store.offsets_for_times("t", {0: BASE_MS + 2})[0].offset == 2


def test_a_reset_clamped_into_the_log_logs_kafkas_warning(store, caplog):
    with caplog.at_level("WARNING", logger="lakelog.group_admin"):
        assert reset_offsets(store.context, "g", "t", to="offset", value=-5)[TP] == 0
    assert [r.getMessage() for r in caplog.records] == [
        "New offset (-5) is lower than earliest offset for topic partition t-0. Value will be set to 0",
        "New offset (-5) is lower than earliest offset for topic partition t-1. Value will be set to 0",
    ]
