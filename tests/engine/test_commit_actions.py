"""Typed Delta actions: one decoder and one encoder of commit files, lossless."""

from __future__ import annotations

import json

import pytest

from lakelog.engine.commit.actions import (
    AddFile,
    CommitInfo,
    CorruptCommitError,
    DomainMetadata,
    Metadata,
    OtherAction,
    Protocol,
    RemoveFile,
    Txn,
    decode_commit,
    tp_of,
)
from lakelog.engine.topics import TopicPartition

STATS = json.dumps(
    {
        "numRecords": 3,
        "minValues": {"offset": 10, "timestamp": "2026-01-02T03:04:05.006Z"},
        "maxValues": {"offset": 12, "timestamp": "2026-01-02T03:04:06.000Z"},
        "nullCount": {"offset": 0, "timestamp": 0},
    }
)

LINES = [
    {"commitInfo": {"timestamp": 5, "operation": "WRITE", "txnId": "abc", "engineInfo": "Spark"}},
    {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": ["x"]}},
    {
        "metaData": {
            "id": "m",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": "{}",
            "partitionColumns": ["topic", "partition"],
            "configuration": {"a": "b"},
            "createdTime": 1,
            "someFutureField": 7,
        }
    },
    {
        "add": {
            "path": "topic=t/partition=2/f.parquet",
            "partitionValues": {"topic": "t", "partition": "2"},
            "size": 100,
            "modificationTime": 9,
            "dataChange": True,
            "stats": STATS,
            "tags": {},
            "baseRowId": 4,
            "clusteringProvider": "liquid",
        }
    },
    {
        "remove": {
            "path": "topic=t/partition=2/old.parquet",
            "deletionTimestamp": 8,
            "dataChange": False,
            "extendedFileMetadata": True,
            "partitionValues": {"topic": "t", "partition": "2"},
            "size": 50,
        }
    },
    {"txn": {"appId": "app", "version": 3, "lastUpdated": 2}},
    {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}},
    {"cdc": {"path": "_change_data/x", "partitionValues": {}, "size": 1, "dataChange": False}},
]


def test_every_action_kind_decodes_to_its_type_and_encodes_back_unchanged():
    data = "\n".join(json.dumps(line) for line in LINES) + "\n"
    commit = decode_commit(data.encode())
    kinds = [type(a) for a in commit.actions]
    assert kinds == [CommitInfo, Protocol, Metadata, AddFile, RemoveFile, Txn, DomainMetadata, OtherAction]
    assert [a.to_json() for a in commit.actions] == LINES  # unknown fields survive
    again = decode_commit(commit.encode())
    assert again == commit
    assert commit.txn_id == "abc" and commit.txns == {"app": 3}
    assert commit.metadata.configuration == {"a": "b"}
    assert commit.protocol.writer_features == ("x",)


def test_an_add_tells_offsets_and_timestamps_from_its_statistics():
    add = decode_commit(json.dumps(LINES[3]) + "\n").adds[0]
    stats = add.file_stats()
    assert stats.tp == TopicPartition("t", 2)
    assert (stats.num_records, stats.min_offset, stats.max_offset, stats.size) == (3, 10, 12, 100)
    assert stats.min_timestamp_ms == 1767323045006 and stats.max_timestamp_ms == 1767323046000
    bare = AddFile("topic=t/partition=0/g.parquet", {}, 1, 1, True)
    assert not bare.file_stats().has_offset_stats and bare.tp == TopicPartition("t", 0)


def test_partition_comes_from_values_else_from_the_path():
    assert tp_of("x", {"topic": "a", "partition": "3"}) == TopicPartition("a", 3)
    assert tp_of("topic=a%2Eb/partition=4/f.parquet", None) == TopicPartition("a.b", 4)
    assert tp_of("elsewhere/f.parquet", None) is None
    assert tp_of("topic=a/partition=x/f.parquet", None) is None


def test_a_remove_of_a_live_file_keeps_its_size_values_and_statistics():
    add = decode_commit(json.dumps(LINES[3]) + "\n").adds[0]
    remove = RemoveFile.of(add, 77, data_change=False)
    assert (remove.path, remove.size, remove.stats, remove.deletion_timestamp) == (add.path, 100, STATS, 77)
    assert remove.partition_values == {"topic": "t", "partition": "2"} and remove.extended_file_metadata
    from_stats = RemoveFile.of(add.file_stats(), 78, data_change=True)
    assert json.loads(from_stats.stats) == {"numRecords": 3, "minValues": {"offset": 10}, "maxValues": {"offset": 12}}


@pytest.mark.parametrize(
    "data",
    [b'{"commitInfo":{"timestamp":1}}\n{"add":{"path":"x","si', b"not json\n", b'{"add":{},"remove":{}}\n', b"[1]\n"],
)
def test_a_truncated_or_foreign_file_is_a_corrupt_commit(data):
    with pytest.raises(CorruptCommitError):
        decode_commit(data)


def test_metadata_with_new_configuration_keeps_everything_else():
    meta = decode_commit(json.dumps(LINES[2])).metadata
    changed = meta.with_configuration({"c": "d"})
    assert changed.configuration == {"c": "d"}
    assert changed.to_json()["metaData"]["someFutureField"] == 7 and changed.id == "m"
