"""A writer's view of the log: topics and end offsets as of one Delta version.

Built once from a snapshot (file statistics), then moved forward commit by
commit from the commits' own actions, so a writer that is the only one
appending pays for no scan at all: after its own commit it applies its own
actions, and after other writers' commits it reads just their commit files.

End offsets only move forward: a partition's end offset is one past the
largest offset any data file ever added to it. Maintenance must therefore
never remove the file holding a partition's last offset (Kafka never deletes
the active segment either), except when the whole topic is deleted -- which
is a metadata change that resets the topic here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from engine.offsets import FileStats, TopicPartition, partition_bounds
from engine.topics import TopicMetadata, topics_from_properties


@dataclass(frozen=True)
class CommitChanges:
    """What one commit did that matters to end offsets and topic metadata."""

    properties: Mapping[str, str] | None  # new table configuration, if metadata changed
    added: tuple[FileStats, ...]  # files added with dataChange=true
    app_versions: Mapping[str, int] = field(default_factory=dict)  # Delta ``txn`` actions: appId -> version


@dataclass(frozen=True)
class LogView:
    version: int
    properties: Mapping[str, str]
    topics: Mapping[str, TopicMetadata]
    end_offsets: Mapping[TopicPartition, int]
    # Partitions with a data file lacking offset statistics: their end offset
    # must be computed from the data before anything is appended to them.
    unknown_ends: frozenset[TopicPartition] = field(default_factory=frozenset)
    # The snapshot the view was built from, and the app transaction versions
    # set by the commits applied since: a version not in here is the
    # snapshot's (DeltaLogReader.transaction_version at base_version).
    base_version: int = -1
    app_versions: Mapping[str, int] = field(default_factory=dict)

    def end_offset(self, tp: TopicPartition) -> int:
        return self.end_offsets.get(tp, 0)


def view_from_snapshot(version: int, properties: Mapping[str, str], files: Iterable[FileStats]) -> LogView:
    """The view at ``version`` from the table properties and its live files."""
    bounds, missing = partition_bounds(files)
    topics = topics_from_properties(properties)
    ends = {tp: b.end for tp, b in bounds.items() if tp.topic in topics}
    unknown = frozenset(tp for tp in missing if tp.topic in topics)
    return LogView(version, dict(properties), topics, ends, unknown, base_version=version)


def parse_commit(lines: Iterable[str]) -> CommitChanges:
    """Extract :class:`CommitChanges` from the JSON lines of a Delta commit file."""
    properties = None
    added = []
    apps = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        action = json.loads(line)
        if "metaData" in action:
            properties = dict(action["metaData"].get("configuration") or {})
        elif "add" in action:
            add = action["add"]
            if add.get("dataChange", True):
                added.append(FileStats.from_add(add))
        elif "txn" in action:
            apps[action["txn"]["appId"]] = int(action["txn"]["version"])
    return CommitChanges(properties, tuple(added), apps)


def apply_commit(view: LogView, version: int, changes: CommitChanges) -> LogView:
    """The view after commit ``version``, which must directly follow ``view``.

    Applying a commit whose files are already reflected changes nothing, so
    a writer may apply its own commit and later read it again.
    """
    if version != view.version + 1:
        raise ValueError(f"commit {version} does not follow view version {view.version}")
    properties = view.properties
    topics = view.topics
    ends = dict(view.end_offsets)
    unknown = set(view.unknown_ends)
    if changes.properties is not None:
        properties = dict(changes.properties)
        topics = topics_from_properties(properties)
        for tp in list(ends) + list(unknown):
            old = view.topics.get(tp.topic)
            new = topics.get(tp.topic)
            if new is None or old is None or new.topic_id != old.topic_id:
                ends.pop(tp, None)
                unknown.discard(tp)
    for f in changes.added:
        if f.tp.topic not in topics:
            continue
        if not f.has_offset_stats:
            unknown.add(f.tp)
        elif f.num_records:
            ends[f.tp] = max(ends.get(f.tp, 0), f.max_offset + 1)
    apps = view.app_versions
    if changes.app_versions:
        apps = {**apps, **changes.app_versions}
    return LogView(version, properties, topics, ends, frozenset(unknown), view.base_version, apps)
