"""Delta's per-version checksum file (``_delta_log/<version>.crc``) for commits lakelog writes itself.

Delta (the JVM) writes ``N.crc`` next to every commit it makes: table size,
file count, protocol, metadata and, for small tables, the file list. A
Snapshot at version N with a ``.crc`` takes protocol and metadata from it;
without one, Delta reconstructs them with a Spark job over the log
(``Snapshot.protocolMetadataICTAndLMCReconstruction``), which costs seconds
-- measured 2.4-7 s against about 1 s for a DataFrame append after a commit
lakelog wrote from Python (the streaming sink, ``format("lakelog")`` batch
writes, maintenance). And Delta derives each new ``.crc`` from the previous
one, so one missing file breaks the chain for every later JVM commit until
some commit reconstructs the state.

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
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from engine.object_store import filesystem, put_if_absent

log = logging.getLogger(__name__)

# Delta's default spark.databricks.delta.allFilesInCrc.thresholdNumFiles.
ALL_FILES_THRESHOLD = 50
_HISTOGRAM_KEYS = ("fileSizeHistogram", "histogramOpt")  # spec name, legacy Delta-Spark name


def checksum_name(version: int) -> str:
    return f"{version:020d}.crc"


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
        "txnId": str(uuid.uuid4()),
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


def write_checksum(log_dir: str, version: int, lines: Sequence[str]) -> bool:
    """After commit ``version`` (its file's ``lines``) landed: write its ``.crc`` if the
    previous version has one. Never raises -- a checksum is an optimization, the commit
    stands without it. True if written."""
    try:
        fs, root = filesystem(log_dir)
        try:
            with fs.open(f"{root}/{checksum_name(version - 1)}", "rb") as handle:
                previous = json.loads(handle.read().decode().strip())
        except FileNotFoundError:
            return False
        checksum = next_checksum(previous, [json.loads(line) for line in lines if line.strip()])
        if checksum is None:
            return False
        data = (json.dumps(checksum, separators=(",", ":")) + "\n").encode()
        return put_if_absent(log_dir, checksum_name(version), data)
    except Exception as exc:  # an optimization must not fail a landed commit
        log.warning("could not write %s/%s: %s", log_dir, checksum_name(version), exc)
        return False
