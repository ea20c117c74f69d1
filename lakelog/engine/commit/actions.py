"""Delta log actions as typed values, with the one encoder and decoder of commit files.

A commit file (``_delta_log/<version>.json``) is newline-delimited JSON,
one action per line (Delta protocol, "Delta Log Entries"). lakelog reads
every action kind the protocol defines and writes ``commitInfo``,
``protocol``, ``metaData``, ``add``, ``remove`` and ``txn``. Fields this
module does not model are kept in ``extra`` and written back unchanged, so a
decoded action re-encodes to the same JSON object.

Everything here is pure: bytes in, values out, and back.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any
from urllib.parse import unquote

from lakelog.engine.offsets import FileStats
from lakelog.engine.topics import TopicPartition


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _set_optional(body: dict[str, Any], **fields: Any) -> None:
    """Put the fields that are set into an action's JSON (absent fields stay absent)."""
    for name, value in fields.items():
        if value is not None:
            body[name] = dict(value) if isinstance(value, Mapping) else value


def _without(body: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    names = set(known)
    return {k: v for k, v in body.items() if k not in names}


@dataclass(frozen=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            body["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            body["writerFeatures"] = list(self.writer_features)
        return {"protocol": body}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Protocol:
        readers, writers = body.get("readerFeatures"), body.get("writerFeatures")
        return cls(
            int(body["minReaderVersion"]),
            int(body["minWriterVersion"]),
            None if readers is None else tuple(readers),
            None if writers is None else tuple(writers),
        )


_METADATA_FIELDS = ("id", "name", "description", "format", "schemaString", "partitionColumns", "configuration")


@dataclass(frozen=True)
class Metadata:
    id: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    created_time: int | None = None
    name: str | None = None
    description: str | None = None
    format: Mapping[str, Any] = field(default_factory=lambda: {"provider": "parquet", "options": {}})
    extra: Mapping[str, Any] = field(default_factory=dict)

    def with_configuration(self, configuration: Mapping[str, str]) -> Metadata:
        return Metadata(
            self.id,
            self.schema_string,
            self.partition_columns,
            dict(configuration),
            self.created_time,
            self.name,
            self.description,
            self.format,
            self.extra,
        )

    @cached_property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.schema_string)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            body["name"] = self.name
        if self.description is not None:
            body["description"] = self.description
        body["format"] = dict(self.format)
        body["schemaString"] = self.schema_string
        body["partitionColumns"] = list(self.partition_columns)
        body["configuration"] = dict(self.configuration)
        if self.created_time is not None:
            body["createdTime"] = self.created_time
        body.update(self.extra)
        return {"metaData": body}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Metadata:
        return cls(
            str(body["id"]),
            str(body["schemaString"]),
            tuple(body.get("partitionColumns") or ()),
            {str(k): str(v) for k, v in (body.get("configuration") or {}).items() if v is not None},
            body.get("createdTime"),
            body.get("name"),
            body.get("description"),
            body.get("format") or {"provider": "parquet", "options": {}},
            _without(body, (*_METADATA_FIELDS, "createdTime")),
        )


def tp_of(path: str, partition_values: Mapping[str, Any] | None) -> TopicPartition | None:
    """The (topic, partition) a data file belongs to: its partition values, else its
    Hive-style directories (``topic=t/partition=3/...``); None if neither tells."""
    values = partition_values or {}
    if values.get("topic") is not None and values.get("partition") is not None:
        return TopicPartition(str(values["topic"]), int(values["partition"]))
    parts = dict(p.split("=", 1) for p in unquote(path).split("/")[:-1] if "=" in p)
    if "topic" in parts and "partition" in parts:
        try:
            return TopicPartition(parts["topic"], int(parts["partition"]))
        except ValueError:
            return None
    return None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def stats_time(ms: int) -> str:
    """A stats timestamp as Delta writes them (``2024-01-02T03:04:05.006Z``); read back exactly
    by :meth:`AddFile.file_stats`."""
    when = _EPOCH + timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _stats_time_ms(value: Any) -> int | None:
    """A stats timestamp (``2024-01-02T03:04:05.006Z``) in ms since the epoch, counted in
    integers: ``timestamp() * 1000`` went through a float and came out 1 ms low for ~0.6% of
    them, so a file's newest record could look older than it is. A string without a zone is
    local time, as ``timestamp()`` read it."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when.astimezone(UTC) - _EPOCH) // _MILLISECOND


_ADD_FIELDS = ("path", "partitionValues", "size", "modificationTime", "dataChange", "stats", "tags", "deletionVector")


@dataclass(frozen=True)
class AddFile:
    path: str
    partition_values: Mapping[str, str | None]
    size: int
    modification_time: int
    data_change: bool
    stats: str | None = None
    tags: Mapping[str, str] | None = None
    deletion_vector: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        _set_optional(body, stats=self.stats, tags=self.tags, deletionVector=self.deletion_vector)
        body.update(self.extra)
        return {"add": body}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> AddFile:
        return cls(
            str(body["path"]),
            dict(body.get("partitionValues") or {}),
            int(body.get("size") or 0),
            int(body.get("modificationTime") or 0),
            bool(body.get("dataChange", True)),
            body.get("stats"),
            body.get("tags"),
            body.get("deletionVector"),
            _without(body, _ADD_FIELDS),
        )

    @cached_property
    def tp(self) -> TopicPartition | None:
        return tp_of(self.path, self.partition_values)

    def file_stats(self) -> FileStats:
        """What the file's statistics say about its offsets and timestamps."""
        tp = self.tp
        if tp is None:
            raise ValueError(f"data file {self.path} has no topic/partition partition values")
        stats: dict[str, Any] = {}
        if self.stats:
            try:
                stats = json.loads(self.stats)
            except ValueError:
                stats = {}
        lows, highs = stats.get("minValues") or {}, stats.get("maxValues") or {}
        return FileStats(
            self.path,
            tp,
            stats.get("numRecords"),
            lows.get("offset"),
            highs.get("offset"),
            self.data_change,
            size=self.size,
            modification_time=self.modification_time,
            min_timestamp_ms=_stats_time_ms(lows.get("timestamp")),
            max_timestamp_ms=_stats_time_ms(highs.get("timestamp")),
        )


_REMOVE_FIELDS = (
    "path",
    "deletionTimestamp",
    "dataChange",
    "extendedFileMetadata",
    "partitionValues",
    "size",
    "stats",
    "tags",
    "deletionVector",
)


@dataclass(frozen=True)
class RemoveFile:
    path: str
    deletion_timestamp: int | None
    data_change: bool
    extended_file_metadata: bool | None = None
    partition_values: Mapping[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: Mapping[str, str] | None = None
    deletion_vector: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"path": self.path}
        if self.deletion_timestamp is not None:
            body["deletionTimestamp"] = self.deletion_timestamp
        body["dataChange"] = self.data_change
        _set_optional(
            body,
            extendedFileMetadata=self.extended_file_metadata,
            partitionValues=self.partition_values,
            size=self.size,
            stats=self.stats,
            tags=self.tags,
            deletionVector=self.deletion_vector,
        )
        body.update(self.extra)
        return {"remove": body}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> RemoveFile:
        return cls(
            str(body["path"]),
            body.get("deletionTimestamp"),
            bool(body.get("dataChange", True)),
            body.get("extendedFileMetadata"),
            body.get("partitionValues"),
            body.get("size"),
            body.get("stats"),
            body.get("tags"),
            body.get("deletionVector"),
            _without(body, _REMOVE_FIELDS),
        )

    @cached_property
    def tp(self) -> TopicPartition | None:
        return tp_of(self.path, self.partition_values)

    @classmethod
    def of(cls, add: AddFile | FileStats, deletion_ms: int, *, data_change: bool) -> RemoveFile:
        """The remove of a live file, with its size, partition values and statistics
        (Delta allows stats on a remove; history reads the offsets a commit removed)."""
        if isinstance(add, AddFile):
            return cls(add.path, deletion_ms, data_change, True, dict(add.partition_values), add.size, add.stats)
        stats = None
        if add.has_offset_stats:
            stats = _compact(
                {
                    "numRecords": add.num_records,
                    "minValues": {"offset": add.min_offset},
                    "maxValues": {"offset": add.max_offset},
                }
            )
        values = {"topic": add.tp.topic, "partition": str(add.tp.partition)}
        return cls(add.path, deletion_ms, data_change, True, values, add.size, stats)


@dataclass(frozen=True)
class Txn:
    """Delta's application transaction (``txn``): the version ``app_id`` reached."""

    app_id: str
    version: int
    last_updated: int | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            body["lastUpdated"] = self.last_updated
        return {"txn": body}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Txn:
        return cls(str(body["appId"]), int(body["version"]), body.get("lastUpdated"))


@dataclass(frozen=True)
class CommitInfo:
    """Provenance of a commit. Free-form in the protocol; ``values`` keeps every field."""

    values: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"commitInfo": dict(self.values)}

    @property
    def txn_id(self) -> str | None:
        return self.values.get("txnId")

    @property
    def operation(self) -> str | None:
        return self.values.get("operation")

    @property
    def timestamp(self) -> int | None:
        stamp = self.values.get("inCommitTimestamp", self.values.get("timestamp"))
        return None if stamp is None else int(stamp)

    @property
    def tags(self) -> Mapping[str, str]:
        return self.values.get("tags") or {}


@dataclass(frozen=True)
class DomainMetadata:
    domain: str
    configuration: str
    removed: bool

    def to_json(self) -> dict[str, Any]:
        return {"domainMetadata": {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}}


@dataclass(frozen=True)
class OtherAction:
    """An action kind lakelog only passes through (``cdc``, ``checkpointMetadata``, ...)."""

    kind: str
    body: Any

    def to_json(self) -> dict[str, Any]:
        return {self.kind: self.body}


Action = Protocol | Metadata | AddFile | RemoveFile | Txn | CommitInfo | DomainMetadata | OtherAction


def decode_action(obj: Mapping[str, Any]) -> Action:
    if not isinstance(obj, Mapping) or len(obj) != 1:
        raise ValueError(f"a Delta action line holds exactly one action, got {str(obj)[:80]}")
    ((kind, body),) = obj.items()
    if kind == "add":
        return AddFile.from_json(body)
    if kind == "remove":
        return RemoveFile.from_json(body)
    if kind == "txn":
        return Txn.from_json(body)
    if kind == "metaData":
        return Metadata.from_json(body)
    if kind == "protocol":
        return Protocol.from_json(body)
    if kind == "commitInfo":
        return CommitInfo(dict(body))
    if kind == "domainMetadata":
        return DomainMetadata(str(body["domain"]), str(body.get("configuration", "")), bool(body.get("removed")))
    return OtherAction(kind, body)


class CorruptCommitError(ValueError):
    """A commit file that is not newline-delimited JSON actions (truncated, overwritten)."""


@dataclass(frozen=True)
class Commit:
    """The actions of one commit file, in file order."""

    actions: tuple[Action, ...]

    @cached_property
    def commit_info(self) -> CommitInfo | None:
        return next((a for a in self.actions if isinstance(a, CommitInfo)), None)

    @cached_property
    def metadata(self) -> Metadata | None:
        return next((a for a in self.actions if isinstance(a, Metadata)), None)

    @cached_property
    def protocol(self) -> Protocol | None:
        return next((a for a in self.actions if isinstance(a, Protocol)), None)

    @cached_property
    def adds(self) -> tuple[AddFile, ...]:
        return tuple(a for a in self.actions if isinstance(a, AddFile))

    @cached_property
    def removes(self) -> tuple[RemoveFile, ...]:
        return tuple(a for a in self.actions if isinstance(a, RemoveFile))

    @cached_property
    def txns(self) -> dict[str, int]:
        return {a.app_id: a.version for a in self.actions if isinstance(a, Txn)}

    @cached_property
    def domain_metadata(self) -> tuple[DomainMetadata, ...]:
        return tuple(a for a in self.actions if isinstance(a, DomainMetadata))

    @property
    def txn_id(self) -> str | None:
        return None if self.commit_info is None else self.commit_info.txn_id

    def encode(self) -> bytes:
        return encode_actions(self.actions)


def decode_commit(data: bytes | str) -> Commit:
    """Parse a commit file. Raises CorruptCommitError for anything but UTF-8 JSON action lines,
    and for a file holding no action at all.

    An empty commit file is corruption (a file system that lost its contents, a
    truncation to zero), never "a commit that changed nothing": every writer of the
    log table writes at least a ``commitInfo`` (lakelog always does, and so do Delta
    Spark and delta-rs), and reading it as nothing would let a new commit take the
    offsets the lost one had acknowledged. Delta's protocol makes commit files
    newline-delimited JSON, and JSON text is UTF-8 (RFC 8259, section 8.1).
    """
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise CorruptCommitError(f"line {line} is not UTF-8 (byte {exc.start}: {exc.reason})") from exc
    else:
        text = data
    actions = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            actions.append(decode_action(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptCommitError(f"line {number} is not a Delta action: {exc}") from exc
    if not actions:
        raise CorruptCommitError("it holds no action (empty)" if not text.strip() else "it holds no action")
    sealed = actions[0].values.get(BODY_CRC32) if isinstance(actions[0], CommitInfo) else None
    if sealed is not None:
        raw = text.encode("utf-8") if isinstance(data, str) else bytes(data)
        body = raw[raw.index(b"\n") + 1 :]
        if zlib.crc32(body) != sealed:
            raise CorruptCommitError(
                f"its actions after the commitInfo do not match the CRC-32 the commitInfo holds "
                f"({len(actions) - 1} action(s), {len(body)} bytes): truncated or overwritten"
            )
    return Commit(tuple(actions))


# The commitInfo field holding the CRC-32 of the lines after it: lakelog writes its commitInfo
# first, so a file cut at a line boundary (which still parses) is told from a whole one.
BODY_CRC32 = "lakelogBodyCrc32"


def sealed_commit(info: CommitInfo, body: bytes) -> bytes:
    """The commit file of ``info`` followed by ``body`` (encoded actions), the commitInfo
    carrying the CRC-32 of ``body`` (:data:`BODY_CRC32`), which :func:`decode_commit` checks."""
    return encode_actions([CommitInfo({**info.values, BODY_CRC32: zlib.crc32(body)})]) + body


def encode_actions(actions: Sequence[Action]) -> bytes:
    """The commit file holding ``actions`` (one compact JSON object per line)."""
    return ("\n".join(_compact(a.to_json()) for a in actions) + "\n").encode("utf-8")
