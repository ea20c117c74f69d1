"""Planning micro-batches: commit boundaries, data loss, rate limits -- no Spark."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from lakelog.engine.commit.actions import AddFile, Commit
from lakelog.engine.commit.info import admin_tags, append_tags, commit_info
from lakelog.engine.offsets import OffsetRange, PartitionBounds
from lakelog.engine.topics import TopicPartition
from lakelog.spark_connector.source_plan import (
    CommitIndex,
    CommitRanges,
    commit_ranges,
    offsets_from_json,
    offsets_to_json,
    plan_by_commits,
    proportional_limit,
    reconcile_start,
    split_ranges,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_offsets_json_is_the_kafka_source_form():
    offsets = {A0: 5, A1: 7, B0: 0}
    assert offsets_to_json(offsets) == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


def test_reconcile_start_reports_every_kind_of_loss_and_adds_new_partitions():
    bounds = {A0: PartitionBounds(10, 20), A1: PartitionBounds(0, 3), B0: PartitionBounds(4, 9)}
    start, losses = reconcile_start({A0: 5, A1: 8, TopicPartition("gone", 0): 2}, bounds)
    assert start == {A0: 10, A1: 0, B0: 4}
    described = sorted(loss.describe() for loss in losses)
    assert described[0].startswith("a-0: offsets 5..9")
    assert "went back from 8 to 3" in described[1]
    assert described[2].startswith("gone-0: offsets from 2")


def test_reconcile_start_without_loss_changes_nothing():
    bounds = {A0: PartitionBounds(0, 20)}
    assert reconcile_start({A0: 20}, bounds) == ({A0: 20}, [])


def commits_of(*sizes_per_commit):
    """Commits adding the given record counts per partition, in order."""
    ends: dict[TopicPartition, int] = {}
    commits = []
    for version, sizes in enumerate(sizes_per_commit):
        ranges = {}
        for tp, n in sizes.items():
            ranges[tp] = (ends.get(tp, 0), ends.get(tp, 0) + n)
            ends[tp] = ends.get(tp, 0) + n
        commits.append(CommitRanges(version, ranges))
    return commits, ends


def test_rate_limit_cuts_at_commit_boundaries_and_takes_at_least_one_commit():
    commits, target = commits_of({A0: 3, A1: 3}, {A0: 2}, {A1: 10}, {A0: 1})
    start = {A0: 0, A1: 0}
    assert plan_by_commits(start, target, commits, 7) == {A0: 3, A1: 3}  # 6, the next would make 8
    assert plan_by_commits(start, target, commits, 8) == {A0: 5, A1: 3}
    # A commit larger than the limit is taken whole rather than split.
    assert plan_by_commits({A0: 5, A1: 3}, target, commits, 4) == {A0: 5, A1: 13}
    assert plan_by_commits(target, target, commits, 4) == target


@given(
    st.lists(st.dictionaries(st.sampled_from([A0, A1, B0]), st.integers(1, 5), min_size=1), min_size=1, max_size=12),
    st.integers(1, 20),
)
def test_batches_planned_one_after_another_read_everything_and_never_split_a_commit(sizes, limit):
    commits, target = commits_of(*sizes)
    boundaries = []  # the ends after each commit: the only allowed batch ends
    ends: dict[TopicPartition, int] = {tp: 0 for tp in target}
    for c in commits:
        ends = {**ends, **{tp: hi for tp, (_, hi) in c.ranges.items()}}
        boundaries.append(dict(ends))
    start = {tp: 0 for tp in target}
    for _ in range(len(commits) + 1):
        end = plan_by_commits(start, target, commits, limit)
        if end == start:
            break
        assert end in boundaries
        start = end
    assert start == target


def test_proportional_limit_is_kafkas_rate_limit():
    ends = proportional_limit({A0: 0, A1: 0}, {A0: 90, A1: 10}, 10)
    assert ends == {A0: 9, A1: 1}
    assert proportional_limit({A0: 0}, {A0: 5}, 10) == {A0: 5}


class FakeLog:
    def __init__(self, commits, missing=()):
        self.commits = commits
        self.missing = set(missing)
        self.reads = []

    def read(self, version):
        self.reads.append(version)
        if version in self.missing:
            return None
        c = self.commits[version]
        adds = tuple(add(f"f{version}", tp, lo, hi - 1) for tp, (lo, hi) in c.ranges.items())
        return Commit((appended(version, c.ranges), *adds))


def appended(version, ranges):
    """The commitInfo a lakelog append writes (its tags record the ranges)."""
    planned = {tp: OffsetRange(tp, lo, hi) for tp, (lo, hi) in ranges.items()}
    return commit_info("WRITE", version - 1, now_ms=0, tags=append_tags("produce", "c", planned))


def add(path, tp, lo, hi):
    stats = json.dumps({"numRecords": hi - lo + 1, "minValues": {"offset": lo}, "maxValues": {"offset": hi}})
    return AddFile(path, {"topic": tp.topic, "partition": str(tp.partition)}, 1, 1, True, stats)


def test_commit_index_walks_back_only_as_far_as_the_start_and_then_forward():
    commits, target = commits_of({A0: 2}, {A0: 2}, {A0: 2}, {A0: 2})
    log = FakeLog(commits)
    index = CommitIndex(log.read)
    covering = index.covering(3, {A0: 4}, target)
    assert [c.version for c in covering] == [2, 3]
    assert sorted(log.reads) == [2, 3]  # stops at the commit starting at the start
    commits2, target2 = commits_of({A0: 2}, {A0: 2}, {A0: 2}, {A0: 2}, {A0: 5})
    log.commits = commits2
    assert [c.version for c in index.covering(4, {A0: 6}, target2)] == [3, 4]
    assert log.reads.count(4) == 1


def test_commit_index_says_when_the_log_no_longer_has_the_commits():
    commits, target = commits_of({A0: 2}, {A0: 2}, {A0: 2})
    index = CommitIndex(FakeLog(commits, missing={0}).read)
    assert index.covering(2, {A0: 0}, target) is None


def test_commit_ranges_come_from_lakelogs_commits_only():
    """An append's ranges are its tags; a lakelog commit without them (log compaction) adds
    its files' offsets; a commit another writer made (a plain Delta append) adds none."""
    tp = TopicPartition("a", 0)
    ours = Commit((appended(5, {tp: (10, 12)}), add("f", tp, 10, 11)))
    assert commit_ranges(5, ours).ranges == {tp: (10, 12)}
    compaction = Commit(
        (commit_info("LOG COMPACTION", 5, now_ms=0, tags=admin_tags("compact", "m", "a", {})), add("g", tp, 0, 3))
    )
    assert commit_ranges(6, compaction).ranges == {tp: (0, 4)}
    assert commit_ranges(7, Commit((add("h", tp, 0, 1), add("i", tp, 30, 30)))).ranges == {}


def test_split_ranges_is_one_task_per_partition_unless_asked_as_kafkas_range_calculator():
    ranges = [(A0, 0, 100), (A1, 50, 50), (B0, 10, 20)]
    assert split_ranges(ranges, None, 1_000_000) == [(A0, 0, 100), (B0, 10, 20)]  # no task for an empty range
    # maxRecordsPerPartition: pieces of at most that many records
    assert split_ranges([(A0, 0, 100)], None, 30) == [(A0, 0, 25), (A0, 25, 50), (A0, 50, 75), (A0, 75, 100)]
    # minPartitions: split in proportion to size (110 records over 4 tasks: a-0 gets 4, b-0 1)
    assert split_ranges(ranges, 4, 1_000_000) == [(A0, 0, 25), (A0, 25, 50), (A0, 50, 75), (A0, 75, 100), (B0, 10, 20)]
    # already as many tasks as asked: unchanged
    assert split_ranges(ranges, 2, 1_000_000) == [(A0, 0, 100), (B0, 10, 20)]
    # never more tasks than records
    assert split_ranges([(A0, 7, 10)], 8, 1_000_000) == [(A0, 7, 8), (A0, 8, 9), (A0, 9, 10)]
    assert split_ranges([], 8, 10) == []


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=6),
    min_partitions=st.none() | st.integers(min_value=1, max_value=40),
    per_task=st.integers(min_value=1, max_value=300),
)
def test_split_ranges_covers_every_offset_once_in_order(sizes, min_partitions, per_task):
    ranges = [(TopicPartition("t", p), 1000 * p, 1000 * p + n) for p, n in enumerate(sizes)]
    tasks = split_ranges(ranges, min_partitions, per_task)
    covered = [(tp, o) for tp, lo, hi in tasks for o in range(lo, hi)]
    assert covered == [(tp, o) for tp, lo, hi in ranges for o in range(lo, hi)]
    assert all(hi - lo <= per_task for _, lo, hi in tasks)
    total = sum(sizes)
    if min_partitions is not None:
        # at least min_partitions tasks when there are that many records, up to rounding per partition
        nonempty = sum(1 for n in sizes if n)
        assert len(tasks) >= min(total, min_partitions) - nonempty
