"""Committed offsets name the topic they belong to (no Spark)."""

from __future__ import annotations

import pytest

from lakelog.engine.admin.groups import describe_group
from lakelog.engine.errors import InvalidOffsetError, UnknownTopicOrPartitionError
from lakelog.engine.topics import TopicPartition

TP = TopicPartition("t", 0)


def test_offsets_of_a_deleted_topic_do_not_apply_to_one_created_again_under_its_name(plain_store):
    store = plain_store
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(3):
            producer.send("t", f"old-{i}", partition=0).get()
    consumer = store.consumer("g", enable_auto_commit=False)
    consumer.assign([TP])
    consumer.commit({TP: 3})
    consumer.close(autocommit=False)
    store.delete_topic("t")
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(3):
            producer.send("t", f"new-{i}", partition=0).get()
    again = store.consumer("g", enable_auto_commit=False, auto_offset_reset="earliest")
    assert again.committed([TP]) == {TP: None}
    again.assign([TP])
    assert [r.value for r in again.poll(timeout_ms=2000)] == [b"new-0", b"new-1", b"new-2"]
    again.close(autocommit=False)
    assert describe_group(store.context, "g").partitions == ()  # the old topic's offset is not shown as this one's


def test_an_offset_for_a_partition_that_does_not_exist_is_refused_and_nothing_written(plain_store):
    store = plain_store
    store.create_topic("t", partitions=1)
    consumer = store.consumer("g", enable_auto_commit=False)
    consumer.assign([TP])
    consumer.commit({TP: 0})
    version = store.log.latest_version()
    with pytest.raises(UnknownTopicOrPartitionError, match="t-5"):
        consumer.commit({TopicPartition("t", 5): 1})
    with pytest.raises(UnknownTopicOrPartitionError, match="nope-0"):
        consumer.commit({TopicPartition("nope", 0): 1})
    with pytest.raises(InvalidOffsetError, match="non-negative"):
        consumer.commit({TP: -1})
    assert store.log.latest_version() == version
    consumer.close(autocommit=False)


def test_a_transaction_refuses_offsets_of_a_partition_that_does_not_exist_and_stays_usable(plain_store):
    store = plain_store
    store.create_topic("t", partitions=1)
    producer = store.transactional_producer("tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", "v", partition=0)
    version = store.log.latest_version()
    with pytest.raises(UnknownTopicOrPartitionError, match="t-5"):
        producer.send_offsets_to_transaction({TopicPartition("t", 5): 1, TP: 9}, "g")
    with pytest.raises(UnknownTopicOrPartitionError, match="nope-0"):
        producer.send_offsets_to_transaction({("nope", 0): 1}, "g")
    with pytest.raises(InvalidOffsetError, match="non-negative"):
        producer.send_offsets_to_transaction({TP: -3}, "g")
    assert store.log.latest_version() == version  # nothing written
    producer.send_offsets_to_transaction({TP: 1}, "g")
    producer.commit_transaction()
    consumer = store.consumer("g", enable_auto_commit=False)
    assert consumer.committed([TP])[TP].offset == 1  # the refused 9 never joined the transaction
    consumer.close(autocommit=False)
    producer.close()


def test_membership_reads_skip_offset_commits_yet_see_every_group_change(plain_store, monkeypatch):
    """Members check the group's state on every poll; offset commits are far more frequent than
    group changes and live in their own files, which those checks never open."""
    from lakelog.engine.commit.data_files import holds_only_offsets
    from lakelog.engine.commit.partition_reader import PartitionReader
    from lakelog.engine.groups.coordinator import GroupLog

    store = plain_store
    store.create_topic("t", partitions=2)
    a = store.consumer("g", enable_auto_commit=False, client_id="a")
    a.subscribe(["t"])
    a.poll(timeout_ms=0)
    for i in range(3):
        a.commit({TP: i})
    b = store.consumer("g", enable_auto_commit=False, client_id="b")  # a group change after offset commits
    b.subscribe(["t"])
    b.poll(timeout_ms=0)
    opened: list[str] = []
    real = PartitionReader.read_file

    def spy(self, path, *args, **kwargs):
        opened.append(path)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(PartitionReader, "read_file", spy)
    partitions = store.log.latest().topics["__consumer_offsets"].partitions
    fresh = GroupLog(store.log, PartitionReader(store.uri), "g", partitions)  # as a new member folds it
    state_only = fresh.latest(offsets=False)
    assert opened and not any(holds_only_offsets(p) for p in opened)
    before = len(opened)
    everything = GroupLog(store.log, PartitionReader(store.uri), "g", partitions).latest()
    assert any(holds_only_offsets(p) for p in opened[before:])
    assert state_only.state == everything.state
    assert set(everything.state.members) == {a.group_client.member_id, b.group_client.member_id}
    assert everything.offsets[TP].offset == 2
    # The state-only fold goes on from where it was and sees the next change.
    b.close(autocommit=False)
    assert set(fresh.latest(offsets=False).state.members) == {a.group_client.member_id}
    a.close(autocommit=False)


def test_membership_reads_look_at_each_offset_commit_file_once(plain_store, monkeypatch):
    """A member checks its group on every poll; the offset commits since the last group change
    are passed over once, not listed again by every later check (their number grows until
    compaction)."""
    from lakelog.engine.groups import coordinator as group_coordinator

    store = plain_store
    store.create_topic("t", partitions=2)
    a = store.consumer("g", enable_auto_commit=False, client_id="a")
    a.subscribe(["t"])
    a.poll(timeout_ms=0)
    group_log = a.group_client.group_log()
    group_log.latest(offsets=False)
    looked_at: list[str] = []
    real = group_coordinator.holds_only_offsets

    def spy(path: str) -> bool:
        looked_at.append(path)
        return real(path)

    monkeypatch.setattr(group_coordinator, "holds_only_offsets", spy)
    for i in range(5):
        a.commit({TP: i + 1})
    group_log.latest(offsets=False)
    assert len(looked_at) == len(set(looked_at))  # each file once, however many commits checked it
    looked_at.clear()
    for _ in range(3):
        assert a.group_client.member_id in group_log.latest(offsets=False).state.members
    assert looked_at == []  # nothing new: nothing listed
    b = store.consumer("g", enable_auto_commit=False, client_id="b")  # a group change after them
    b.subscribe(["t"])
    b.poll(timeout_ms=0)  # b's own reads start from the beginning
    looked_at.clear()
    assert set(group_log.latest(offsets=False).state.members) == {a.group_client.member_id, b.group_client.member_id}
    assert len(looked_at) == 1  # a's view goes on past its own commits: only the join's file
    b.close(autocommit=False)
    a.close(autocommit=False)
