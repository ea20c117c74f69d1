"""Checks shared by the tests of data files written straight from a batch's columns."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from lakelog.engine.commit.data_files import DataFile, DataFileWriter
from lakelog.engine.topics import TopicMetadata, TopicPartition


def written_both_ways(
    direct: Any,
    by_rows: Any,
    ends: Mapping[TopicPartition, int],
    topics: Mapping[str, TopicMetadata],
    files: DataFileWriter,
) -> DataFile:
    """The one file ``direct.write_unsynced`` writes, checked against the file of
    ``by_rows.build``'s rows (two batches of the same records) with :func:`assert_same_file`."""
    written = direct.write_unsynced(ends, topics, files)
    assert written is not None and len(written) == 1
    (expected,) = files.write(by_rows.build(ends, topics, 0), sync=False, renumberable=True)
    (got,) = written
    assert_same_file(got, expected)
    return got


def assert_same_file(got: DataFile, expected: DataFile) -> None:
    """``got`` (written from a batch's columns) is ``expected`` (DataFileWriter.write of the
    batch's rows, ``sync=False, renumberable=True``) but for its own name and write time: the
    same bytes, add statistics, size and partition values, renumbered at the same position,
    both unsynced."""
    with open(got.full_path, "rb") as a, open(expected.full_path, "rb") as b:
        assert a.read() == b.read()
    assert got.add.stats == expected.add.stats and got.add.size == expected.add.size
    assert got.add.partition_values == expected.add.partition_values and got.add.data_change
    # The same statistics but the file's own name and write time (ms apart at most).
    assert abs(got.stats.modification_time - expected.stats.modification_time) < 5_000
    assert got.stats == dataclasses.replace(
        expected.stats, path=got.add.path, modification_time=got.stats.modification_time
    )
    assert got.offsets_at == expected.offsets_at is not None and not got.synced
