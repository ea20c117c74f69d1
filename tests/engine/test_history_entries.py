from __future__ import annotations

import json

from lakelog.engine.admin.history import HistoryEntry, history_entry
from lakelog.engine.commit.actions import decode_commit
from lakelog.engine.commit.info import admin_tags, append_tags, user_metadata
from lakelog.engine.offsets import OffsetRange
from lakelog.engine.topics import TopicPartition


def described(version: int, lines: list[str]) -> HistoryEntry:
    return history_entry(version, decode_commit("\n".join(lines)))


def commit(info):
    return [json.dumps({"commitInfo": info}), json.dumps({"add": {"path": "x"}})]


def test_lakelog_append_is_described_from_its_tags():
    tp = TopicPartition("t", 1)
    tags = append_tags("produce", "p-1", {tp: OffsetRange(tp, 3, 5)})
    entry = described(7, commit({"timestamp": 1_700_000_000_000, "operation": "WRITE", "tags": tags}))
    assert (entry.version, entry.operation, entry.delta_operation, entry.client_id) == (7, "produce", "WRITE", "p-1")
    assert entry.ranges == [("t", 1, 3, 5)]
    assert entry.touches("t") and not entry.touches("u")
    assert entry.timestamp.year == 2023


def test_user_metadata_is_enough_when_tags_are_missing():
    tp = TopicPartition("t", 0)
    meta = user_metadata(append_tags("write", "w", {tp: OffsetRange(tp, 0, 1)}))
    entry = described(1, commit({"timestamp": 1, "operation": "WRITE", "userMetadata": meta}))
    assert entry.operation == "write" and entry.ranges == [("t", 0, 0, 1)]


def test_admin_and_foreign_commits():
    admin = described(2, commit({"operation": "SET TBLPROPERTIES", "tags": admin_tags("create_topic", "c", "t", {})}))
    assert admin.operation == "create_topic" and admin.topic == "t" and admin.touches("t")
    foreign = described(3, commit({"operation": "OPTIMIZE", "userMetadata": "nightly run"}))
    assert foreign.operation == "optimize" and foreign.client_id is None and foreign.ranges == []


def file_action(kind, partition, lo, hi, records, data_change=True):
    stats = json.dumps({"numRecords": records, "minValues": {"offset": lo}, "maxValues": {"offset": hi}})
    body = {"path": f"f{lo}", "partitionValues": {"topic": "t", "partition": str(partition)}, "stats": stats}
    body["dataChange"] = data_change
    return json.dumps({kind: body})


def test_maintenance_commits_show_the_offsets_they_removed_and_added_per_partition():
    info = json.dumps(
        {"commitInfo": {"timestamp": 5, "operation": "LOG COMPACTION", "tags": admin_tags("compact", "m", "t", {})}}
    )
    lines = [
        info,
        file_action("remove", 0, 0, 9, 10),
        file_action("remove", 0, 10, 19, 10),
        file_action("add", 0, 0, 19, 4),
        file_action("remove", 1, 5, 5, 1),
    ]
    entry = described(9, lines)
    assert entry.operation == "compact" and entry.touches("t")
    assert [(c.partition, c.start_offset, c.end_offset, c.records, c.files) for c in entry.removed()] == [
        (0, 0, 20, 20, 2),
        (1, 5, 6, 1, 1),
    ]
    assert [(c.partition, c.start_offset, c.end_offset, c.records, c.files) for c in entry.added()] == [
        (0, 0, 20, 4, 1)
    ]


def test_files_without_statistics_count_files_but_no_offsets():
    lines = [
        json.dumps({"commitInfo": {"operation": "DELETE"}}),
        json.dumps({"remove": {"path": "p", "partitionValues": {"topic": "t", "partition": "2"}}}),
    ]
    (change,) = described(1, lines).changes
    assert (change.action, change.partition, change.start_offset, change.records, change.files) == (
        "removed",
        2,
        None,
        None,
        1,
    )


def test_the_app_transaction_names_the_producer_transaction_or_query():
    tp = TopicPartition("t", 0)
    tags = append_tags("transaction", "c", {tp: OffsetRange(tp, 0, 2)})
    txn = json.dumps({"txn": {"appId": "lakelog-txn-billing", "version": (3 << 32) | 7}})
    info = json.dumps({"commitInfo": {"operation": "WRITE", "tags": tags}})
    entry = described(4, [info, file_action("add", 0, 0, 1, 2), txn])
    assert (entry.transactional_id, entry.transaction_epoch, entry.producer_id) == ("billing", 3, None)
    assert [(c.action, c.start_offset, c.end_offset, c.records) for c in entry.changes] == [("added", 0, 2, 2)]
    producer = described(
        5, [json.dumps({"commitInfo": {}}), json.dumps({"txn": {"appId": "lakelog-producer-p7", "version": 1}})]
    )
    sink = described(
        6, [json.dumps({"commitInfo": {}}), json.dumps({"txn": {"appId": "lakelog-sink-q1", "version": 1}})]
    )
    assert (producer.producer_id, sink.query_id) == ("p7", "q1")
