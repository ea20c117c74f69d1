"""Group ids and member ids (client.id) of any length Kafka's protocol carries work on every store;
longer ones are refused by name before anything is written (no Spark)."""

from __future__ import annotations

import pytest

from lakelog.engine.admin.groups import (
    alter_group_offsets,
    delete_group,
    describe_group,
    list_group_offsets,
    list_groups,
    reset_offsets,
)
from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.topics import TopicPartition
from tests.stores import store_with_records

KAFKA_LIMIT = 32_767  # a Kafka protocol STRING: an int16 length, then the UTF-8 bytes


@pytest.fixture
def store(tmp_path):
    return store_with_records(tmp_path / "store", [2, 2])


def test_a_group_with_long_group_and_member_ids_joins_commits_and_is_described(store):
    group = "group-" + "\u00e9" * 2_000  # 4,006 UTF-8 bytes: too long for any file name
    consumer = store.consumer(group_id=group, client_id="c" * 1_000, auto_offset_reset="earliest")
    consumer.subscribe(["t"])
    records = []
    for _ in range(20):
        records += consumer.poll(timeout_ms=500)
        if len(records) == 4:
            break
    assert sorted(r.value for r in records) == [b"0-0", b"0-1", b"1-0", b"1-1"]
    consumer.commit()
    described = describe_group(store.context, group)
    assert [m.member_id.startswith("c" * 1_000) for m in described.members] == [True]
    assert {(p.partition, p.committed, p.lag) for p in described.partitions} == {(0, 2, 0), (1, 2, 0)}
    consumer.close()
    assert group in {g.group_id for g in list_groups(store.context)}
    delete_group(store.context, group)


def test_a_group_id_longer_than_kafka_can_carry_is_refused_by_name_before_anything_is_written(store, tmp_path):
    version = store.log.latest_version()
    too_long = "g" * 100_000
    with pytest.raises(InvalidConfigError, match=f"group.id .*100000 bytes.*at most {KAFKA_LIMIT}"):
        store.consumer(group_id=too_long)
    multibyte = "\u00e9" * (KAFKA_LIMIT // 2 + 1)  # 32,768 bytes in UTF-8, fewer characters
    with pytest.raises(InvalidConfigError, match=f"{KAFKA_LIMIT + 1} bytes"):
        store.consumer(group_id=multibyte)
    tp = TopicPartition("t", 0)
    for call in (
        lambda: describe_group(store.context, too_long),
        lambda: list_group_offsets(store.context, too_long),
        lambda: alter_group_offsets(store.context, too_long, {tp: 1}),
        lambda: reset_offsets(store.context, too_long, "t", to="earliest"),
        lambda: delete_group(store.context, too_long),
    ):
        with pytest.raises(InvalidConfigError, match=f"at most {KAFKA_LIMIT}"):
            call()
    producer = store.transactional_producer("tx")
    producer.init_transactions()
    producer.begin_transaction()
    with pytest.raises(InvalidConfigError, match=f"at most {KAFKA_LIMIT}"):
        producer.send_offsets_to_transaction({tp: 1}, too_long)
    producer.abort_transaction()
    producer.close()
    assert store.log.latest_version() == version + 1  # only init_transactions committed
    assert not (tmp_path / "store" / "_lakelog").exists()


def test_the_longest_group_id_kafka_carries_is_accepted(store):
    group = "g" * KAFKA_LIMIT
    alter_group_offsets(store.context, group, {TopicPartition("t", 0): 1})
    assert list_group_offsets(store.context, group) == {TopicPartition("t", 0): 1}
