"""Planning rules of maintenance, as plain functions (no Spark, no files)."""

from __future__ import annotations

from compaction.files import LiveFile
from compaction.plan import cleanable_files, optimize_bins, retention_victims
from engine.offsets import TopicPartition

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
