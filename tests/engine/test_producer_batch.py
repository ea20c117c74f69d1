"""Producer batches without Spark: numbering, per-record refusals, shared futures."""

from __future__ import annotations

import numpy as np
import pytest

from lakelog.engine.errors import CommitConflictError, RecordTooLargeError, UnknownTopicOrPartitionError
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch, number_records, partition_ids
from lakelog.engine.produce.record_queue import RecordFuture
from lakelog.engine.topics import TopicMetadata, TopicPartition
from tests.states import state_with

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_records_are_numbered_per_partition_in_send_order():
    tp_ids = np.array([0, 1, 0, 1, 0])
    accepted = np.array([True, True, False, True, True])
    order, offsets = number_records(tp_ids, accepted, np.array([10, 0]))
    assert list(order) == [0, 4, 1, 3]
    assert list(offsets) == [10, 11, 0, 1]


def batch_of(*records):
    batch = RecordBatch()
    for tp, size in records:
        batch.add(tp, None, b"x" * size, None, 1000, size, 0)
    return batch


def view(*topics):
    return state_with(topics)


def test_prepare_refuses_per_record_what_current_metadata_refuses():
    records = batch_of((A0, 5), (A1, 50), (A0, 500), (B0, 1))
    batch = ProducerBatch(records, 7)
    counts = batch.prepare(view(TopicMetadata("a", "id", 1, {"max.message.bytes": 100})))
    assert counts == {A0: 1}
    assert isinstance(records.record_errors[1], UnknownTopicOrPartitionError)  # a has 1 partition now
    assert isinstance(records.record_errors[2], RecordTooLargeError)
    assert isinstance(records.record_errors[3], UnknownTopicOrPartitionError)  # b is gone
    assert batch.target_partitions(None) == [A0]


def test_rows_built_after_refusals_hold_only_the_accepted_records_numbered_from_their_ends():
    # The rows' order and columns are made when the batch is (before its commit's turn); a refusal
    # found by prepare, in the turn, must still leave the refused record out of the rows.
    records = RecordBatch()
    for i, (tp, size) in enumerate([(A1, 5), (A0, 5), (A1, 500), (A0, 5), (A1, 5)]):
        records.add(tp, None, f"v{i}".encode() + b"x" * size, None, 1000 + i, size, 0)
    batch = ProducerBatch(records, 7)
    assert batch.prepare(view(TopicMetadata("a", "id", 2, {"max.message.bytes": 100}))) == {A1: 2, A0: 2}
    table = batch.build({A0: 10, A1: 20}, {"a": TopicMetadata("a", "id", 2)}, 5000)
    rows = table.select(["partition", "offset", "value"]).to_pylist()
    assert [(r["partition"], r["offset"], r["value"][:2]) for r in rows] == [
        (1, 20, b"v0"),
        (1, 21, b"v4"),
        (0, 10, b"v1"),
        (0, 11, b"v3"),
    ]
    assert table.column("timestamp").cast("int64").to_pylist() == [1_000_000, 1_004_000, 1_001_000, 1_003_000]
    batch.complete()
    assert [records.metadata(i).offset for i in (0, 1, 3, 4)] == [20, 10, 11, 21]
    assert isinstance(records.record_errors[2], RecordTooLargeError)


def test_futures_share_their_batch_result():
    records = batch_of((A0, 1), (A1, 1), (A0, 1))
    futures = [RecordFuture(records, i) for i in range(3)]
    seen, errors = [], []
    futures[2].add_callback(seen.append)
    futures[1].add_errback(errors.append)
    assert not futures[0].done() and futures[0].exception() is None
    records.record_errors[1] = UnknownTopicOrPartitionError("gone")
    records.complete(np.array([4, -1, 5]), {})
    assert futures[0].get().offset == 4 and futures[2].get().offset == 5
    assert seen[0].partition == 0 and seen[0].offset == 5
    assert isinstance(errors[0], UnknownTopicOrPartitionError) and futures[1].failed()
    with pytest.raises(UnknownTopicOrPartitionError):
        futures[1].get()
    late = []
    futures[0].add_callback(late.append)
    assert late[0].offset == 4


def test_a_failed_batch_fails_every_record():
    records = batch_of((A0, 1), (A0, 1))
    futures = [RecordFuture(records, i) for i in range(2)]
    records.fail(CommitConflictError("lost", attempts=3))
    assert all(isinstance(f.exception(), CommitConflictError) for f in futures)


def test_a_refused_record_fails_at_once():
    future = RecordFuture(error=RecordTooLargeError("big"))
    assert future.done() and future.failed()
    with pytest.raises(RecordTooLargeError):
        future.get(timeout=0)


def test_partition_ids_number_partitions_in_order_of_their_first_record():
    topic_ids = np.array([1, 0, 1, 1, 0, 0])
    partitions = np.array([3, 0, 3, 1, 0, 2])
    tps, tp_ids = partition_ids(topic_ids, ["a", "b"], partitions, np.array([4]))
    assert tps == [TopicPartition("b", 3), A0, TopicPartition("b", 1), TopicPartition("a", 2)]
    assert tp_ids.tolist() == [0, 1, 0, 2, -1, 3]
    # Partition numbers too far apart for the linear grouping: the same numbering by np.unique.
    wide = np.array([70_000, 0, 70_000, 1, 0, 2])
    tps, tp_ids = partition_ids(topic_ids, ["a", "b"], wide)
    assert tps == [TopicPartition("b", 70_000), A0, TopicPartition("b", 1), TopicPartition("a", 2)]
    assert tp_ids.tolist() == [0, 1, 0, 2, 1, 3]


def test_placing_a_batch_continues_each_partitions_sequence_and_wraps_as_kafka():
    batch = RecordBatch()
    for i, topic in enumerate(["a", "a", "b", "a", "b"]):
        batch.fields.extend((topic, None, None, b"v", 1_000.9 + i, 1))  # as send() queues them
    sequences = {A0: 5, B0: 2**31 - 1}
    batch.place(np.array([0, 1, 0, 0, 0]), sequences, {1: UnknownTopicOrPartitionError("gone")})
    assert batch.tps == [A0, B0] and batch.tp_ids.tolist() == [0, -1, 1, 0, 1]
    assert batch.sequences[[0, 2, 3, 4]].tolist() == [5, 2**31 - 1, 6, 0]
    assert sequences == {A0: 7, B0: 1}
    assert batch.timestamps.tolist() == [1000, 1001, 1002, 1003, 1004]  # whole ms
    assert isinstance(batch.record_errors[1], UnknownTopicOrPartitionError)
    assert ProducerBatch(batch, 7).prepare(view(TopicMetadata("a", "id", 1), TopicMetadata("b", "id", 1))) == {
        A0: 2,
        B0: 2,
    }
    with pytest.raises(RuntimeError, match="placed once"):
        batch.place(np.zeros(5, dtype=np.int64))
