"""Creating one Delta commit file from Python: put-if-absent, then its checksum."""

from __future__ import annotations

from collections.abc import Sequence

from engine.checksum import write_checksum
from engine.object_store import put_if_absent


def put_commit(log_dir: str, version: int, lines: Sequence[str]) -> bool:
    """Create ``log_dir/<version>.json`` holding ``lines`` unless it exists; False if it does.

    Once it landed, also its ``.crc`` (:mod:`engine.checksum`, best effort).
    Raises as :func:`engine.object_store.put_if_absent`: OSError when nothing
    was written, CommitStateUnknownError when the file may exist.
    """
    landed = put_if_absent(log_dir, f"{version:020d}.json", ("\n".join(lines) + "\n").encode())
    if landed:
        write_checksum(log_dir, version, lines)
    return landed
