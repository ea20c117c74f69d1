"""Appends committed by writing Delta commit files directly, for processes without a JVM.

The Python Data Source API runs a streaming source's ``commit`` and a sink's
``commit(messages, batchId)`` in a Python worker with no SparkSession, so
Delta's OptimisticTransaction is out of reach there. This module commits
the same way lakelog's JVM path does -- data files first, then one commit
file with ``commitInfo``, ``add`` and ``txn`` actions (Delta protocol,
"Delta Log Entries") -- with a stricter concurrency rule: an attempt that
read version V writes exactly ``V+1`` with put-if-absent, so *any*
concurrent commit makes it fail and re-plan from the new version (no
conflict-checker reasoning at all). JVM writers still see these commits as
ordinary winning commits that added files to the partitions they read, so
the offset invariant holds across both kinds of writer.

Put-if-absent (:func:`engine.object_store.put_if_absent`) is ``os.link`` of
a fully written temporary file on a local path, the same primitive as
``io.lakelog.storage.AtomicLocalLogStore``, and on S3 a conditional
``PutObject`` (``If-None-Match: *``), the same request
``io.lakelog.storage.ConditionalS3LogStore`` makes for JVM writers. So the
rule "exactly one writer gets version V+1" holds across processes, drivers
and the two kinds of writer on both.

delta-rs (``deltalake``) has a commit API, but its appends are blind (no
read predicate): two of them into one partition would both land with the
same offsets. That is why this module does not use it.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from engine.commit import (
    AppendBatch,
    AppendResult,
    AppTransaction,
    DataWriteError,
    RetryPolicy,
    TopicChange,
    check_attempt,
    retries_exhausted,
)
from engine.commit_file import put_commit
from engine.commit_info import append_tags, user_metadata
from engine.data_files import DataFile, DataFileWriter
from engine.delta_log import DeltaLogReader, ViewTracker, normalize_uri
from engine.errors import InconsistentWriteError, StoreError
from engine.log_view import CommitChanges, LogView
from engine.object_store import delta_storage_options, is_s3, python_uri
from engine.offsets import TopicPartition, counts_by_partition, plan_ranges, verify_written
from engine.partition_reader import PartitionReader
from engine.topics import TopicMetadata

log = logging.getLogger(__name__)

ENGINE_INFO = "lakelog-python-commit/1"


def commit_file_lines(
    *,
    read_version: int,
    files: Iterable[DataFile],
    app: AppTransaction | None,
    tags: Mapping[str, str],
    now_ms: int,
) -> list[str]:
    """The JSON lines of an append's Delta commit file (commitInfo first, as Delta writes it)."""
    files = list(files)
    info = {
        "timestamp": now_ms,
        "operation": "WRITE",
        "operationParameters": {"mode": "Append"},
        "readVersion": read_version,
        "isolationLevel": "Serializable",
        "isBlindAppend": False,
        "operationMetrics": {
            "numFiles": str(len(files)),
            "numOutputRows": str(sum(f.stats.num_records or 0 for f in files)),
        },
        "userMetadata": user_metadata(tags),
        "tags": dict(tags),
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    lines = [json.dumps({"commitInfo": info}, separators=(",", ":"))]
    lines.extend(f.add_json for f in files)
    if app is not None:
        txn = {"appId": app.app_id, "version": app.version, "lastUpdated": now_ms}
        lines.append(json.dumps({"txn": txn}, separators=(",", ":")))
    return lines


class DirectCommitter:
    """Commits :class:`engine.commit.AppendBatch` es whose ``build`` returns Arrow tables.

    Same contract as :meth:`engine.commit.LogWriter.append`: dense offsets
    after each partition's end, bounded retries (CommitConflictError /
    DeliveryTimeoutError when used up, nothing committed), FatalError for
    refused batches. A commit is a single ``link`` call, so its outcome is
    never unknown to a process that survives it. One thread at a time.
    """

    def __init__(self, uri: str, client_id: str, *, seed: int | None = None) -> None:
        self.uri = normalize_uri(uri)
        if "://" in self.uri and not is_s3(self.uri):
            raise StoreError(
                f"committing from a Python worker needs put-if-absent, which lakelog has for local paths "
                f"and S3 only; {self.uri} is neither"
            )
        self.client_id = client_id
        self.reader = DeltaLogReader(self.uri)
        self._views = ViewTracker(self.reader)
        self._files = DataFileWriter(self.uri)
        self._records = PartitionReader(self.uri)
        self._log_dir = f"{self.uri.rstrip('/')}/_delta_log"
        self._rng = random.Random(seed)

    def latest_view(self) -> LogView:
        return self._views.at(self.reader.latest_version())

    def app_version(self, view: LogView, app_id: str) -> int:
        """The Delta app transaction version of ``app_id`` as of ``view`` (-1 if none)."""
        if app_id in view.app_versions:
            return view.app_versions[app_id]
        return self.reader.transaction_version(app_id, view.base_version)

    def append(self, batch: AppendBatch, policy: RetryPolicy) -> AppendResult:
        """Commit ``batch``; see the class docstring for what is guaranteed and raised."""
        started = time.monotonic()
        conflicts = 0
        while True:
            view = self.latest_view()
            app = batch.app_transaction
            committed_app = -1 if app is None else self.app_version(view, app.app_id)
            app, expected, nothing = check_attempt(batch, committed_app, view)
            if nothing:
                return AppendResult(None, {}, 0, conflicts + 1)
            ends = self._ends_for(view, batch.target_partitions(view))
            append_time_ms = int(time.time() * 1000)
            rows = batch.build(ends, view.topics, append_time_ms)
            if not isinstance(rows, pa.Table):
                raise TypeError("a direct commit writes Arrow tables only")
            try:
                files = self._files.write(rows)
            except OSError as exc:
                raise DataWriteError(f"writing data files failed, nothing was committed: {exc}") from exc
            stats = [f.stats for f in files]
            counts = counts_by_partition(stats)
            if expected is not None and counts != {tp: n for tp, n in expected.items() if n}:
                raise InconsistentWriteError(f"planned {dict(expected)} records per partition, files hold {counts}")
            plan = plan_ranges(ends, counts)
            verify_written(plan, stats)
            tags = append_tags(batch.operation, self.client_id, plan)
            lines = commit_file_lines(read_version=view.version, files=files, app=app, tags=tags, now_ms=append_time_ms)
            version = view.version + 1
            try:
                landed = put_commit(self._log_dir, version, lines)
            except OSError as exc:
                self._files.discard(files)
                raise DataWriteError(f"writing commit {version} failed, nothing was committed: {exc}") from exc
            if not landed:
                self._files.discard(files)
                conflicts += 1
                self._back_off(policy, conflicts, started)
                continue
            own = CommitChanges(None, tuple(stats), {app.app_id: app.version} if app else {})
            self._views.applied_own_commit(view.version, version, own)
            self._maybe_checkpoint(version, view.properties)
            return AppendResult(version, plan, append_time_ms, conflicts + 1)

    def change_topics(
        self, plan: Callable[[dict[str, TopicMetadata], dict[str, str]], TopicChange], policy: RetryPolicy
    ) -> int:
        """Commit a topic metadata change (no deletes) planned against the latest topics;
        ``plan`` runs again after each conflict. Returns the new version."""
        started = time.monotonic()
        conflicts = 0
        while True:
            view = self.latest_view()
            change = plan(dict(view.topics), dict(view.properties))
            if change.delete_topic is not None:
                raise StoreError("deleting a topic needs Spark (LogStore.delete_topic)")
            metadata = self.reader.metadata_action(view.version)
            metadata["configuration"] = dict(change.properties)
            info = {
                "timestamp": int(time.time() * 1000),
                "operation": "SET TBLPROPERTIES",
                "operationParameters": {"properties": json.dumps(change.properties)},
                "readVersion": view.version,
                "isolationLevel": "Serializable",
                "isBlindAppend": True,
                "tags": dict(change.tags),
                "engineInfo": ENGINE_INFO,
                "txnId": str(uuid.uuid4()),
            }
            lines = [json.dumps({"commitInfo": info}), json.dumps({"metaData": metadata})]
            version = view.version + 1
            if put_commit(self._log_dir, version, lines):
                self._views.applied_own_commit(view.version, version, CommitChanges(dict(change.properties), ()))
                return version
            conflicts += 1
            self._back_off(policy, conflicts, started)

    def _ends_for(self, view: LogView, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        ends = {tp: view.end_offset(tp) for tp in tps}
        unknown = [tp for tp in tps if tp in view.unknown_ends]
        if unknown:
            files = self.reader.snapshot(view.version).files
            for tp in unknown:
                offsets = self._records.read(files, tp, 0).column("offset")
                ends[tp] = int(offsets[-1].as_py()) + 1 if len(offsets) else 0
        return ends

    def _back_off(self, policy: RetryPolicy, conflicts: int, started: float) -> None:
        if policy.exhausted(conflicts, started, time.monotonic()):
            raise retries_exhausted(policy, conflicts, started)
        time.sleep(policy.delay_s(conflicts, self._rng))

    def _maybe_checkpoint(self, version: int, properties: Mapping[str, Any]) -> None:
        # JVM writers checkpoint as part of their commit; without one every
        # reader would replay an ever longer JSON tail after Python commits.
        interval = int(properties.get("delta.checkpointInterval", 10) or 10)
        if version % interval:
            return
        try:
            from deltalake import DeltaTable

            DeltaTable(
                python_uri(self.uri), version=version, storage_options=delta_storage_options(self.uri)
            ).create_checkpoint()
        except Exception as exc:  # a later commit's checkpoint covers it
            log.warning("checkpoint at version %s failed (the log stays readable): %s", version, exc)
