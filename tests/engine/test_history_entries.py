from __future__ import annotations

import json

from engine.commit_info import admin_tags, append_tags, user_metadata
from engine.history import history_entry
from engine.offsets import OffsetRange, TopicPartition


def commit(info):
    return [json.dumps({"commitInfo": info}), json.dumps({"add": {"path": "x"}})]


def test_lakelog_append_is_described_from_its_tags():
    tp = TopicPartition("t", 1)
    tags = append_tags("produce", "p-1", {tp: OffsetRange(tp, 3, 5)})
    entry = history_entry(7, commit({"timestamp": 1_700_000_000_000, "operation": "WRITE", "tags": tags}))
    assert (entry.version, entry.operation, entry.delta_operation, entry.client_id) == (7, "produce", "WRITE", "p-1")
    assert entry.ranges == [("t", 1, 3, 5)]
    assert entry.touches("t") and not entry.touches("u")
    assert entry.timestamp.year == 2023


def test_user_metadata_is_enough_when_tags_are_missing():
    tp = TopicPartition("t", 0)
    meta = user_metadata(append_tags("write", "w", {tp: OffsetRange(tp, 0, 1)}))
    entry = history_entry(1, commit({"timestamp": 1, "operation": "WRITE", "userMetadata": meta}))
    assert entry.operation == "write" and entry.ranges == [("t", 0, 0, 1)]


def test_admin_and_foreign_commits():
    admin = history_entry(
        2, commit({"operation": "SET TBLPROPERTIES", "tags": admin_tags("create_topic", "c", "t", {})})
    )
    assert admin.operation == "create_topic" and admin.topic == "t" and admin.touches("t")
    foreign = history_entry(3, commit({"operation": "OPTIMIZE", "userMetadata": "nightly run"}))
    assert foreign.operation == "optimize" and foreign.client_id is None and foreign.ranges == []
