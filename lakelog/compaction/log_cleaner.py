"""Which records log compaction keeps: Kafka's cleaner rule over Arrow columns.

Over the cleanable prefix of a partition (see :func:`compaction.plan.cleanable_files`):

* a keyed record is kept when no later record *of the cleanable prefix* has
  its key (Kafka's offset map covers the dirty section up to the first
  uncleanable offset; later records in the head do not remove anything yet);
* a kept tombstone (null value) goes once ``delete.retention.ms`` has passed
  since its file was written (Kafka's legacy delete horizon: the segment's
  last-modified time; rewritten files keep their sources' time);
* records without a key are kept (Kafka refuses them on compacted topics;
  lakelog does not drop what it cannot reason about);
* a tombstone also stays while an older record of its key stays (a file's
  first record, below), or removing it would bring that value back;
* the first record of every file written is kept, so a file's minimum offset stays
  the start of the range it covers (see :mod:`compaction.plan`): the log start
  offset moves only by retention, as in Kafka, and a reader positioned
  anywhere in a compacted range never looks like it lost data.

Offsets and order never change: kept records are written back as they were.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def keep_mask(
    offsets: np.ndarray,
    keys: pa.Array,
    tombstones: np.ndarray,
    first_of_file: np.ndarray,
    written_ms: np.ndarray,
    *,
    now_ms: int,
    delete_retention_ms: int,
) -> np.ndarray:
    """Boolean mask of the records to keep, for the records of the cleanable prefix in offset order.

    Per record: ``offsets``, ``keys``, ``tombstones`` (value is null),
    ``first_of_file`` (the record opens an output file) and ``written_ms``
    (when the record's source file was written).
    """
    n = len(offsets)
    if n == 0:
        return np.zeros(0, dtype=bool)
    encoded = pc.dictionary_encode(keys)
    keyless = np.asarray(pc.is_null(encoded.indices).to_numpy(zero_copy_only=False), dtype=bool)
    codes = np.where(keyless, 0, encoded.indices.to_numpy(zero_copy_only=False)).astype(np.int64)
    latest = np.full(max(len(encoded.dictionary), 1), -1, dtype=np.int64)
    np.maximum.at(latest, codes[~keyless], offsets[~keyless])
    is_latest = offsets == latest[codes]
    expired_tombstone = tombstones & (written_ms + delete_retention_ms <= now_ms)
    stale_kept = first_of_file & ~is_latest & ~keyless
    shadowed = np.zeros(len(latest), dtype=bool)
    shadowed[codes[stale_kept]] = True
    return first_of_file | keyless | (is_latest & ~(expired_tombstone & ~shadowed[codes]))
