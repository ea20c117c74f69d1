"""Committing a maintenance step: removes and adds in one Delta commit, beside live writers.

Put-if-absent at the read version + 1, as :mod:`engine.direct_commit` does
(``link(2)`` locally, S3's ``If-None-Match: *`` on S3: :mod:`engine.object_store`).
When another commit took that version, the step is *rebased* instead of
redone, as Delta's own OPTIMIZE rebases on its conflict checker: the
commits that won are read, and the step is committed at the next version
unless one of them removed a file the step removes (another maintenance
run or a topic deletion won: :class:`MaintenanceConflictError`, nothing of
this step is visible) or changed the topic's identity. Appends by producers
and sinks never conflict with maintenance: they only add files after the
files maintenance touches, and maintenance never removes a partition's
newest file.

JVM writers see a maintenance commit as an ordinary winning commit: its
removes are not in their read set (they read partition predicates, not
files), so an OPTIMIZE (``dataChange=false``) passes their conflict check;
compaction's rewritten files are data changes in the partitions they read,
so such a writer retries once within its bound (Delta's
ConflictChecker, ``checkForAddedFilesThatShouldHaveBeenReadByCurrentTxn``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.files import LiveFile
from engine.commit import DataWriteError, RetryPolicy, retries_exhausted
from engine.commit_file import put_commit
from engine.commit_info import TAG_CLIENT, TAG_DETAILS, TAG_OPERATION, TAG_TOPIC
from engine.data_files import DataFile, DataFileWriter
from engine.delta_log import DeltaLogReader
from engine.direct_commit import ENGINE_INFO
from engine.errors import MaintenanceConflictError, StoreError
from engine.object_store import is_s3
from engine.topics import topics_from_properties

# Delta's own names where Delta has the operation, so DESCRIBE HISTORY reads naturally.
DELTA_OPERATIONS = {"optimize": "OPTIMIZE", "compact": "LOG COMPACTION", "retention": "DELETE"}


@dataclass
class MaintenanceStep:
    """One step on one topic: files it removes, files it adds, and what it tells history."""

    operation: str  # optimize | compact | retention
    topic: str
    topic_id: str
    removed: Sequence[LiveFile]
    added: Sequence[DataFile]
    details: dict = field(default_factory=dict)
    # The removed files grouped as they were replaced (one new file per group).
    bins: list[tuple[LiveFile, ...]] = field(default_factory=list)

    @property
    def data_change(self) -> bool:
        return self.operation != "optimize"


def step_lines(step: MaintenanceStep, read_version: int, client_id: str, now_ms: int) -> list[str]:
    """The JSON lines of the step's Delta commit file (commitInfo first)."""
    tags = {
        TAG_OPERATION: step.operation,
        TAG_CLIENT: client_id,
        TAG_TOPIC: step.topic,
        TAG_DETAILS: json.dumps(step.details, sort_keys=True, separators=(",", ":")),
    }
    info = {
        "timestamp": now_ms,
        "operation": DELTA_OPERATIONS[step.operation],
        "operationParameters": {"predicate": json.dumps([f"topic = '{step.topic}'"]), "zOrderBy": "[]"},
        "readVersion": read_version,
        "isolationLevel": "SnapshotIsolation",
        "isBlindAppend": False,
        "operationMetrics": {
            "numRemovedFiles": str(len(step.removed)),
            "numAddedFiles": str(len(step.added)),
            "numRemovedBytes": str(sum(f.size for f in step.removed)),
        },
        "userMetadata": json.dumps(tags, sort_keys=True, separators=(",", ":")),
        "tags": tags,
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    lines = [json.dumps({"commitInfo": info}, separators=(",", ":"))]
    lines.extend(json.dumps(f.remove_action(now_ms, data_change=step.data_change)) for f in step.removed)
    lines.extend(f.add_json for f in step.added)
    return lines


def conflict_in(lines: Sequence[str], step: MaintenanceStep) -> str | None:
    """Why a winning commit (its JSON lines) invalidates ``step``, or None if the step may land after it."""
    removed = {f.path for f in step.removed}
    for line in lines:
        if not line.strip():
            continue
        action = json.loads(line)
        if "remove" in action and action["remove"]["path"] in removed:
            return f"it removed {action['remove']['path']}"
        if "metaData" in action:
            topics = topics_from_properties(action["metaData"].get("configuration") or {})
            topic = topics.get(step.topic)
            if topic is None or topic.topic_id != step.topic_id:
                return f"it deleted or re-created topic {step.topic!r}"
    return None


def commit_step(
    uri: str,
    reader: DeltaLogReader,
    step: MaintenanceStep,
    read_version: int,
    *,
    client_id: str,
    policy: RetryPolicy,
    files: DataFileWriter | None = None,
) -> int:
    """Commit ``step`` planned at ``read_version``; returns the version it landed at.

    Raises MaintenanceConflictError when a concurrent commit removed one of
    the step's files or replaced its topic (the step's new files are deleted
    again; nothing is visible), CommitConflictError / DeliveryTimeoutError
    when versions kept being taken past ``policy``.
    """
    if "://" in uri and not is_s3(uri):
        raise StoreError(
            f"maintenance commits need put-if-absent, which lakelog has for local paths and S3 only; {uri} is neither"
        )
    log_dir = f"{uri.rstrip('/')}/_delta_log"
    started = time.monotonic()
    attempts = 0
    version = read_version + 1
    try:
        while True:
            now_ms = int(time.time() * 1000)
            lines = step_lines(step, version - 1, client_id, now_ms)
            try:
                if put_commit(log_dir, version, lines):
                    return version
            except OSError as exc:
                raise DataWriteError(f"writing commit {version} failed, nothing was committed: {exc}") from exc
            attempts += 1
            # Read the winners straight from their files up to the first free
            # version: a cached snapshot could lag and hide one.
            while (lines := reader.read_commit_lines(version)) is not None:
                reason = conflict_in(lines, step)
                if reason is not None:
                    raise MaintenanceConflictError(
                        f"{step.operation} of topic {step.topic!r} lost to commit {version}: {reason}; "
                        "nothing of it was committed",
                        attempts=attempts,
                    )
                version += 1
            if policy.exhausted(attempts, started, time.monotonic()):
                raise retries_exhausted(policy, attempts, started)
            # No backoff: the step was rebased, not refused; waiting only lets
            # more appends take the next version first.
    except BaseException:
        if files is not None:
            files.discard(list(step.added))
        raise
