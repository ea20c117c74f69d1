"""Reading the log table's Delta log from Python, without Spark.

Snapshots (live files with their statistics, table properties) come from
delta-rs (the ``deltalake`` package), single commit files are read with
fsspec (s3fs on S3: :mod:`engine.object_store`). Both are cheap next to a
Spark job and work where no SparkSession exists (Python data source workers). Writing always goes through Delta's
JVM transaction (:mod:`engine.delta_jvm`).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import pyarrow as pa
from deltalake import DeltaTable

from engine.log_view import CommitChanges, LogView, apply_commit, parse_commit, view_from_snapshot
from engine.object_store import delta_storage_options, filesystem, is_s3, python_uri
from engine.offsets import FileStats, TopicPartition


def normalize_uri(path: str) -> str:
    """An absolute local path; ``s3a://`` for any S3 scheme (Spark reaches S3 through
    Hadoop's S3A); other URIs unchanged."""
    parsed = urlparse(str(path))
    if parsed.scheme in ("", "file"):
        local = parsed.path if parsed.scheme == "file" else str(path)
        return os.path.abspath(os.path.expanduser(local))
    if is_s3(str(path)):
        return "s3a://" + str(path).split("://", 1)[1].rstrip("/")
    return str(path)


@dataclass(frozen=True)
class Snapshot:
    version: int
    properties: dict[str, str]
    files: list[FileStats]


class DeltaLogReader:
    """Reads one table's log. Thread-safe."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = normalize_uri(uri)
        self._storage_options = storage_options or delta_storage_options(self.uri)
        self._fs, self._root = filesystem(self.uri)
        self._lock = threading.Lock()
        self._table: DeltaTable | None = None

    def _commit_path(self, version: int) -> str:
        return f"{self._root.rstrip('/')}/_delta_log/{version:020d}.json"

    def read_commit_lines(self, version: int) -> list[str] | None:
        """The JSON lines of commit ``version``, or None if that file is gone (log cleanup)."""
        try:
            with self._fs.open(self._commit_path(version), "rt", encoding="utf-8") as handle:
                return handle.read().splitlines()
        except FileNotFoundError:
            return None

    def commit_time(self, version: int) -> int | None:
        """When commit ``version`` was made (ms; its commitInfo timestamp, else the file's
        modification time), or None if its file is gone."""
        lines = self.read_commit_lines(version)
        if lines is None:
            return None
        for line in lines:
            if line.startswith('{"commitInfo"'):
                info = json.loads(line)["commitInfo"]
                stamp = info.get("inCommitTimestamp") or info.get("timestamp")
                if stamp is not None:
                    return int(stamp)
        modified = self._fs.modified(self._commit_path(version))
        return int(modified.timestamp() * 1000)

    def missing_files(self, paths: list[str]) -> list[str]:
        """Those of the table-relative data file ``paths`` that no longer exist (VACUUM)."""
        root = self._root.rstrip("/")
        return [p for p in paths if not self._fs.exists(f"{root}/{unquote(p)}")]

    def read_commit(self, version: int) -> CommitChanges | None:
        lines = self.read_commit_lines(version)
        return None if lines is None else parse_commit(lines)

    def _load_locked(self, version: int | None) -> DeltaTable:
        if self._table is None:
            self._table = DeltaTable(python_uri(self.uri), version=version, storage_options=self._storage_options)
        elif version is None:
            self._table.update_incremental()
        elif self._table.version() != version:
            self._table.load_as_version(version)
        return self._table

    def latest_version(self) -> int:
        with self._lock:
            return self._load_locked(None).version()

    def properties(self) -> tuple[int, dict[str, str]]:
        """The latest version and its table properties (no file listing)."""
        with self._lock:
            table = self._load_locked(None)
            return table.version(), dict(table.metadata().configuration)

    def snapshot(self, version: int | None = None) -> Snapshot:
        """Live files and table properties at ``version`` (the latest when None)."""
        loaded, properties, actions = self.add_actions(version)
        return Snapshot(loaded, properties, files_from_add_actions(actions))

    def add_actions(self, version: int | None = None) -> tuple[int, dict[str, str], pa.Table]:
        """Version, table properties and delta-rs' flattened add actions (sizes, times, stats)."""
        with self._lock:
            table = self._load_locked(version)
            actions = pa.table(table.get_add_actions(flatten=True))
            return table.version(), dict(table.metadata().configuration), actions

    def transaction_version(self, app_id: str, version: int) -> int:
        """Delta's app transaction version of ``app_id`` at table ``version`` (-1 if none)."""
        with self._lock:
            found = self._load_locked(version).transaction_version(app_id)
            return -1 if found is None else int(found)

    def metadata_action(self, version: int) -> dict:
        """The table's Delta ``metaData`` action at ``version`` (as a commit file holds it)."""
        with self._lock:
            table = self._load_locked(version)
            meta = table.metadata()
            return {
                "id": meta.id,
                "name": meta.name,
                "description": meta.description,
                "format": {"provider": "parquet", "options": {}},
                "schemaString": table.schema().to_json(),
                "partitionColumns": list(meta.partition_columns),
                "configuration": dict(meta.configuration),
                "createdTime": meta.created_time,
            }

    def view(self, version: int) -> LogView:
        snap = self.snapshot(version)
        return view_from_snapshot(snap.version, snap.properties, snap.files)


# Reading more commit files than this to catch up is slower than a snapshot.
_MAX_TAIL = 200


class ViewTracker:
    """A writer's :class:`LogView`, moved forward by reading only the commits it lacks.

    Not thread-safe: each writer holds its own, under its own lock.
    """

    def __init__(self, reader: DeltaLogReader) -> None:
        self.reader = reader
        self._view: LogView | None = None

    def at(self, version: int) -> LogView:
        """The view brought to ``version``."""
        view = self._view
        if view is not None and (view.version > version or version - view.version > _MAX_TAIL):
            view = None
        if view is not None:
            for v in range(view.version + 1, version + 1):
                changes = self.reader.read_commit(v)
                if changes is None:
                    view = None
                    break
                view = apply_commit(view, v, changes)
        if view is None:
            view = self.reader.view(version)
        self._view = view
        return view

    def applied_own_commit(self, read_version: int, version: int, changes: CommitChanges) -> None:
        """Apply the writer's own commit, when nobody committed in between (else re-read later)."""
        if self._view is not None and self._view.version == read_version and version == read_version + 1:
            self._view = apply_commit(self._view, version, changes)


def files_from_add_actions(actions: pa.Table) -> list[FileStats]:
    """FileStats for each row of delta-rs' flattened add actions."""

    def column(name: str) -> list:
        return add_action_column(actions, name)

    paths = column("path")
    topics = column("partition.topic")
    partitions = column("partition.partition")
    records = column("num_records")
    lows = column("min.offset")
    highs = column("max.offset")
    return [
        FileStats(path, TopicPartition(topic, int(partition)), nrec, lo, hi)
        for path, topic, partition, nrec, lo, hi in zip(paths, topics, partitions, records, lows, highs, strict=True)
    ]


def add_action_column(actions: pa.Table, name: str) -> list:
    """One column of delta-rs' flattened add actions as a list; all None when the table lacks it
    (no file has that statistic or partition value)."""
    if name in actions.column_names:
        return actions.column(name).to_pylist()
    return [None] * actions.num_rows
