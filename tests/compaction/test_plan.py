"""Planning rules of maintenance, as plain functions (no Spark, no files)."""

from __future__ import annotations

from lakelog.compaction.files import LiveFile
from lakelog.compaction.plan import cleanable_files, optimize_bins, overlapping_runs, retention_victims
from lakelog.engine.topics import TopicPartition

TP = TopicPartition("t", 0)


def files(*sizes: int, newest_ms: list[int] | None = None) -> list[LiveFile]:
    out, offset = [], 0
    for i, size in enumerate(sizes):
        ts = newest_ms[i] if newest_ms else 1000 * (i + 1)
        out.append(LiveFile(f"f{i}", TP, size, 10, offset, offset + 9, ts, ts))
        offset += 10
    return out


def names(fs: list[LiveFile]) -> list[str]:
    return [f.path for f in fs]


def test_optimize_bins_adjacent_small_files_up_to_the_target():
    fs = files(10, 10, 10, 100, 10, 10, 45, 50, 10)
    bins = optimize_bins(fs, target_bytes=60)
    # 100 >= target stays; a run is cut before the file that would pass the target; lone files stay.
    assert [names(b) for b in bins] == [["f0", "f1", "f2"], ["f4", "f5"], ["f7", "f8"]]
    for b in bins:  # contiguous offset ranges
        assert all(b[i].max_offset + 1 == b[i + 1].min_offset for i in range(len(b) - 1))


def test_optimize_leaves_a_single_or_large_file_alone():
    assert optimize_bins(files(10), 60) == []
    assert optimize_bins(files(100, 100), 60) == []
    assert optimize_bins([], 60) == []


def test_retention_by_time_deletes_an_old_prefix_never_the_newest_file():
    fs = files(10, 10, 10, 10, newest_ms=[100, 5000, 200, 300])
    # f1 is young: retention stops there even though f2 is old (Kafka deletes a prefix).
    assert names(retention_victims(fs, now_ms=2000, retention_ms=1000, retention_bytes=-1)) == ["f0"]
    everything_old = files(10, 10, 10, newest_ms=[1, 2, 3])
    assert names(retention_victims(everything_old, now_ms=10_000, retention_ms=1, retention_bytes=-1)) == ["f0", "f1"]
    assert retention_victims(fs, now_ms=10_000, retention_ms=-1, retention_bytes=-1) == []


def test_retention_by_bytes_keeps_at_least_the_limit():
    fs = files(10, 20, 30, 40)  # 100 bytes
    assert names(retention_victims(fs, now_ms=0, retention_ms=-1, retention_bytes=70)) == ["f0", "f1"]
    assert names(retention_victims(fs, now_ms=0, retention_ms=-1, retention_bytes=65)) == ["f0", "f1"]
    assert names(retention_victims(fs, now_ms=0, retention_ms=-1, retention_bytes=0)) == ["f0", "f1", "f2"]
    assert retention_victims(fs, now_ms=0, retention_ms=-1, retention_bytes=100) == []
    assert retention_victims(files(10), now_ms=10**9, retention_ms=0, retention_bytes=0) == []


def test_cleanable_prefix_stops_at_the_active_file_and_at_young_records():
    fs = files(10, 10, 10, 10, newest_ms=[100, 200, 900, 300])
    assert names(cleanable_files(fs, now_ms=1000, min_compaction_lag_ms=0)) == ["f0", "f1", "f2"]
    assert names(cleanable_files(fs, now_ms=1000, min_compaction_lag_ms=500)) == ["f0", "f1"]
    assert cleanable_files(fs, now_ms=1000, min_compaction_lag_ms=950) == []


def ranged(*ranges: tuple[int, int]) -> list[LiveFile]:
    return [LiveFile(f"f{i}", TP, 10, hi - lo + 1, lo, hi, 1, 1) for i, (lo, hi) in enumerate(sorted(ranges))]


def test_overlapping_runs_are_the_maximal_clusters_of_interleaved_ranges():
    # A plain OPTIMIZE that binned by size: [0..29] holds 0-9 and 20-29, [10..19] sits inside it.
    fs = ranged((0, 29), (10, 19), (30, 39), (40, 55), (41, 42), (56, 60), (60, 70))
    assert [names(r) for r in overlapping_runs(fs)] == [["f0", "f1"], ["f3", "f4"], ["f5", "f6"]]
    assert overlapping_runs(files(10, 10, 10)) == []  # lakelog's own layout: disjoint ranges
    assert overlapping_runs([]) == []
    # A file reaching past its neighbours chains them into one run.
    assert [names(r) for r in overlapping_runs(ranged((0, 100), (5, 6), (50, 60), (101, 102)))] == [["f0", "f1", "f2"]]
