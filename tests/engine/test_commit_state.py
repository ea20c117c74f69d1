"""The table as of a version, moved forward commit by commit (no I/O)."""

from __future__ import annotations

import json

import pytest

from lakelog.engine.commit.actions import AddFile, Commit, Metadata, Protocol, RemoveFile, Txn
from lakelog.engine.commit.state import AppVersions, PartitionFiles, TableState
from lakelog.engine.offsets import FileStats
from lakelog.engine.topics import TopicMetadata, TopicPartition, encode_topic, topic_property_key

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
TOPIC = TopicMetadata("t", "id-1", 2)
RECREATED = TopicMetadata("t", "id-2", 2)


def meta(*topics: TopicMetadata) -> Metadata:
    return Metadata("m", "{}", ("topic", "partition"), {topic_property_key(t.name): encode_topic(t) for t in topics})


def file(tp: TopicPartition, lo: int, hi: int, path: str | None = None) -> FileStats:
    return FileStats(path or f"{tp}/{lo}-{hi}", tp, hi - lo + 1, lo, hi)


def add(tp: TopicPartition, lo: int, hi: int, *, data_change: bool = True, path: str | None = None) -> AddFile:
    stats = json.dumps({"numRecords": hi - lo + 1, "minValues": {"offset": lo}, "maxValues": {"offset": hi}})
    values = {"topic": tp.topic, "partition": str(tp.partition)}
    return AddFile(path or f"topic={tp.topic}/partition={tp.partition}/{lo}-{hi}", values, 10, 1, data_change, stats)


def state(files=(), topics=(TOPIC,), apps=None) -> TableState:
    return TableState.build(4, Protocol(1, 2), meta(*topics), files, apps)


def test_a_snapshot_takes_end_offsets_from_statistics():
    s = state([file(T0, 0, 9), file(T0, 10, 14), file(T1, 0, 2)])
    assert s.ends == {T0: 15, T1: 3} and s.end_offset(TopicPartition("t", 5)) == 0
    assert s.unknown_ends == frozenset()
    assert s.bounds(T0).start == 0 and s.bounds(T0).end == 15 and s.bounds(T0).files == 2


def test_files_without_statistics_make_a_partition_unknown():
    s = state([FileStats("x", T1, None, None, None)])
    assert s.unknown_ends == {T1} and s.bounds(T1) is None


def test_commits_move_end_offsets_forward_and_must_come_in_order():
    s = state([file(T0, 0, 9)])
    s = s.apply(5, Commit((add(T0, 10, 11),)))
    assert s.version == 5 and s.ends[T0] == 12 and len(s.files_of(T0)) == 2
    with pytest.raises(ValueError, match="does not follow"):
        s.apply(7, Commit(()))


def test_an_optimize_rearranges_files_and_leaves_the_end_alone():
    s = state([file(T0, 0, 4, "a"), file(T0, 5, 9, "b"), file(T0, 10, 11, "c")])
    merged = Commit(
        (
            RemoveFile("a", 1, False, partition_values={"topic": "t", "partition": "0"}),
            RemoveFile("b", 1, False),  # no partition values: found by its path anyway
            add(T0, 0, 9, data_change=False, path="ab"),
        )
    )
    s = s.apply(5, merged)
    assert [f.path for f in s.files_of(T0).all()] == ["ab", "c"]
    assert s.ends[T0] == 12


def test_deleting_and_recreating_a_topic_resets_its_offsets():
    s = state([file(T0, 0, 9)])
    deleted = s.apply(5, Commit((meta(),)))
    assert deleted.topics == {} and deleted.ends == {}
    recreated = s.apply(5, Commit((meta(RECREATED),)))
    assert recreated.topics["t"].topic_id == "id-2" and recreated.end_offset(T0) == 0


def test_files_of_unknown_topics_move_no_end_offset():
    s = state().apply(5, Commit((add(TopicPartition("gone", 0), 0, 4),)))
    assert s.ends == {} and len(s.files_of(TopicPartition("gone", 0))) == 1


def test_unchanged_partitions_are_shared_between_versions():
    s = state([file(T0, 0, 9), file(T1, 0, 3)])
    after = s.apply(5, Commit((add(T0, 10, 10),)))
    assert after.partitions[T1] is s.partitions[T1]


def test_app_versions_come_from_commits_else_from_the_snapshot():
    asked = []

    def base(app: str) -> int:
        asked.append(app)
        return 7 if app == "old" else -1

    s = state(apps=AppVersions(base)).apply(5, Commit((Txn("new", 2),)))
    assert s.app_version("new") == 2 and s.app_version("old") == 7 and s.app_version("none") == -1
    assert s.apply(6, Commit(())).app_version("old") == 7
    assert asked.count("old") == 1  # the snapshot's answer is remembered


@pytest.mark.parametrize(
    "layout",
    [
        [(0, 9), (10, 19), (20, 29)],  # lakelog's own
        [(0, 29)],  # merged
        [(0, 24), (3, 23), (4, 29)],  # a plain OPTIMIZE's overlapping ranges
        [(20, 29), (0, 9), (10, 19)],  # unsorted
    ],
)
def test_covering_finds_every_file_that_may_hold_a_range(layout):
    files = PartitionFiles.of(file(T0, lo, hi, f"{lo}-{hi}") for lo, hi in layout)
    for start in range(0, 30, 3):
        for end in (start + 1, start + 5, None):
            chosen = {f.path for f in files.covering(start, end)}
            wanted = {f"{lo}-{hi}" for lo, hi in layout if hi >= start and (end is None or lo < end)}
            assert chosen == wanted, (start, end)


def test_appending_after_the_end_keeps_the_order_without_resorting():
    files = PartitionFiles.of([file(T0, 0, 9, "a")])
    grown = files.changed([file(T0, 10, 12, "b")], set())
    assert [f.path for f in grown.ordered] == ["a", "b"] and grown.reach == (9, 12)
    inserted = grown.changed([file(T0, 5, 6, "c")], {"a"})
    assert [f.path for f in inserted.ordered] == ["c", "b"] and inserted.reach == (6, 12)
