"""Checksum files for commits lakelog writes from Python: derived as Delta derives them, and
accepted by Delta's own validation against a full state reconstruction."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lakelog.compaction import maintain
from lakelog.engine.commit import Committer
from lakelog.engine.commit.checksum import (
    ALL_FILES_THRESHOLD,
    DEFAULT_HISTOGRAM_BINS,
    checksum_disagreement,
    initial_checksum,
    next_checksum,
)
from lakelog.engine.commit.info import ENGINE_INFO
from tests.compaction.produce import commit

BOUNDARIES = [0, 8192, 16384, 32768]
METADATA = {"id": "m", "format": {"provider": "parquet", "options": {}}, "configuration": {}}
PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}


def crc(files: list[dict], **extra) -> dict:
    counts, sizes = [0] * 4, [0] * 4
    for f in files:
        index = max(i for i, b in enumerate(BOUNDARIES) if b <= f["size"])
        counts[index] += 1
        sizes[index] += f["size"]
    return {
        "txnId": "t",
        "tableSizeBytes": sum(f["size"] for f in files),
        "numFiles": len(files),
        "numMetadata": 1,
        "numProtocol": 1,
        "domainMetadata": [],
        "metadata": METADATA,
        "protocol": PROTOCOL,
        "fileSizeHistogram": {"sortedBinBoundaries": BOUNDARIES, "fileCounts": counts, "totalBytes": sizes},
        "allFiles": files,
        **extra,
    }


def add(path: str, size: int) -> dict:
    return {"path": path, "partitionValues": {}, "size": size, "modificationTime": 1, "dataChange": False}


def remove(path: str, size: int | None, extended: bool = True) -> dict:
    action = {"path": path, "deletionTimestamp": 2, "dataChange": False, "extendedFileMetadata": extended}
    if size is not None:
        action["size"] = size
    return {"remove": action}


def test_adds_and_removes_move_sizes_counts_histogram_and_file_list():
    before = crc([add("a", 100), add("b", 9000)], setTransactions=[{"appId": "x", "version": 1}])
    actions = [
        {"commitInfo": {"operation": "OPTIMIZE"}},
        remove("a", 100),
        remove("b", 9000),
        {"add": {**add("c", 20000), "dataChange": True}},
    ]
    after = next_checksum(before, actions)
    assert after == {
        **crc([add("c", 20000)]),
        "txnId": after["txnId"],
    }  # the same as a checksum computed from scratch; setTransactions left out (optional)
    assert after["txnId"] != before["txnId"]


def test_a_metadata_change_is_carried():
    changed = {**METADATA, "configuration": {"lakelog.topic.t": "{}"}}
    after = next_checksum(crc([add("a", 1)]), [{"commitInfo": {}}, {"metaData": changed}])
    assert after["metadata"] == changed and after["numFiles"] == 1


@pytest.mark.parametrize(
    "change, reason",
    [
        ({}, None),
        ({"numFiles": 3}, "numFiles 3"),
        ({"tableSizeBytes": 1}, "tableSizeBytes 1"),
        ({"numFiles": "many"}, "not a checksum"),
        ({"metadata": {**METADATA, "id": "other"}}, "metadata id"),
        ({"metadata": {**METADATA, "configuration": {"a": "b"}}}, "configuration differs"),
        ({"metadata": {**METADATA, "configuration": [["a", "b"]]}}, "configuration is not an object"),
        ({"metadata": "m"}, "metadata is not an object"),
        ({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7}}, "protocol"),
    ],
)
def test_a_checksum_that_disagrees_with_the_log_says_how(change, reason):
    checksum = {"numFiles": 2, "tableSizeBytes": 10, "metadata": METADATA, "protocol": PROTOCOL, **change}
    found = checksum_disagreement(checksum, num_files=2, table_size_bytes=10, metadata=METADATA, protocol=PROTOCOL)
    assert found is None if reason is None else reason in found


def test_the_file_list_is_left_out_past_delta_s_threshold():
    files = [add(f"f{i}", 10) for i in range(ALL_FILES_THRESHOLD)]
    after = next_checksum(crc(files), [{"add": add("one-more", 10)}])
    assert "allFiles" not in after and after["numFiles"] == ALL_FILES_THRESHOLD + 1
    unmatched = next_checksum(crc([add("a", 10)]), [remove("elsewhere", 10)])
    assert "allFiles" not in unmatched  # never guessed


@pytest.mark.parametrize(
    ("previous", "actions"),
    [
        ({**crc([]), "metadata": None}, []),  # an incomplete checksum (as Delta: OLD_CRC_INCOMPLETE)
        (crc([add("a", 1)]), [remove("a", None)]),  # a remove without its size
        (crc([add("a", 1)]), [remove("a", 1, extended=False)]),
        (crc([]), [{"add": {**add("a", 1), "deletionVector": {"cardinality": 1}}}]),
        (crc([]), [{"commitInfo": {"inCommitTimestamp": 5}}]),
        (crc([]), [{"domainMetadata": {"domain": "d", "configuration": "", "removed": False}}]),
        (crc([]), [remove("ghost", 1)]),  # would go below zero files
    ],
)
def test_what_cannot_be_derived_exactly_gives_none(previous, actions):
    assert next_checksum(previous, actions) is None


def _files(adds) -> list[tuple]:
    return sorted(
        (a.path(), a.size(), a.modificationTime(), a.dataChange(), a.stats(), a.partitionValues().toString())
        for a in adds
    )


def _delta_validates(spark, uri: str, version: int) -> bool:  # True if the file list was compared too
    """Delta's own check of version's .crc against a state reconstruction (Checksum.scala's
    ValidateChecksum: sizes, counts, protocol, metadata, histogram, domain metadata), and its
    file list against the reconstructed one. (Delta's validateFileListAgainstCRC is not used:
    it fails even for Delta's own checksums read back from disk, an absent ``tags`` reading as
    an empty map there and as null in the reconstruction.)"""
    jvm = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
    none = jvm.scala.Option.empty()
    snapshot = delta_log.getSnapshotAt(version, none, none, False)
    checksum = snapshot.checksumOpt()
    assert checksum.isDefined(), f"Delta read no checksum for version {version}"
    # validateChecksum raises on a mismatch (spark.databricks.delta.checksum.mismatch.fatal).
    assert snapshot.validateChecksum(getattr(snapshot, "validateChecksum$default$1")())
    listed = checksum.get().allFiles()
    if listed.isDefined():
        from_crc = [listed.get().apply(i) for i in range(listed.get().size())]
        reconstructed = snapshot.allFilesViaStateReconstruction().collectAsList()
        assert _files(from_crc) == _files(reconstructed), f"file list of version {version}"
    return listed.isDefined()


@pytest.mark.spark
def test_delta_accepts_the_checksums_of_python_commits(spark, store):
    """The new table, appends (producer batches, the batch sink, a DataFrame write) and
    maintenance's removes+adds, all committed by the commit core, each with a .crc that Delta
    validates; a JVM commit (SQL OPTIMIZE) continues the chain."""
    store.create_topic("t", partitions=2)
    now = int(time.time() * 1000)
    writer = Committer(store.log, "crc-test")
    for i in range(6):
        commit(writer, "t", i % 2, [(b"k", f"v{i}".encode(), now)])
    frame = spark.createDataFrame([("k", "sink")], "key string, value string")
    frame.write.format("lakelog").option("path", store.uri).option("topic", "t").mode("append").save()
    maintain(store, topics=["t"], vacuum=False)  # OPTIMIZE: removes with sizes, one add per partition
    store.write(frame, topic="t")
    spark.sql(f"OPTIMIZE delta.`{store.uri}`")  # the JVM derives its checksum from ours
    log_dir = Path(store.uri.removeprefix("file://")) / "_delta_log"
    latest = max(int(p.stem) for p in log_dir.glob("0*.json"))
    assert sorted(int(p.stem) for p in log_dir.glob("0*.crc")) == list(range(latest + 1))  # no gap

    python_written = []
    for version in range(latest + 1):
        lines = (log_dir / f"{version:020d}.json").read_text().splitlines()
        info = json.loads(lines[0])["commitInfo"]
        if info.get("engineInfo") == ENGINE_INFO:
            python_written.append((version, info["operation"]))
            assert _delta_validates(spark, store.uri, version)  # a small table: the list is kept
    operations = [op for _, op in python_written]
    assert operations.count("WRITE") >= 8 and "OPTIMIZE" in operations and operations[0] == "CREATE TABLE"
    assert _delta_validates(spark, store.uri, latest)

    # The check is real: a checksum one byte off fails Delta's validation.
    version = python_written[0][0]
    path = log_dir / f"{version:020d}.crc"
    wrong = json.loads(path.read_text())
    wrong["tableSizeBytes"] += 1
    path.write_text(json.dumps(wrong) + "\n")
    with pytest.raises(Exception, match=r"(?i)checksum|integrity|tableSizeBytes|table size"):
        _delta_validates(spark, store.uri, version)


def test_a_new_table_s_checksum_is_delta_s_empty_one():
    empty = initial_checksum(METADATA, PROTOCOL, "x")
    assert (empty["numFiles"], empty["tableSizeBytes"], empty["allFiles"]) == (0, 0, [])
    assert empty["fileSizeHistogram"]["sortedBinBoundaries"] == list(DEFAULT_HISTOGRAM_BINS)
    after = next_checksum(empty, [{"add": add("a", 9000)}])
    assert after["numFiles"] == 1 and after["fileSizeHistogram"]["fileCounts"][1] == 1


def test_a_writer_keeps_the_checksum_chain_when_the_previous_writer_left_no_checksum(tmp_path):
    from lakelog.engine.commit import TableLog
    from lakelog.store import Store

    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    now = int(time.time() * 1000)
    other = Committer(TableLog(store.uri), "other")
    other.latest()  # this process follows the log from here on
    version = commit(Committer(store.log, "crashed"), "t", 0, [(b"k", b"v", now)])
    log_dir = Path(store.uri) / "_delta_log"
    (log_dir / f"{version:020d}.crc").unlink()  # as if its writer died before writing it
    mine = commit(other, "t", 0, [(b"k", b"w", now)])
    written = json.loads((log_dir / f"{mine:020d}.crc").read_text())
    assert written["numFiles"] == 2 and written["tableSizeBytes"] == sum(
        f.size for f in TableLog(store.uri).latest().files
    )
