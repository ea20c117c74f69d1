"""What maintenance would do to one partition: plain functions over its live files.

The rules are Kafka's, with a Delta data file in the role of a log segment:

* The newest file of a partition is its *active segment*: nothing ever
  removes it, so a partition's end offset (one past the largest offset of
  any live file) never moves back, whatever maintenance does.
* Retention removes whole files from the oldest end only (``retention.ms``
  against a file's newest record timestamp, ``retention.bytes`` against the
  partition's size), as ``UnifiedLog.deleteOldSegments`` does; the log start
  offset becomes the first offset of the oldest remaining file.
* Log compaction rewrites files of the cleanable prefix (before the active
  file and before the first file with a record younger than
  ``min.compaction.lag.ms``) and never touches the rest.
* OPTIMIZE bins runs of adjacent files smaller than the target size
  (``segment.bytes``), so each new file covers one contiguous offset range.

Every file keeps its first record through compaction (see
:mod:`compaction.log_cleaner`), so a file's minimum offset is the start of
the range it covers for ever after, and retention moves the log start to
exactly where Kafka would put it.

All of that assumes files whose offset ranges do not overlap, which is what
lakelog writes. A plain Delta OPTIMIZE (Spark's, delta-rs') bins files by
size, not by offset, and may leave files whose ranges interleave; such runs
are first rewritten in offset order (:func:`overlapping_runs`) before any
other rule applies to the partition.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.compaction.files import LiveFile


def optimize_bins(files: Sequence[LiveFile], target_bytes: int) -> list[list[LiveFile]]:
    """Runs of adjacent small files to rewrite into one file each (only runs of two or more).

    A file at or above ``target_bytes`` ends a run and is left alone; a run
    is cut before the file that would take it past ``target_bytes``.
    """
    bins: list[list[LiveFile]] = []
    current: list[LiveFile] = []
    size = 0
    for f in files:
        if f.size >= target_bytes:
            bins.append(current)
            current, size = [], 0
            continue
        if current and size + f.size > target_bytes:
            bins.append(current)
            current, size = [], 0
        current.append(f)
        size += f.size
    bins.append(current)
    return [b for b in bins if len(b) >= 2]


def compaction_bins(files: Sequence[LiveFile], target_bytes: int) -> list[list[LiveFile]]:
    """Adjacent cleanable files grouped into bins of at most ``target_bytes`` (before cleaning);
    every file is in one bin, a file at or above the target alone. Cleaning writes one file per bin
    (Kafka's cleaner groups segments the same way, up to ``segment.bytes``)."""
    bins: list[list[LiveFile]] = []
    size = 0
    for f in files:
        if not bins or f.size >= target_bytes or size + f.size > target_bytes:
            bins.append([])
            size = 0
        bins[-1].append(f)
        size += f.size
    return bins


def retention_victims(
    files: Sequence[LiveFile], *, now_ms: int, retention_ms: int, retention_bytes: int
) -> list[LiveFile]:
    """The oldest files retention deletes (a prefix, never the newest file).

    ``retention_ms`` -1 and ``retention_bytes`` -1 mean no limit. A file
    breaches time retention when its newest record is older than
    ``now_ms - retention_ms``; size retention deletes the oldest files while
    what remains is still at least ``retention_bytes``.
    """
    if len(files) < 2:
        return []
    candidates = files[:-1]
    victims = 0
    if retention_ms >= 0:
        horizon = now_ms - retention_ms
        for f in candidates:
            if f.max_timestamp_ms is None or f.max_timestamp_ms >= horizon:
                break
            victims += 1
    if retention_bytes >= 0:
        excess = sum(f.size for f in files) - retention_bytes
        by_size = 0
        for f in candidates:
            if excess - f.size < 0:
                break
            excess -= f.size
            by_size += 1
        victims = max(victims, by_size)
    return list(candidates[:victims])


def cleanable_files(files: Sequence[LiveFile], *, now_ms: int, min_compaction_lag_ms: int) -> list[LiveFile]:
    """The prefix of files log compaction may rewrite.

    Stops before the newest file (the active segment) and before the first
    file holding a record younger than ``min.compaction.lag.ms`` -- Kafka's
    first uncleanable offset.
    """
    cleanable = []
    horizon = now_ms - min_compaction_lag_ms
    for f in files[:-1]:
        if min_compaction_lag_ms > 0 and (f.max_timestamp_ms is None or f.max_timestamp_ms > horizon):
            break
        cleanable.append(f)
    return cleanable


def overlapping_runs(files: Sequence[LiveFile]) -> list[list[LiveFile]]:
    """The runs of ``files`` (sorted by first offset) whose offset ranges overlap, two files or more each.

    Rewriting each run into one file holding its records in offset order
    leaves a partition whose files cover disjoint ranges, which every other
    rule here assumes.
    """
    runs: list[list[LiveFile]] = []
    reach = -1
    for f in files:
        if runs and f.min_offset <= reach:
            runs[-1].append(f)
        else:
            runs.append([f])
        reach = max(reach, f.max_offset)
    return [r for r in runs if len(r) >= 2]
