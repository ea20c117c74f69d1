from __future__ import annotations

import json

import pytest

from engine.log_view import CommitChanges, apply_commit, parse_commit, view_from_snapshot
from engine.offsets import FileStats, TopicPartition
from engine.topics import TopicMetadata, encode_topic, topic_property_key

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def props(*topics: TopicMetadata) -> dict[str, str]:
    return {topic_property_key(t.name): encode_topic(t) for t in topics}


TOPIC = TopicMetadata("t", "id-1", 2)
RECREATED = TopicMetadata("t", "id-2", 2)


def file(tp, lo, hi):
    return FileStats(f"{tp}/{lo}", tp, hi - lo + 1, lo, hi)


def test_snapshot_view_takes_end_offsets_from_statistics():
    view = view_from_snapshot(4, props(TOPIC), [file(T0, 0, 9), file(T0, 10, 14), file(T1, 0, 2)])
    assert view.end_offsets == {T0: 15, T1: 3}
    assert view.end_offset(TopicPartition("t", 5)) == 0
    assert view.unknown_ends == frozenset()


def test_files_without_stats_make_an_end_unknown():
    view = view_from_snapshot(1, props(TOPIC), [FileStats("x", T1, None, None, None)])
    assert view.unknown_ends == {T1}


def test_applying_commits_moves_end_offsets_forward_only():
    view = view_from_snapshot(1, props(TOPIC), [file(T0, 0, 9)])
    view = apply_commit(view, 2, CommitChanges(None, (file(T0, 10, 11),)))
    assert view.version == 2 and view.end_offsets[T0] == 12
    # Re-applying an already seen file (own commit read back) changes nothing.
    again = apply_commit(view, 3, CommitChanges(None, (file(T0, 10, 11),)))
    assert again.end_offsets == view.end_offsets


def test_commits_must_be_applied_in_order():
    view = view_from_snapshot(1, props(TOPIC), [])
    with pytest.raises(ValueError, match="does not follow"):
        apply_commit(view, 3, CommitChanges(None, ()))


def test_deleting_and_recreating_a_topic_resets_its_offsets():
    view = view_from_snapshot(1, props(TOPIC), [file(T0, 0, 9)])
    deleted = apply_commit(view, 2, CommitChanges({}, ()))
    assert deleted.topics == {} and deleted.end_offsets == {}
    view = apply_commit(view, 2, CommitChanges(props(RECREATED), ()))
    assert view.topics["t"].topic_id == "id-2"
    assert view.end_offset(T0) == 0


def test_files_of_unknown_topics_are_ignored():
    view = view_from_snapshot(1, props(TOPIC), [])
    view = apply_commit(view, 2, CommitChanges(None, (file(TopicPartition("gone", 0), 0, 4),)))
    assert view.end_offsets == {}


def test_parse_commit_reads_adds_and_metadata():
    lines = [
        json.dumps({"commitInfo": {"operation": "WRITE"}}),
        json.dumps({"metaData": {"configuration": {"a": "b"}}}),
        json.dumps(
            {
                "add": {
                    "path": "p1",
                    "partitionValues": {"topic": "t", "partition": "0"},
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": 2, "minValues": {"offset": 3}, "maxValues": {"offset": 4}}),
                }
            }
        ),
        json.dumps({"add": {"path": "p2", "partitionValues": {"topic": "t", "partition": "0"}, "dataChange": False}}),
        json.dumps({"remove": {"path": "p0", "dataChange": True}}),
        "",
    ]
    changes = parse_commit(lines)
    assert changes.properties == {"a": "b"}
    assert [f.path for f in changes.added] == ["p1"]
