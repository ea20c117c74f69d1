"""Records of produce requests arriving together share one Delta commit, idempotent producers' batches
among them; a refused one fails alone (no sockets, no Spark)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lakelog.engine.commit import RetryPolicy
from lakelog.engine.commit.data_files import DataFileWriter
from lakelog.engine.errors import UnknownTopicOrPartitionError
from lakelog.engine.produce.placement import columns_for_batch, place_records
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.idempotence import (
    DuplicateSequenceError,
    OutOfOrderSequenceError,
    SequenceClaim,
    app_id,
    next_sequences,
)
from lakelog.kafka_endpoint.produce_linger import ProduceLinger, WrittenAhead
from lakelog.store import Store
from tests.storage.power_loss import watch_native_syncs


def _table(partition: int, n: int, topic: str = "t"):
    return columns_for_batch(topic, [f"v{i}" for i in range(n)], None, partition, None, None)


def test_requests_within_the_linger_share_one_commit_and_get_their_own_offsets(plain_store):
    plain_store.create_topic("t", partitions=3)
    observed = []  # what the agent's metrics are told: (seconds, attempts, requests) per commit
    group = ProduceLinger(
        plain_store.context.committer("test"), RetryPolicy(), linger_ms=200, observe=lambda *c: observed.append(c)
    )
    try:
        version = plain_store.log.latest_version()
        futures = [group.submit(_table(p, n)) for p, n in [(0, 3), (1, 2), (0, 4), (2, 1)]]
        results = [f.result(timeout=30) for f in futures]
        assert plain_store.log.latest_version() == version + 1  # one Delta commit for all four
        # The requests are answered as soon as the commit landed; the metrics are told after.
        deadline = time.monotonic() + 30
        while not observed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [(attempts, requests) for _, attempts, requests in observed] == [(1, 4)]
        assert [list(r.offsets) for r in results] == [[0, 1, 2], [0, 1], [3, 4, 5, 6], [0]]
        bad = group.submit(_table(9, 1))
        good = group.submit(_table(1, 1))
        with pytest.raises(UnknownTopicOrPartitionError):
            bad.result(timeout=30)
        assert list(good.result(timeout=30).offsets) == [2]  # the refused request failed alone
    finally:
        group.close()
    assert plain_store.log.latest().end_offset(TopicPartition("t", 0)) == 7


class _Held:
    """A real committer whose commits wait until ``release`` is set: a commit held in flight."""

    def __init__(self, committer):
        self._committer = committer
        self.uri = committer.uri
        self.entered = threading.Event()
        self.release = threading.Event()

    def latest(self):
        return self._committer.latest()

    def append(self, batch, policy, *, landed=None):
        self.entered.set()
        assert self.release.wait(60)
        return self._committer.append(batch, policy, landed=landed)


def test_requests_queued_behind_a_commit_in_flight_go_together_without_a_second_linger(plain_store):
    """Kafka's producer keeps five requests in flight: those that arrive while a commit is in
    flight have waited their linger by the time it lands, so they commit at once, in one commit
    (lingering again left the committer idle while the producer's requests waited)."""
    plain_store.create_topic("t", partitions=1)
    held = _Held(plain_store.context.committer("test"))
    group = ProduceLinger(held, RetryPolicy(), linger_ms=1500)
    try:
        version = plain_store.log.latest_version()
        first = group.submit(_table(0, 1))
        assert held.entered.wait(30)  # after its linger, the first request's commit is in flight
        queued = [group.submit(_table(0, 2)), group.submit(_table(0, 3))]
        time.sleep(1.7)  # longer than the linger: they waited it out behind the commit
        held.release.set()
        released = time.monotonic()
        assert list(first.result(timeout=30).offsets) == [0]
        assert [list(f.result(timeout=30).offsets) for f in queued] == [[1, 2], [3, 4, 5]]
        assert time.monotonic() - released < 1.2  # no second linger of 1.5 s
        assert plain_store.log.latest_version() == version + 2  # the two queued ones share a commit
    finally:
        group.close()


def test_a_group_that_holds_group_bytes_lingers_no_longer_but_takes_what_is_queued(plain_store):
    """A group full enough commits without lingering on (here a 20 s linger would hold it 20 s),
    as a Kafka producer sends a full batch at once; requests queued meanwhile still join it."""
    plain_store.create_topic("t", partitions=1)
    held = _Held(plain_store.context.committer("test"))
    group = ProduceLinger(held, RetryPolicy(), linger_ms=20_000, group_bytes=1)
    try:
        version = plain_store.log.latest_version()
        first = group.submit(_table(0, 1))
        assert held.entered.wait(10)  # full at once: committed without a 20 s linger
        queued = [group.submit(_table(0, 2)), group.submit(_table(0, 3))]
        time.sleep(0.5)  # both queued behind the commit in flight
        held.release.set()
        assert list(first.result(timeout=10).offsets) == [0]
        assert [list(f.result(timeout=10).offsets) for f in queued] == [[1, 2], [3, 4, 5]]
        assert plain_store.log.latest_version() == version + 2  # the queued two went together
    finally:
        group.close()


def test_a_java_producers_five_default_requests_in_flight_share_one_commit(plain_store):
    """Kafka's Java producer keeps five 16 KiB requests in flight on a connection by default (150
    records of 100 B each, placed as the agent places them): four stay under GROUP_BYTES, so the
    group waits for the fifth and seals at it, and the window commits once instead of the fifth
    committing alone after the other four."""
    from lakelog.engine.produce.placement import place_partition_records

    plain_store.create_topic("t", partitions=1)
    state = plain_store.log.latest()

    def request():
        values = [bytes(100)] * 150
        return place_partition_records(state, "t", 0, [None] * 150, values, [None] * 150, [1_700_000_000_000] * 150)

    group = ProduceLinger(plain_store.context.committer("test"), RetryPolicy(), linger_ms=5_000)
    try:
        version = plain_store.log.latest_version()
        first_four = [group.submit(request()) for _ in range(4)]
        time.sleep(0.5)  # the four are gathered, the linger (5 s) has long to go
        assert not any(f.done() for f in first_four)  # 60 KB: not yet a full group
        fifth = group.submit(request())
        sent = time.monotonic()
        offsets = [list(f.result(timeout=30).offsets) for f in [*first_four, fifth]]
        assert time.monotonic() - sent < 3  # sealed at the fifth, not at the linger deadline
        assert offsets == [list(range(150 * i, 150 * (i + 1))) for i in range(5)]
        assert plain_store.log.latest_version() == version + 1  # one commit for the whole window
    finally:
        group.close()


def _claim(producer_id: int, partition: int, base: int, count: int, topic_id: str):
    return SequenceClaim(app_id(producer_id, topic_id, partition), producer_id, 0, base, count)


def test_in_flight_batches_of_idempotent_producers_share_a_commit_and_are_checked_in_order(plain_store):
    """Kafka's idempotent producer keeps up to five batches in flight: they join the plain
    requests' group commit, each checked against the one before it; a batch sent twice or out
    of order refuses the group and fails alone."""
    plain_store.create_topic("t", partitions=2)
    topic_id = plain_store.log.latest().topics["t"].topic_id
    group = ProduceLinger(plain_store.context.committer("test"), RetryPolicy(), linger_ms=300)
    try:
        version = plain_store.log.latest_version()
        submitted = [
            (_table(0, 3), _claim(7, 0, 0, 3, topic_id)),
            (_table(0, 2), None),
            (_table(0, 2), _claim(7, 0, 3, 2, topic_id)),
            (_table(0, 1), _claim(8, 0, 0, 1, topic_id)),
            (_table(1, 2), _claim(7, 1, 0, 2, topic_id)),
        ]
        futures = [group.submit(table, claim) for table, claim in submitted]
        results = [list(f.result(timeout=30).offsets) for f in futures]
        assert plain_store.log.latest_version() == version + 1  # one Delta commit for all five
        assert results == [[0, 1, 2], [3, 4], [5, 6], [7], [0, 1]]
        state = plain_store.log.latest()
        assert state.app_version(app_id(7, topic_id, 0)) == 5 and state.app_version(app_id(8, topic_id, 0)) == 1
        assert state.app_version(app_id(7, topic_id, 1)) == 2
        rows = plain_store.context.records.read(state.files_of(TopicPartition("t", 0)), TopicPartition("t", 0), 0)
        assert rows.column("producer_id").to_pylist() == [7, 7, 7, -1, -1, 7, 7, 8]
        assert rows.column("sequence").to_pylist()[:3] == [0, 1, 2] and rows.column("sequence").to_pylist()[5:] == [
            3,
            4,
            0,
        ]

        # A retry of the first batch beside the next one: the group is refused, each commits alone.
        again = group.submit(_table(0, 3), _claim(7, 0, 0, 3, topic_id))
        following = group.submit(_table(0, 1), _claim(7, 0, 5, 1, topic_id))
        gap = group.submit(_table(0, 1), _claim(8, 0, 4, 1, topic_id))
        with pytest.raises(DuplicateSequenceError):
            again.result(timeout=30)
        assert list(following.result(timeout=30).offsets) == [8]
        with pytest.raises(OutOfOrderSequenceError):
            gap.result(timeout=30)
    finally:
        group.close()
    assert plain_store.log.latest().end_offset(TopicPartition("t", 0)) == 9


def test_two_agents_racing_with_the_same_idempotent_batch_commit_it_once(plain_store):
    plain_store.create_topic("t", partitions=1)
    topic_id = plain_store.log.latest().topics["t"].topic_id
    other = Store.open(plain_store.uri)  # another agent: its own log and committer
    lingers = [
        ProduceLinger(store.context.committer(f"agent-{i}"), RetryPolicy(retries=20, backoff_ms=1), linger_ms=0)
        for i, store in enumerate([plain_store, other])
    ]
    try:
        for base in range(0, 40, 2):
            claim = _claim(5, 0, base, 2, topic_id)
            futures = [linger.submit(_table(0, 2), claim) for linger in lingers]
            outcomes = []
            for future in futures:
                try:
                    outcomes.append(list(future.result(timeout=30).offsets))
                except DuplicateSequenceError:
                    outcomes.append("duplicate")
            assert sorted(map(str, outcomes)).count("duplicate") == 1
    finally:
        for linger in lingers:
            linger.close()
    state = plain_store.log.latest()
    assert state.end_offset(TopicPartition("t", 0)) == 40 and state.app_version(app_id(5, topic_id, 0)) == 40


def test_next_sequences_walks_each_producer_and_partition_in_order():
    a, b = "lakelog.kafka.1.x.0", "lakelog.kafka.2.x.0"
    claims = [SequenceClaim(a, 1, 0, 0, 3), SequenceClaim(b, 2, 0, 10, 1), SequenceClaim(a, 1, 0, 3, 2)]
    assert next_sequences(claims, {b: 10}) == {a: 5, b: 11}
    with pytest.raises(OutOfOrderSequenceError):
        next_sequences(claims, {})  # b starts at 10 with nothing committed
    with pytest.raises(DuplicateSequenceError):
        next_sequences([*claims, SequenceClaim(a, 1, 0, 0, 3)], {b: 10})
    with pytest.raises(OutOfOrderSequenceError):
        next_sequences([SequenceClaim(a, 1, 0, 3, 2)], {a: 2})


def _group(store, *tables):
    return WrittenAhead(
        place_records(store.log.latest(), list(tables)), [None] * len(tables), [t.num_rows for t in tables]
    )


def _parquet_files(store):
    return sorted(str(p) for p in Path(store.uri.removeprefix("file://")).rglob("*.parquet"))


def test_a_group_written_ahead_from_the_ends_the_commit_before_leaves_commits_those_files(plain_store):
    """The pipeline's second half: the next group's files are written while the commit before
    it is in flight, numbered from the ends that commit leaves, and its own commit takes them."""
    plain_store.create_topic("t", partitions=2)
    committer = plain_store.context.committer("test")
    files = DataFileWriter(committer.uri)
    first = _group(plain_store, _table(0, 3))
    committer.append(first, RetryPolicy())
    assert first.ends_after == {TopicPartition("t", 0): 3}
    second = _group(plain_store, _table(0, 2), _table(1, 1))
    ahead = {TopicPartition("t", 0): 3, TopicPartition("t", 1): 0}
    second.write_ahead(ahead, plain_store.log.latest().topics, files)
    written = _parquet_files(plain_store)
    committer.append(second, RetryPolicy())
    second.finish()
    assert _parquet_files(plain_store) == written  # the files written ahead, no others
    assert list(second.offsets) == [3, 4, 0]
    state = plain_store.log.latest()
    rows = plain_store.context.records.read(state.files_of(TopicPartition("t", 0)), TopicPartition("t", 0), 0)
    assert rows.column("offset").to_pylist() == [0, 1, 2, 3, 4]


def test_files_written_ahead_from_ends_that_did_not_come_are_renumbered_to_the_ends_that_did(plain_store):
    """The commit before failed (or another agent appended): the guessed files are renumbered in
    place to the ends the attempt starts from, so nothing committed depends on the guess."""
    plain_store.create_topic("t", partitions=1)
    committer = plain_store.context.committer("test")
    files = DataFileWriter(committer.uri)
    tp = TopicPartition("t", 0)
    wrong = _group(plain_store, _table(0, 2))
    wrong.write_ahead({tp: 5}, plain_store.log.latest().topics, files)  # a commit of 5 that never landed
    guessed = _parquet_files(plain_store)
    committer.append(wrong, RetryPolicy())
    wrong.finish()
    assert list(wrong.offsets) == [0, 1] and wrong.ends_after == {tp: 2}
    assert _parquet_files(plain_store) == guessed  # the same file, renumbered from 0: not written again
    assert plain_store.log.latest().end_offset(tp) == 2
    rows = plain_store.context.records.read(plain_store.log.latest().files_of(tp), tp, 0)
    assert rows.column("offset").to_pylist() == [0, 1]
    untaken = _group(plain_store, _table(0, 1))
    untaken.write_ahead({tp: 2}, plain_store.log.latest().topics, files)
    assert len(_parquet_files(plain_store)) == 2
    untaken.finish()  # e.g. its sequence was refused before any attempt numbered it
    assert len(_parquet_files(plain_store)) == 1 and untaken.numbered.is_set()


def test_files_written_ahead_for_topics_that_changed_are_deleted_and_the_group_written_again(plain_store):
    plain_store.create_topic("t", partitions=1)
    committer = plain_store.context.committer("test")
    files = DataFileWriter(committer.uri)
    tp = TopicPartition("t", 0)
    group = _group(plain_store, _table(0, 2))
    group.write_ahead({tp: 0}, plain_store.log.latest().topics, files)
    guessed = _parquet_files(plain_store)
    plain_store.alter_topic_config("t", {"retention.ms": "3600000"})
    committer.append(group, RetryPolicy())
    group.finish()
    assert list(group.offsets) == [0, 1]
    assert not set(guessed) & set(_parquet_files(plain_store))  # deleted, written again
    assert len(_parquet_files(plain_store)) == 1


def test_a_group_written_ahead_leaves_its_fsyncs_to_its_commit(plain_store, monkeypatch):
    """Writing the next group ahead does not wait for the disk: its files are synced by the put
    of its own commit, together with the commit file and before it is linked, so the commit in
    flight meanwhile shares no journal commit with them and no commit references a file that
    is not durable."""
    import os

    plain_store.create_topic("t", partitions=1)
    committer = plain_store.context.committer("test")
    synced: list[str] = []
    linked: list[int] = []  # how many syncs had happened when the commit file was linked
    real_fsync, real_link = os.fsync, os.link

    def fsync(fd):
        real_fsync(fd)
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))

    def link(src, dst, *args, **kwargs):
        real_link(src, dst, *args, **kwargs)
        linked.append(len(synced))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    watch_native_syncs(monkeypatch)
    group = _group(plain_store, _table(0, 3))
    group.write_ahead({TopicPartition("t", 0): 0}, plain_store.log.latest().topics, DataFileWriter(committer.uri))
    (data,) = _parquet_files(plain_store)
    assert data not in synced  # written ahead, not synced
    committer.append(group, RetryPolicy())
    group.finish()
    assert _parquet_files(plain_store) == [data] and list(group.offsets) == [0, 1, 2]
    assert data in synced[: linked[0]] and os.path.dirname(data) in synced[: linked[0]]


def test_requests_are_answered_once_their_commit_landed_before_its_checksum_is_written(plain_store, monkeypatch):
    """The answer waits for the durable commit and nothing after it: the ``.crc`` a commit's
    post-commit step writes only saves readers work, so a slow one holds up no producer."""
    from lakelog.engine.commit.log_files import LogFiles

    plain_store.create_topic("t", partitions=1)
    committer = plain_store.context.committer("test")
    release = threading.Event()
    original = LogFiles.write_checksum

    def held(self, version, data):
        assert release.wait(10)
        return original(self, version, data)

    monkeypatch.setattr(LogFiles, "write_checksum", held)
    group = ProduceLinger(committer, RetryPolicy(), linger_ms=0)
    try:
        version = plain_store.log.latest_version()
        future = group.submit(_table(0, 3))
        assert list(future.result(timeout=10).offsets) == [0, 1, 2]
        log_dir = Path(plain_store.uri.removeprefix("file://")) / "_delta_log"
        assert (log_dir / f"{version + 1:020d}.json").exists()
        assert not (log_dir / f"{version + 1:020d}.crc").exists()  # answered before the checksum
    finally:
        release.set()
        group.close()
    assert (log_dir / f"{version + 1:020d}.crc").exists()


def test_records_placed_when_they_were_checked_are_not_placed_again(plain_store, monkeypatch):
    """The agent places each request's records once, to refuse a bad one alone; the group they
    join keeps those placements instead of placing every record a second time."""
    from lakelog.kafka_endpoint import produce_linger

    plain_store.create_topic("t", partitions=2)
    state = plain_store.log.latest()
    tables = [_table(1, 2), _table(0, 3), _table(1, 1)]
    placed = [place_records(state, [t]) for t in tables]

    def placed_again(*args, **kwargs):
        raise AssertionError("placed a second time")

    monkeypatch.setattr(produce_linger, "place_records", placed_again)
    group = ProduceLinger(plain_store.context.committer("test"), RetryPolicy(), linger_ms=200)
    try:
        futures = [group.submit(p) for p in placed]
        assert [list(f.result(timeout=30).offsets) for f in futures] == [[0, 1], [0, 1, 2], [2]]
    finally:
        group.close()


def test_the_committing_thread_gives_the_lock_up_once_a_commits_requests_are_answered(plain_store, monkeypatch):
    """After answering, the commit thread yields once (so the event loop sends the answers
    before the checksum is written): by then every request of the group has its answer."""
    import os

    from lakelog.kafka_endpoint import produce_linger

    plain_store.create_topic("t", partitions=1)
    futures = []
    seen: list[list[bool]] = []
    original = os.sched_yield
    monkeypatch.setattr(
        produce_linger.os, "sched_yield", lambda: (seen.append([f.done() for f in futures]), original())[-1]
    )
    group = ProduceLinger(plain_store.context.committer("test"), RetryPolicy(), linger_ms=200)
    try:
        futures.extend(group.submit(_table(0, n)) for n in (2, 3))
        assert [len(f.result(timeout=10)) for f in futures] == [2, 3]
    finally:
        group.close()
    assert seen == [[True, True]]
