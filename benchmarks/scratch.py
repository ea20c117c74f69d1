"""Where a perf run puts its baselines: a directory of its own, removed afterwards.

A perf run never writes beside the store (``<store>-plain-delta`` could be
anything of the user's): plain-Delta tables, checkpoints and copies go into
a new directory the run creates -- in the system's temp directory, or in the
``--work-dir`` given (a local directory, or an S3 prefix) -- and deletes,
with everything in it, when it ends.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from lakelog.engine.commit import normalize_uri
from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.storage.object_store import is_s3, remove_tree


def check_work_dir(work_dir: str | None, *, s3: bool = True) -> None:
    """Raise InvalidConfigError unless ``work_dir`` is None, an existing local directory, or
    (when ``s3``) an S3 URI."""
    if work_dir is None:
        return
    if is_s3(work_dir):
        if not s3:
            raise InvalidConfigError(f"--work-dir must be a local directory here, got {work_dir}")
        return
    if not os.path.isdir(work_dir):
        raise InvalidConfigError(f"--work-dir {work_dir} is not an existing directory")


@contextmanager
def scratch_dir(kind: str, work_dir: str | None = None) -> Iterator[str]:
    """A new, empty directory (or S3 prefix) named ``lakelog-perf-<kind>-<random>``, inside
    ``work_dir`` (default: the system's temp directory); deleted with its contents on exit.

    Only what this created is deleted. An S3 ``work_dir`` gets a fresh prefix
    no one else uses (a random suffix); a local one must exist (OSError else).
    """
    if work_dir is not None and is_s3(work_dir):
        path = f"{normalize_uri(work_dir).rstrip('/')}/lakelog-perf-{kind}-{uuid.uuid4().hex[:12]}"
    else:
        path = tempfile.mkdtemp(prefix=f"lakelog-perf-{kind}-", dir=work_dir)
    try:
        yield path
    finally:
        remove_tree(path)
