"""Delta's per-version checksum file (``_delta_log/<version>.crc``) for the commits lakelog makes.

Delta-Spark writes ``N.crc`` next to every commit it makes: table size,
file count, protocol, metadata and, for small tables, the file list. A
Snapshot at version N with a ``.crc`` takes protocol and metadata from it;
without one, Delta reconstructs them with a Spark job over the log
(``Snapshot.protocolMetadataICTAndLMCReconstruction``), which costs seconds
in every Spark read and write of the table (measured 2.4-7 s against about
1 s). And Delta derives each new ``.crc`` from the previous one, so one
missing file breaks the chain for every later Delta-Spark commit until some
commit reconstructs the state. The commit core writes one after each commit
(a post-commit hook of :mod:`engine.commit.committer`).

:func:`next_checksum` derives ``N.crc`` from ``N-1.crc`` and commit N's
actions the way Delta's ``RecordChecksum.computeNewChecksum`` does
(delta-io/delta, spark/src/main/scala/org/apache/spark/sql/delta/Checksum.scala):
sizes and counts of adds and removes, the file-size histogram, the file
list while it stays under Delta's default threshold of 50 files
(``spark.databricks.delta.allFilesInCrc.thresholdNumFiles``), a new
metaData or protocol action, domain metadata carried over. Where Delta's
rules would need what lakelog's commits never carry (deletion vectors,
in-commit timestamps, a remove without its size) it gives up, and no
``.crc`` is written: Delta then reconstructs, exactly as before.
``setTransactions`` are left out (optional; lakelog's tables set
``delta.setTransactionRetentionDuration``, under which Delta leaves them out
of its own incremental checksums too).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from lakelog.engine.storage.unique_ids import new_uuid

# Delta's default spark.databricks.delta.allFilesInCrc.thresholdNumFiles.
ALL_FILES_THRESHOLD = 50
_HISTOGRAM_KEYS = ("fileSizeHistogram", "histogramOpt")  # spec name, legacy Delta-Spark name


# The bins of Delta's file-size histogram, as Delta 4.4 writes them in a new table's checksum.
# fmt: off
DEFAULT_HISTOGRAM_BINS = (
    0, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608, 12582912,
    16777216, 20971520, 25165824, 29360128, 33554432, 37748736, 41943040, 50331648, 58720256, 67108864,
    75497472, 83886080, 92274688, 100663296, 109051904, 117440512, 125829120, 130023424, 134217728, 138412032,
    142606336, 146800640, 150994944, 167772160, 184549376, 201326592, 218103808, 234881024, 251658240,
    268435456, 285212672, 301989888, 318767104, 335544320, 352321536, 369098752, 385875968, 402653184,
    419430400, 436207616, 452984832, 469762048, 486539264, 503316480, 520093696, 536870912, 553648128,
    570425344, 587202560, 603979776, 671088640, 738197504, 805306368, 872415232, 939524096, 1006632960,
    1073741824, 1140850688, 1207959552, 1275068416, 1342177280, 1409286144, 1476395008, 1610612736, 1744830464,
    1879048192, 2013265920, 2147483648, 2415919104, 2684354560, 2952790016, 3221225472, 3489660928, 3758096384,
    4026531840, 4294967296, 8589934592, 17179869184, 34359738368, 68719476736, 137438953472, 274877906944,
)
# fmt: on


def initial_checksum(metadata: Mapping[str, Any], protocol: Mapping[str, Any], txn_id: str) -> dict[str, Any]:
    """The checksum of a new, empty table (version 0), as Delta writes it."""
    bins = len(DEFAULT_HISTOGRAM_BINS)
    return {
        "txnId": txn_id,
        "tableSizeBytes": 0,
        "numFiles": 0,
        "numMetadata": 1,
        "numProtocol": 1,
        "domainMetadata": [],
        "metadata": dict(metadata),
        "protocol": dict(protocol),
        "fileSizeHistogram": {
            "sortedBinBoundaries": list(DEFAULT_HISTOGRAM_BINS),
            "fileCounts": [0] * bins,
            "totalBytes": [0] * bins,
        },
        "allFiles": [],
    }


def next_checksum(previous: Mapping[str, Any], actions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The checksum after a commit of ``actions`` (parsed commit-file lines) on top of ``previous``
    (the checksum of the version before), or None when it cannot be derived exactly."""
    metadata, protocol = previous.get("metadata"), previous.get("protocol")
    if not metadata or not protocol:
        return None
    size, count = int(previous["tableSizeBytes"]), int(previous["numFiles"])
    histogram_key = next((k for k in _HISTOGRAM_KEYS if previous.get(k)), None)
    histogram = _copy_histogram(previous[histogram_key]) if histogram_key else None
    files = {f["path"]: dict(f) for f in previous["allFiles"]} if previous.get("allFiles") is not None else None
    for action in actions:
        if "add" in action:
            add = action["add"]
            if add.get("deletionVector"):
                return None
            size += int(add["size"])
            count += 1
            if histogram is not None:
                _histogram_move(histogram, int(add["size"]), +1)
            if files is not None:
                files[add["path"]] = {**add, "dataChange": False}
        elif "remove" in action:
            remove = action["remove"]
            if remove.get("deletionVector") or not remove.get("extendedFileMetadata") or remove.get("size") is None:
                return None  # Delta too falls back to reconstruction (ENCOUNTERED_REMOVE_FILE_MISSING_SIZE)
            size -= int(remove["size"])
            count -= 1
            if histogram is not None:
                _histogram_move(histogram, int(remove["size"]), -1)
            if files is not None and _drop_file(files, remove["path"]) is None:
                files = None  # a path we cannot match: leave the list out rather than guess
        elif "metaData" in action:
            metadata = action["metaData"]
        elif "protocol" in action:
            protocol = action["protocol"]
        elif "domainMetadata" in action or ("commitInfo" in action and "inCommitTimestamp" in action["commitInfo"]):
            return None
    if _uses_deletion_vectors(protocol) or _in_commit_timestamps(metadata) or count < 0 or size < 0:
        return None
    if files is not None and (len(files) != count or len(files) > ALL_FILES_THRESHOLD):
        files = None
    result: dict[str, Any] = {
        "txnId": str(new_uuid()),
        "tableSizeBytes": size,
        "numFiles": count,
        "numMetadata": 1,
        "numProtocol": 1,
        "metadata": metadata,
        "protocol": protocol,
    }
    if previous.get("domainMetadata") is not None:
        result["domainMetadata"] = previous["domainMetadata"]
    if histogram is not None and histogram_key is not None:
        result[histogram_key] = histogram
    if files is not None:
        result["allFiles"] = list(files.values())
    return result


def _copy_histogram(histogram: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "sortedBinBoundaries": list(histogram["sortedBinBoundaries"]),
        "fileCounts": list(histogram["fileCounts"]),
        "totalBytes": list(histogram["totalBytes"]),
    }


def _histogram_move(histogram: dict[str, Any], size: int, sign: int) -> None:
    # FileSizeHistogram.getBinIndex: the largest boundary <= size.
    index = bisect.bisect_right(histogram["sortedBinBoundaries"], size) - 1
    histogram["fileCounts"][index] += sign
    histogram["totalBytes"][index] += sign * size


def _drop_file(files: dict[str, Any], path: str) -> Any:
    for candidate in (path, unquote(path)):
        if candidate in files:
            return files.pop(candidate)
    for known in list(files):
        if unquote(known) == unquote(path):
            return files.pop(known)
    return None


def _uses_deletion_vectors(protocol: Mapping[str, Any]) -> bool:
    return "deletionVectors" in (protocol.get("writerFeatures") or ())


def _in_commit_timestamps(metadata: Mapping[str, Any]) -> bool:
    configuration = metadata.get("configuration") or {}
    return str(configuration.get("delta.enableInCommitTimestamps", "false")).lower() == "true"


def checksum_disagreement(
    checksum: Mapping[str, Any],
    *,
    num_files: int,
    table_size_bytes: int,
    metadata: Mapping[str, Any],
    protocol: Mapping[str, Any],
) -> str | None:
    """How ``checksum`` (a version's ``.crc``) disagrees with the state of that version as the
    log itself gives it (live file count and bytes, the ``metaData`` and ``protocol``
    actions in force), or None when it agrees. Pure.

    Readers must not trust a checksum that disagrees (it was damaged, or derived from one
    that was). Delta Spark compares a checksum with its own state reconstruction the same
    way and reports a mismatch as corruption (``ValidateChecksum.validateChecksum`` in
    delta-io/delta ``Checksum.scala``). Compared: ``numFiles``,
    ``tableSizeBytes``, the metadata's id, partition columns and configuration, the
    protocol's versions and features.
    """
    try:
        if int(checksum["numFiles"]) != num_files:
            return f"numFiles {checksum['numFiles']}, the log has {num_files} live files"
        if int(checksum["tableSizeBytes"]) != table_size_bytes:
            return f"tableSizeBytes {checksum['tableSizeBytes']}, the log's live files hold {table_size_bytes}"
    except (KeyError, TypeError, ValueError) as exc:
        return f"not a checksum ({type(exc).__name__}: {exc})"
    theirs = checksum.get("metadata")
    if isinstance(theirs, Mapping):
        for key in ("id", "partitionColumns"):
            if theirs.get(key) != metadata.get(key):
                return f"metadata {key} {theirs.get(key)!r}, the log has {metadata.get(key)!r}"
        if not isinstance(theirs.get("configuration") or {}, Mapping):
            return "its metadata configuration is not an object"
        if _configuration(theirs) != _configuration(metadata):
            return "metadata configuration differs from the log's"
    elif theirs is not None:
        return "its metadata is not an object"
    if checksum.get("protocol") is not None and _protocol(checksum["protocol"]) != _protocol(protocol):
        return f"protocol {checksum['protocol']}, the log has {dict(protocol)}"
    return None


def _configuration(metadata: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (metadata.get("configuration") or {}).items() if v is not None}


def _protocol(protocol: Any) -> tuple[Any, ...]:
    if not isinstance(protocol, Mapping):
        return (protocol,)
    return (
        protocol.get("minReaderVersion"),
        protocol.get("minWriterVersion"),
        frozenset(protocol.get("readerFeatures") or ()),
        frozenset(protocol.get("writerFeatures") or ()),
    )
