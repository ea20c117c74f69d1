"""The conflict rules: rebase or re-plan after a winner took the version (pure)."""

from __future__ import annotations

import json

from lakelog.engine.commit.actions import AddFile, Commit, CommitInfo, Metadata, Protocol, RemoveFile, Txn
from lakelog.engine.commit.conflicts import (
    Resolution,
    append_verdict,
    maintenance_verdict,
    record_verdict,
    topic_change_verdict,
)
from lakelog.engine.topics import TopicMetadata, TopicPartition, encode_topic, topic_property_key

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def add(tp, lo, hi, *, stats=True, data_change=True, path=None):
    values = {"topic": tp.topic, "partition": str(tp.partition)}
    text = json.dumps({"numRecords": hi - lo + 1, "minValues": {"offset": lo}, "maxValues": {"offset": hi}})
    return AddFile(path or f"{tp}-{lo}", values, 1, 1, data_change, text if stats else None)


def meta(topic_id="id-1"):
    t = TopicMetadata("t", topic_id, 2)
    return Metadata("m", "{}", ("topic", "partition"), {topic_property_key("t"): encode_topic(t)})


def winner(*actions):
    return Commit((CommitInfo({"operation": "X"}), *actions))


def test_an_append_rebases_over_appends_to_other_partitions_and_rearrangements_of_its_own():
    ends = {T0: 10}
    assert append_verdict(winner(add(T1, 0, 99)), ends, []).resolution is Resolution.REBASE
    optimize = winner(RemoveFile("a", 1, False), add(T0, 0, 9, data_change=False))
    assert append_verdict(optimize, ends, []).resolution is Resolution.REBASE
    compaction = winner(RemoveFile("a", 1, True), add(T0, 0, 5))  # records removed below the end
    assert append_verdict(compaction, ends, []).resolution is Resolution.REBASE
    assert append_verdict(winner(Txn("other", 1)), ends, ["mine"]).resolution is Resolution.REBASE


def test_an_append_replans_when_its_offsets_or_what_it_relied_on_changed():
    ends = {T0: 10}
    cases = {
        "appended offsets up to 10": winner(add(T0, 10, 10)),
        "without offset statistics": winner(add(T0, 0, 0, stats=False)),
        "application transaction mine": winner(Txn("mine", 4)),
        "metadata": winner(meta()),
        "protocol": winner(Protocol(1, 2)),
    }
    for reason, commit in cases.items():
        verdict = append_verdict(commit, ends, ["mine"])
        assert verdict.resolution is Resolution.REPLAN and reason in verdict.reason, reason


def test_a_topic_change_replans_after_metadata_and_a_deletion_after_any_change_of_its_files():
    assert topic_change_verdict(winner(add(T0, 0, 1))).resolution is Resolution.REBASE
    assert topic_change_verdict(winner(meta())).resolution is Resolution.REPLAN
    assert topic_change_verdict(winner(add(T0, 0, 1)), deleting="t").resolution is Resolution.REPLAN
    assert topic_change_verdict(winner(add(TopicPartition("u", 0), 0, 1)), deleting="t").resolution is Resolution.REBASE


def test_a_maintenance_step_loses_only_to_removes_of_its_files_or_its_topic_replaced():
    removes = {"a", "topic=t/partition=0/b c"}
    assert maintenance_verdict(winner(add(T0, 10, 20)), removes, "t", "id-1").resolution is Resolution.REBASE
    assert maintenance_verdict(winner(meta("id-1")), removes, "t", "id-1").resolution is Resolution.REBASE
    lost = maintenance_verdict(winner(RemoveFile("topic=t/partition=0/b%20c", 1, True)), removes, "t", "id-1")
    assert lost.resolution is Resolution.CONFLICT and "removed" in lost.reason
    replaced = maintenance_verdict(winner(meta("id-2")), removes, "t", "id-1")
    assert replaced.resolution is Resolution.CONFLICT and "re-created" in replaced.reason


def test_a_record_of_an_operation_rebases_over_anything_but_a_protocol_change():
    for other in (add(T0, 0, 9), RemoveFile("a", 1, True), meta("id-2"), Txn("app", 3, 1)):
        assert record_verdict(winner(other)).resolution is Resolution.REBASE
    changed = record_verdict(winner(Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))))
    assert changed.resolution is Resolution.REPLAN and "protocol" in changed.reason
