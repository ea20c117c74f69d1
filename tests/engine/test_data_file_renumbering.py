"""A data file written to be renumbered holds its consecutive offsets as their first value and
deltas (Parquet's DELTA_BINARY_PACKED), and DataFileWriter.renumber rewrites that value in
place: the file reads back numbered from the new first offset, every other column as written,
its add statistics to match; files that cannot be renumbered (or not to that offset) say so."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelog.engine.commit.data_files import ROW_GROUP_ROWS, DataFileWriter
from lakelog.engine.schema import LOG_ARROW_SCHEMA


def log_rows(offsets: list[int] | np.ndarray, value_size: int = 20) -> pa.Table:
    n = len(offsets)
    now_us = int(time.time() * 1_000_000)
    headers = [[{"key": "h", "value": b"x"}] if i % 3 == 0 else None for i in range(n)]
    columns = {
        "topic": pa.array(["t"] * n),
        "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array([now_us + i for i in range(n)], pa.timestamp("us", tz="UTC")),
        "timestamp_type": pa.array([0] * n, pa.int32()),
        "key": pa.array([None if i % 2 else b"k%d" % i for i in range(n)], pa.binary()),
        "value": pa.array([bytes([i % 256]) * value_size for i in range(n)], pa.binary()),
        "headers": pa.array(headers, LOG_ARROW_SCHEMA.field("headers").type),
        "producer_id": pa.array([7] * n, pa.int64()),
        "producer_epoch": pa.array([0] * n, pa.int32()),
        "sequence": pa.array(range(n), pa.int32()),
    }
    return pa.table(columns).cast(LOG_ARROW_SCHEMA)


@pytest.mark.parametrize(
    ("first", "moved_to", "count"),
    [(0, 5, 1), (130, 200, 300), (2**40, 2**40 + 129, 300), (1000, 1000, 300), (7, 9, ROW_GROUP_ROWS)],
)
def test_a_renumberable_file_reads_back_numbered_from_its_new_first_offset(tmp_path, first, moved_to, count):
    # Encoded offsets with bytes of 128 and beyond (130, 2**40): a signed comparison of the file's
    # bytes once took such files for not renumberable. A full row group is one page.
    rows = log_rows(np.arange(first, first + count), value_size=1 if count > 300 else 20)
    writer = DataFileWriter(str(tmp_path))
    (written,) = writer.write(rows, sync=False, renumberable=True)
    assert written.offsets_at is not None and not written.synced
    column = pq.read_metadata(written.full_path).row_group(0).column(0)
    assert column.path_in_schema == "offset" and column.statistics is None  # Delta's stats hold the range
    before = pq.read_table(written.full_path)

    moved = writer.renumber(written, moved_to)

    after = pq.read_table(moved.full_path)
    assert moved.full_path == written.full_path and moved.add.size == written.add.size
    assert after.column("offset").to_pylist() == list(range(moved_to, moved_to + count))
    assert after.drop_columns(["offset"]).equals(before.drop_columns(["offset"]))
    stats = json.loads(moved.add.stats)
    assert (stats["minValues"]["offset"], stats["maxValues"]["offset"], stats["numRecords"]) == (
        moved_to,
        moved_to + count - 1,
        count,
    )
    assert stats["minValues"]["timestamp"] == json.loads(written.add.stats)["minValues"]["timestamp"]
    assert (moved.stats.min_offset, moved.stats.max_offset) == (moved_to, moved_to + count - 1)
    assert not moved.synced  # the commit that adds it syncs it
    assert writer.renumber(moved, first).stats.min_offset == first  # and back
    assert pq.read_table(written.full_path).equals(before)


def test_files_that_cannot_be_renumbered_say_so(tmp_path):
    writer = DataFileWriter(str(tmp_path))
    gaps = log_rows([0, 1, 5, 6])  # a compacted run: renumbering writes consecutive offsets
    big = log_rows(np.arange(ROW_GROUP_ROWS + 1), value_size=1)  # more than one row group
    cases = {
        "not asked": writer.write(log_rows(np.arange(10)), sync=False)[0],
        "synced": writer.write(log_rows(np.arange(10)), sync=True, renumberable=True)[0],
        "gaps": writer.write(gaps, sync=False, renumberable=True)[0],
        "row groups": writer.write(big, sync=False, renumberable=True)[0],
    }
    for case, written in cases.items():
        assert written.offsets_at is None, case
        with pytest.raises(ValueError, match="not written to be renumbered"):
            writer.renumber(written, 100)
        offsets = pq.read_table(written.full_path).column("offset").to_pylist()
        assert offsets[:2] == [0, 1], case  # untouched
    # The first offset's encoding is one byte for 0-63, two for 64-8191: a move across cannot
    # be made in place (the commit then writes the file again).
    (small,) = writer.write(log_rows(np.arange(60, 70)), sync=False, renumberable=True)
    with pytest.raises(ValueError, match="size would change"):
        writer.renumber(small, 64)
    assert pq.read_table(small.full_path).column("offset").to_pylist() == list(range(60, 70))
    assert writer.renumber(small, 0).stats.min_offset == 0
    # Files not asked to be renumberable keep the offset column's Parquet statistics.
    column = pq.read_metadata(cases["not asked"].full_path).row_group(0).column(0)
    assert column.statistics is not None and column.statistics.min == 0
