from __future__ import annotations

import pytest

from lakelog.engine.errors import InconsistentWriteError, InvalidOffsetError
from lakelog.engine.offsets import (
    EARLIEST,
    LATEST,
    FileStats,
    OffsetRange,
    PartitionBounds,
    counts_by_partition,
    parse_offset_spec,
    partition_bounds,
    plan_ranges,
    read_ranges,
    resolve_offsets,
    verify_written,
)
from lakelog.engine.topics import TopicPartition

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)


def f(tp, lo, hi, n=None, path=None):
    return FileStats(path or f"{tp}-{lo}", tp, (hi - lo + 1) if n is None else n, lo, hi)


def test_plan_starts_each_partition_at_its_end_offset():
    plan = plan_ranges({A0: 10}, {A0: 3, A1: 2, B0: 0})
    assert plan == {A0: OffsetRange(A0, 10, 13), A1: OffsetRange(A1, 0, 2)}


def test_verify_accepts_files_that_tile_the_plan_in_any_order():
    plan = {A0: OffsetRange(A0, 10, 20), A1: OffsetRange(A1, 0, 1)}
    verify_written(plan, [f(A0, 15, 19), f(A0, 10, 14), f(A1, 0, 0)])


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ([f(A0, 10, 14)], "files cover 10..14"),  # short
        ([f(A0, 10, 14), f(A0, 16, 20)], "expected to start at 15"),  # gap
        ([f(A0, 10, 16), f(A0, 15, 19)], "expected to start at 17"),  # overlap
        ([f(A0, 10, 19, n=9)], "holds 9 records"),  # a repeated/missing offset inside a file
        ([f(A0, 11, 20)], "expected to start at 10"),  # shifted
        ([f(A0, 10, 19), f(B0, 0, 0)], "nobody planned"),
        ([FileStats("x", A0, None, None, None)], "no offset statistics"),
    ],
)
def test_verify_rejects_anything_else(files, fragment):
    with pytest.raises(InconsistentWriteError, match=fragment):
        verify_written({A0: OffsetRange(A0, 10, 20)}, files)


def test_partition_bounds_from_file_stats():
    bounds, missing = partition_bounds(
        [
            f(A0, 5, 9),
            f(A0, 10, 19),
            f(A1, 0, 0),
            FileStats("e", B0, 0, None, None),
            FileStats("x", A1, None, None, None),
        ]
    )
    assert bounds[A0] == PartitionBounds(5, 20, 2)
    assert bounds[A1] == PartitionBounds(0, 1, 2)
    assert missing == {B0, A1}
    assert counts_by_partition([f(A0, 5, 9), f(A0, 10, 19), f(A1, 0, 0)]) == {A0: 15, A1: 1}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("earliest", "earliest"),
        (" LATEST ", "latest"),
        ({"a": {"0": 5, 1: -2}}, {"a": {0: 5, 1: EARLIEST}}),
        ('{"a": {"0": -1}}', {"a": {0: LATEST}}),
    ],
)
def test_offset_specs(spec, expected):
    assert parse_offset_spec(spec, option="startingOffsets") == expected


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("soonest", "startingOffsets must be 'earliest', 'latest' or JSON"),
        (5, "must be 'earliest', 'latest' or a mapping"),
        ({"a": {"x": 1}}, "partition 'x' of topic 'a' is not an integer"),
        ({"a": {0: -3}}, "offset -3 for a-0"),
        ({"a": {0: 1.5}}, "offset 1.5 for a-0"),
        ({"a": [1]}, "expected {topic: {partition: offset}}"),
    ],
)
def test_bad_offset_specs(spec, fragment):
    with pytest.raises(InvalidOffsetError, match=fragment.replace("{", r"\{").replace("}", r"\}")):
        parse_offset_spec(spec, option="startingOffsets")


BOUNDS = {A0: PartitionBounds(5, 20), A1: PartitionBounds(0, 0), B0: PartitionBounds(0, 3)}


def test_resolve_offsets_with_defaults_and_codes():
    assert resolve_offsets("earliest", BOUNDS, default="latest", option="s") == {A0: 5, A1: 0, B0: 0}
    assert resolve_offsets("latest", BOUNDS, default="earliest", option="s") == {A0: 20, A1: 0, B0: 3}
    got = resolve_offsets({"a": {0: 7, 1: LATEST}}, BOUNDS, default="earliest", option="s")
    assert got == {A0: 7, A1: 0, B0: 0}


def test_resolve_offsets_refuses_offsets_outside_the_log_and_unknown_partitions():
    with pytest.raises(InvalidOffsetError, match="offset 4 for a-0 is outside the log"):
        resolve_offsets({"a": {0: 4, 1: LATEST}}, BOUNDS, default="earliest", option="s")
    with pytest.raises(InvalidOffsetError, match="offset 21 for a-0"):
        resolve_offsets({"a": {0: 21, 1: LATEST}}, BOUNDS, default="earliest", option="s")
    with pytest.raises(InvalidOffsetError, match="names a-7, which is not a partition being read"):
        resolve_offsets({"a": {7: 0}}, BOUNDS, default="earliest", option="s")


def test_a_topic_named_in_a_mapping_needs_all_its_partitions():
    with pytest.raises(InvalidOffsetError, match=r"topic 'a' but not for \[1\]"):
        resolve_offsets({"a": {0: 7}}, BOUNDS, default="earliest", option="s")


def test_read_ranges_pair_starts_and_ends():
    assert read_ranges({A0: 5}, {A0: 9}) == {A0: OffsetRange(A0, 5, 9)}
    with pytest.raises(InvalidOffsetError, match="ending offset 4 for a-0 is before its starting offset 5"):
        read_ranges({A0: 5}, {A0: 4})
