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
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from engine.object_store import filesystem, is_s3

LEASES_DIR = "_lakelog/groups"


@dataclass(frozen=True)
class Lease:
    member_id: str
    modified_ms: int  # when it was last written, by the storage's clock (for display only)
    token: str  # changes with every renewal (modification time, or the object's ETag)


class LeaseStore:
    """The member leases of one group. Thread-safe (no shared mutable state)."""

    def __init__(self, uri: str, group_id: str) -> None:
        self.uri = uri
        self._fs, root = filesystem(uri)
        self._local = not is_s3(uri) and "://" not in uri
        self.directory = f"{root}/{LEASES_DIR}/{quote(group_id, safe='')}/members"

    def _path(self, member_id: str) -> str:
        return f"{self.directory}/{quote(member_id, safe='')}.json"

    def renew(self, member_id: str, instance_id: str | None) -> None:
        """Write (or overwrite) the member's lease. Raises OSError when it could not be written."""
        body = json.dumps(
            {"member_id": member_id, "instance_id": instance_id, "renewed_ms": int(time.time() * 1000)}
        ).encode()
        path = self._path(member_id)
        if self._local:
            os.makedirs(self.directory, exist_ok=True)
            temp = f"{self.directory}/.{uuid.uuid4().hex}.tmp"
            with open(temp, "wb") as handle:
                handle.write(body)
            os.replace(temp, path)  # atomic: a reader sees the old lease or the new one
        else:
            with self._fs.open(path, "wb") as handle:
                handle.write(body)

    def remove(self, member_id: str) -> None:
        """Drop the member's lease (it left); nothing if there is none."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm(self._path(member_id))

    def remove_all(self) -> None:
        """Drop every lease of the group (it was deleted)."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm(self.directory, recursive=True)

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
            member_id = unquote(name[: -len(".json")])
            modified = entry.get("mtime") or entry.get("LastModified") or entry.get("created")
            if hasattr(modified, "timestamp"):
                modified_ms = int(modified.timestamp() * 1000)
            else:
                modified_ms = int(float(modified or 0) * 1000)
            token = str(entry.get("ETag") or entry.get("mtime") or modified_ms)
            leases[member_id] = Lease(member_id, modified_ms, token)
        return leases


class Liveness:
    """Which members went silent, judged by how long this observer saw their leases unchanged.

    Pure bookkeeping over observations: :meth:`observe` with the leases read
    and the observer's monotonic time, then :meth:`silent` for the members
    whose lease (or its absence) has not changed for their session timeout.
    """

    def __init__(self, now: float) -> None:
        self._started = now
        self._seen: dict[str, tuple[str | None, float]] = {}

    def observe(self, leases: Mapping[str, Lease], members: Mapping[str, int], now: float) -> None:
        """Record what the leases of ``members`` (member id -> session timeout ms) look like now."""
        for member_id in members:
            token = leases[member_id].token if member_id in leases else None
            seen = self._seen.get(member_id)
            if seen is None:
                # First sight: count from now, or from the observer's start if the lease is missing.
                self._seen[member_id] = (token, now if token is not None else self._started)
            elif seen[0] != token:
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
