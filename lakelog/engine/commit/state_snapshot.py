"""The newest checkpoint's live files and application transactions, kept beside it as Arrow IPC.

A cold open reads the checkpoint ``_last_checkpoint`` names (engine.commit.checkpoint_state).
Decoding its columns costs what its rows cost: at 20,000 live files ~7.5 of an ~11 ms open
(most of it the paths, a dictionary page of 20,000 strings decoded and copied), against
~3 ms at 100. The same rows as an uncompressed Arrow IPC file are memory-mapped and used
in place, with nothing decoded or copied, whatever their number. So whenever lakelog writes
a checkpoint it also writes, from that checkpoint, its flat columns (:func:`flat_columns`:
the columns a table state is built from, live rows only) and its txn entries into
``_delta_log/.lakelog-state.arrow``, replaced whole (written under a temporary name and
renamed: a reader maps either the old file or the new one, never a part).

A reader uses it only for the checkpoint it was made from: its recorded version must be the
one the hint names and its recorded size and modification time those of that checkpoint
file (a checkpoint of the same version rewritten by another tool, or a store copied
without its times, reads the checkpoint), and the caller still checks its file count and
bytes against the version's ``.crc`` as it checks the checkpoint's own. Anything else -- no
file, another checkpoint's, a damaged one -- is None here, and the checkpoint is read as
before. One file per table, so nothing is left to clean up; a slower writer of an older
checkpoint that replaces a newer one only sends readers back to the checkpoint until the
next.

Its name starts with a dot, as the commit turn's lock file and the put's temporary files do:
Delta readers take only the names the protocol gives (commits, checksums, checkpoints,
``_last_checkpoint``) and ignore the rest of ``_delta_log``; so does lakelog's listing.
Local stores only: on S3 the checkpoint is read as before.
"""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.arrow_columns import array, scalar, to_numpy
from lakelog.engine.commit.file_runs import FileColumns, IntColumn, RowColumn, combined, encoded_topics
from lakelog.engine.storage.object_store import replace_local_file

log = logging.getLogger(__name__)

SNAPSHOT_NAME = ".lakelog-state.arrow"

# One row per live file (the first record batch) ...
_FILE_FIELDS = [
    pa.field("path", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int64()),
    pa.field("num_records", pa.int64()),
    pa.field("min_offset", pa.int64()),
    pa.field("max_offset", pa.int64()),
    pa.field("size", pa.int64()),
    pa.field("modification_time", pa.int64()),
    pa.field("min_timestamp_ms", pa.int64()),
    pa.field("max_timestamp_ms", pa.int64()),
]
# ... and one per application transaction (the second), in one schema: an IPC file has one.
_TXN_FIELDS = [
    pa.field("app_id", pa.string()),
    pa.field("app_version", pa.int64()),
    pa.field("app_last_updated", pa.int64()),
]
_FILE_SCHEMA = pa.schema(_FILE_FIELDS)
_SCHEMA = pa.schema(_FILE_FIELDS + _TXN_FIELDS)
# What ties a snapshot to one checkpoint file (schema metadata).
_VERSION = b"lakelog.version"
_CHECKPOINT_SIZE = b"lakelog.checkpoint_size"
_CHECKPOINT_MTIME = b"lakelog.checkpoint_mtime_ns"

_MS_SCALE = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1_000), "ns": (1, 1_000_000)}


def flat_columns(adds: pa.Array) -> pa.Table | None:
    """A checkpoint's ``add`` column (rows holding another action are null) as the flat columns
    a state is built from (:data:`_FILE_FIELDS`, row for row); None when it has no typed
    partition values with a topic and a partition, or no typed statistics (a checkpoint
    written without ``delta.checkpoint.writeStatsAsStruct``)."""
    n = len(adds)
    values, stats = child(adds, "partitionValues_parsed"), child(adds, "stats_parsed")
    if values is None or stats is None:
        return None
    topics, partitions = child(values, "topic"), child(values, "partition")
    if topics is None or partitions is None:
        return None
    lows, highs = child(stats, "minValues"), child(stats, "maxValues")
    columns = [
        adds.field("path"),
        topics,
        partitions,
        child(stats, "numRecords"),
        child(lows, "offset"),
        child(highs, "offset"),
        adds.field("size"),
        adds.field("modificationTime"),
        _ms(child(lows, "timestamp")),
        _ms(child(highs, "timestamp")),
    ]
    # Cast as the state's columns always were (ArrowInvalid for a layout that does not cast).
    arrays = [
        pa.nulls(n, f.type) if c is None else combined(c).cast(f.type)
        for c, f in zip(columns, _FILE_FIELDS, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=_FILE_SCHEMA)


def file_columns(flat: pa.Table | pa.RecordBatch) -> FileColumns:
    """The live files of :func:`flat_columns` (or of a snapshot's first batch) as a state's
    columns; rows naming no topic or partition are in no partition
    (:meth:`FileColumns.by_partition`)."""
    n = flat.num_rows
    names, ids = encoded_topics(flat.column("topic"), n)
    return FileColumns(
        RowColumn(flat.column("path")),
        names,
        ids,
        IntColumn.of_arrow(flat.column("partition"), n),
        IntColumn.of_arrow(flat.column("num_records"), n),
        IntColumn.of_arrow(flat.column("min_offset"), n),
        IntColumn.of_arrow(flat.column("max_offset"), n),
        {
            "size": RowColumn(flat.column("size")),
            "modification_time": RowColumn(flat.column("modification_time")),
            "min_timestamp_ms": RowColumn(flat.column("min_timestamp_ms")),
            "max_timestamp_ms": RowColumn(flat.column("max_timestamp_ms")),
        },
    )


def write_snapshot(
    log_dir: str, version: int, live: pa.Table, txns: dict[str, tuple[int, int | None]], checkpoint_path: str
) -> None:
    """Replace ``log_dir``'s snapshot with one of the checkpoint of ``version`` at
    ``checkpoint_path``: ``live``, the :func:`flat_columns` of its add actions (no row of
    another action), and its ``txns`` (app id -> version, lastUpdated). Not synced: it is
    derived from the checkpoint, and a file a crash left short or empty is refused by
    :func:`read_snapshot` (Arrow IPC's footer and magic). Raises OSError (nothing replaced)
    or ArrowException."""
    import pyarrow.ipc as ipc

    found = os.stat(checkpoint_path)
    schema = _SCHEMA.with_metadata(
        {_VERSION: str(version), _CHECKPOINT_SIZE: str(found.st_size), _CHECKPOINT_MTIME: str(found.st_mtime_ns)}
    )
    ids = list(txns)
    files = [*(combined(c) for c in live.columns), *(pa.nulls(live.num_rows, f.type) for f in _TXN_FIELDS)]
    apps = [
        *(pa.nulls(len(ids), f.type) for f in _FILE_FIELDS),
        array(ids, pa.string()),
        array([txns[i][0] for i in ids], pa.int64()),
        array([txns[i][1] for i in ids], pa.int64()),
    ]
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, schema) as writer:
        writer.write_batch(pa.RecordBatch.from_arrays(files, schema=schema))
        writer.write_batch(pa.RecordBatch.from_arrays(apps, schema=schema))
    replace_local_file(log_dir, SNAPSHOT_NAME, memoryview(sink.getvalue()))


def read_snapshot(
    log_dir: str, version: int, checkpoint_path: str
) -> tuple[pa.RecordBatch, dict[str, tuple[int, int | None]]] | None:
    """The live files (:func:`flat_columns`' columns) and txn entries of ``log_dir``'s snapshot
    when it was made from the checkpoint of ``version`` at ``checkpoint_path`` as it is now;
    None otherwise (none, another checkpoint's, or unreadable). Never raises."""
    import pyarrow.ipc as ipc

    try:
        found = os.stat(checkpoint_path)
        # Mapped: the columns are used in place, and keep the mapping (not the descriptor,
        # closed here) while the state holds them. The file is only ever replaced by a rename,
        # never written in place, so the mapping keeps the pages it was made with.
        with pa.memory_map(os.path.join(log_dir, SNAPSHOT_NAME)) as source, ipc.open_file(source) as reader:
            recorded = reader.schema.metadata or {}
            if (
                recorded.get(_VERSION) != str(version).encode()
                or recorded.get(_CHECKPOINT_SIZE) != str(found.st_size).encode()
                or recorded.get(_CHECKPOINT_MTIME) != str(found.st_mtime_ns).encode()
                or not reader.schema.remove_metadata().equals(_SCHEMA)
                or reader.num_record_batches != 2
            ):
                return None
            files, apps = reader.get_batch(0), reader.get_batch(1)
        files = files.select([f.name for f in _FILE_FIELDS])
        txns = {
            app_id: (version_, updated)
            for app_id, version_, updated in zip(
                apps.column("app_id").to_pylist(),
                apps.column("app_version").to_pylist(),
                apps.column("app_last_updated").to_pylist(),
                strict=True,
            )
        }
        if None in txns or any(v is None for v, _ in txns.values()):
            return None
        return files, txns
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
        log.debug("%s/%s not used: %s", log_dir, SNAPSHOT_NAME, exc)
        return None


def child(struct: pa.Array | None, name: str) -> pa.Array | None:
    """A field of a struct array carrying the struct's own nulls (statistics without
    minValues), or None when there is no such field."""
    if struct is None or not pa.types.is_struct(struct.type) or struct.type.get_field_index(name) < 0:
        return None
    return struct.flatten()[struct.type.get_field_index(name)]


def _ms(times: pa.Array | None) -> pa.Array | None:
    """Timestamps as int milliseconds, floored (what a commit's JSON statistics give); None
    when there is no timestamp column."""
    if times is None or not pa.types.is_timestamp(times.type):
        return None
    times = combined(times)
    multiply, divide = _MS_SCALE[times.type.unit]
    # lakelog's array and scalar: pa.array with a mask, or a bare 0 as a fill, import pandas.
    raw = to_numpy(pc.fill_null(times.cast(pa.int64()), scalar(0, pa.int64())))
    return pc.if_else(pc.is_valid(times), array(raw * multiply // divide, pa.int64()), scalar(None, pa.int64()))
