"""Consumer group liveness off the Delta log: one lease object per member.

A member renews its lease every ``heartbeat.interval.ms`` by overwriting
``<store>/_lakelog/groups/<group>/members/<member>.json`` (a temporary file
renamed over it locally, a plain PUT on S3). Heartbeats are therefore not
Delta commits: an idle group writes nothing to the table. Delta readers and
VACUUM leave ``_``-prefixed directories alone, so the leases are invisible to
them.

Deciding that a member is gone uses only the observer's own clock
(:class:`Liveness`): a lease counts as stale once the observer has seen it
unchanged (same modification time / ETag) for the member's
``session.timeout.ms``. Clocks of different machines (or of the S3 service)
never meet; an observer that just started waits a whole session before it
expires anyone, as a Kafka coordinator that just took over does.

Members that start together form the group in one rebalance by the group's
initial delay (:mod:`engine.groups.classic`), as with Kafka's coordinator.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from lakelog.engine.errors import error_for_os_error
from lakelog.engine.storage.object_store import filesystem, replace_file

LEASES_DIR = "_lakelog/groups"
# Group and member ids name directories and files. A path component may be 255 bytes on POSIX file
# systems (NAME_MAX) and a whole S3 key 1,024 bytes, while Kafka's ids may be 32,767 bytes (client.id
# goes into a member id): an id whose quoted name is longer than this is named by a readable prefix
# and its SHA-256 instead (:func:`file_name`), so every id Kafka accepts works on every store.
NAME_MAX_CHARS = 120
_PREFIX_CHARS = 48
_HASHED = "="  # quote(..., safe="") escapes "=": no quoted name contains it


def file_name(identifier: str) -> str:
    """The path component naming ``identifier``: its percent-quoted form (as always) when that
    has at most :data:`NAME_MAX_CHARS` characters, else ``<quoted prefix>=<sha256 hex>`` (at most
    113 ASCII characters). Distinct ids get distinct names."""
    quoted = quote(identifier, safe="")
    if len(quoted) <= NAME_MAX_CHARS:
        return quoted
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()
    # Cut before a split escape so the prefix stays readable.
    prefix = re.sub(r"%[0-9A-F]?$", "", quoted[:_PREFIX_CHARS])
    return f"{prefix}{_HASHED}{digest}"


@dataclass(frozen=True)
class Lease:
    member_id: str
    modified_ms: int  # when it was last written, by the storage's clock (for display only)
    token: str  # changes with every renewal (modification time, or the object's ETag)


def _shown(identifier: str) -> str:
    """``identifier`` quoted for a message, cut short when it is long."""
    return repr(identifier if len(identifier) <= 80 else identifier[:77] + "...")


class LeaseStore:
    """The member leases of one group. Thread-safe (no shared mutable state)."""

    def __init__(self, uri: str, group_id: str) -> None:
        self.uri = uri
        self.group_id = group_id
        self._fs, root = filesystem(uri)
        self.group_directory = f"{root}/{LEASES_DIR}/{file_name(group_id)}"
        self.directory = f"{self.group_directory}/members"

    def _path(self, member_id: str, directory: str | None = None) -> str:
        return f"{directory or self.directory}/{file_name(member_id)}.json"

    def _put(self, directory: str, member_id: str, document: Mapping, what: str) -> None:
        body = json.dumps(document).encode()
        try:
            replace_file(self._fs, directory, f"{file_name(member_id)}.json", body)
        except OSError as exc:
            raise error_for_os_error(
                exc, f"writing {what} of member {_shown(member_id)} of group {_shown(self.group_id)}"
            ) from exc

    def renew(self, member_id: str, instance_id: str | None) -> None:
        """Write (or overwrite) the member's lease. Raises StoreFullError (no space),
        StoreAccessError (refused) or StoreError when it could not be written; then no
        temporary file is left and an earlier lease of the member is unchanged."""
        document = {"member_id": member_id, "instance_id": instance_id, "renewed_ms": int(time.time() * 1000)}
        self._put(self.directory, member_id, document, "the lease")

    def remove(self, member_id: str) -> None:
        """Drop the member's lease (it left); nothing if there is none."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm(self._path(member_id))

    def remove_all(self) -> None:
        """Drop every lease of the group (it was deleted)."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm(self.group_directory, recursive=True)

    def read(self) -> dict[str, Lease]:
        """Every member's lease, by member id (one directory listing)."""
        try:
            entries = self._fs.ls(self.directory, detail=True)
        except FileNotFoundError:
            return {}
        leases = {}
        for entry in entries:
            name = entry["name"].rsplit("/", 1)[-1]
            if not name.endswith(".json") or name.startswith("."):
                continue
            stem = name[: -len(".json")]
            member_id = unquote(stem) if _HASHED not in stem else self._member_of(entry["name"])
            if member_id is None:
                continue
            modified = entry.get("mtime") or entry.get("LastModified") or entry.get("created")
            if hasattr(modified, "timestamp"):
                modified_ms = int(modified.timestamp() * 1000)
            else:
                modified_ms = int(float(modified or 0) * 1000)
            token = str(entry.get("ETag") or entry.get("mtime") or modified_ms)
            leases[member_id] = Lease(member_id, modified_ms, token)
        return leases

    def _member_of(self, path: str) -> str | None:
        """The member id a lease under a hashed name holds (None when it was removed meanwhile)."""
        try:
            return json.loads(self._fs.cat_file(path))["member_id"]
        except FileNotFoundError:
            return None


class Liveness:
    """Which members went silent, judged by how long this observer saw their leases unchanged.

    Pure bookkeeping over observations: :meth:`observe` with the leases read
    and the observer's monotonic time, then :meth:`silent` for the members
    whose lease (or its absence) has not changed for their session timeout.
    A member's session counts from the first observation that lists it, lease
    or not: a member is in the group from the commit of its JoinGroup, and its
    first lease is written after that commit (a joining member may also have
    none yet), so a member that joined after this observer first looked is
    given its whole session, as Kafka's coordinator starts a new member's expiry
    timer when it joins (GroupMetadataManager.addMemberThenRebalanceOrCompleteJoin:
    rescheduleClassicGroupMemberHeartbeat).
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str | None, float]] = {}

    def observe(self, leases: Mapping[str, Lease], members: Mapping[str, int], now: float) -> None:
        """Record what the leases of ``members`` (member id -> session timeout ms) look like now."""
        for member_id in members:
            token = leases[member_id].token if member_id in leases else None
            seen = self._seen.get(member_id)
            # First sight counts from now, lease or not (the class docstring says why); counted
            # from the observer's own start, 5 of the 12 member ids of an 8-process group were dropped.
            if seen is None or seen[0] != token:
                self._seen[member_id] = (token, now)
        for member_id in list(self._seen):
            if member_id not in members:
                del self._seen[member_id]

    def silent(self, members: Mapping[str, int], now: float) -> list[str]:
        """Members (of ``members``: id -> session timeout ms) not renewed for their session timeout."""
        return sorted(
            m for m, timeout in members.items() if m in self._seen and now - self._seen[m][1] > timeout / 1000
        )


def fresh(leases: Mapping[str, Lease], members: Mapping[str, int], now_ms: int) -> set[str]:
    """Members whose lease was written within their session timeout, by the reader's clock.

    A one-shot view for admin commands and ``describe`` (which have no history
    of observations); members decide expiry with :class:`Liveness`.
    """
    return {m for m, timeout in members.items() if m in leases and now_ms - leases[m].modified_ms <= timeout}
