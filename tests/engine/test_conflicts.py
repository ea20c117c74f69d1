"""The commit loop under real conflicts and lost responses, through the store's APIs."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog.engine.commit import RetryPolicy
from lakelog.engine.commit import committer as committer_module
from lakelog.engine.commit.info import TAG_OPERATION
from lakelog.engine.commit.log_files import LogFiles
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import CommitConflictError, CommitStateUnknownError, InvalidRecordError, RetriableError
from lakelog.engine.topics import TopicPartition
from lakelog.spark_connector.dataframe_write import DataFrameAppend
from lakelog.store import Store


class Contended(DataFrameAppend):
    """A DataFrame append during whose every reservation attempt (up to ``times``) a rival
    commits first; with ``during_build``, during the writing of its files instead."""

    def __init__(self, spark, df, topic, uri, rival, times, *, during_build=False):
        super().__init__(spark, df, topic, uri)
        self.rival = rival
        self.times = times
        self.during_build = during_build
        self.attempts = 0
        self.builds = 0

    def prepare(self, view):
        counts = super().prepare(view)
        if not self.during_build:
            self.attempts += 1
            if self.attempts <= self.times:
                self.rival(self.attempts)
        return counts

    def build(self, ends, topics, append_time_ms):
        self.builds += 1
        if self.during_build:
            for attempt in range(1, self.times + 1):
                self.rival(attempt)
        return super().build(ends, topics, append_time_ms)


def values(store, topic):
    state = store.log.latest()
    found = []
    for p in range(state.topics[topic].partitions):
        tp = TopicPartition(topic, p)
        rows = PartitionReader(store.uri).read(state.files_of(tp).all(), tp, 0)
        found += [
            (p, o, bytes(v).decode())
            for o, v in zip(rows.column("offset").to_pylist(), rows.column("value").to_pylist(), strict=True)
        ]
    return sorted(found)


def rival_writer(store, topic, partition):
    other = Store.open(store.uri)  # its own log and committer

    def commit(attempt):
        with other.producer(linger_ms=0) as producer:
            producer.send(topic, f"rival-{attempt}", partition=partition).get()

    return commit


@pytest.mark.spark
def test_retries_are_bounded_and_exhaustion_commits_nothing(store, spark):
    store.create_topic("t", partitions=2)
    ours = spark.createDataFrame([("ours", 0)], "value string, partition int")
    batch = Contended(spark, ours, "t", store.uri, rival_writer(store, "t", 0), times=99)
    with pytest.raises(CommitConflictError, match="3 times") as caught:
        store.context.admin.append_reserved(batch, RetryPolicy(retries=2, backoff_ms=1, backoff_max_ms=1))
    assert isinstance(caught.value, RetriableError) and caught.value.attempts == 3
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "rival-2"), (0, 2, "rival-3")]


@pytest.mark.spark
def test_a_conflict_is_retried_after_the_rivals_offsets(store, spark):
    store.create_topic("t", partitions=2)
    ours = spark.createDataFrame([("ours", 0)], "value string, partition int")
    batch = Contended(spark, ours, "t", store.uri, rival_writer(store, "t", 0), times=1)
    result = store.context.admin.append_reserved(batch, RetryPolicy(retries=2, backoff_ms=1))
    assert result.attempts == 2
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "ours")]


@pytest.mark.spark
def test_commits_during_the_write_neither_retry_it_nor_rewrite_its_files(store, spark):
    """Its offsets were reserved before its files were written: rivals append after them."""
    store.create_topic("t", partitions=2)
    ours = spark.createDataFrame([("ours-0", 0), ("ours-1", 0)], "value string, partition int")
    batch = Contended(spark, ours, "t", store.uri, rival_writer(store, "t", 0), times=3, during_build=True)
    result = store.context.admin.append_reserved(batch, RetryPolicy(retries=0))
    assert result.attempts == 1 and batch.builds == 1
    assert values(store, "t") == [
        (0, 0, "ours-0"),
        (0, 1, "ours-1"),
        (0, 2, "rival-1"),
        (0, 3, "rival-2"),
        (0, 4, "rival-3"),
    ]


@pytest.mark.spark
def test_a_write_that_loses_its_optimistic_race_reserves_and_the_next_reserves_first(store, spark, monkeypatch):
    """Store.write appends optimistically (one commit); when a rival appends to its partitions
    meanwhile, it reserves and writes its files once more, and this process's next writes to
    the topic reserve first."""
    from lakelog.spark_connector import dataframe_write

    store.create_topic("t", partitions=2)
    rival = rival_writer(store, "t", 0)
    made = []

    class Raced(DataFrameAppend):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.builds = 0
            made.append(self)

        def build(self, ends, topics, append_time_ms):
            self.builds += 1
            if len(made) == 1 and self.builds == 1:
                rival(1)
            return super().build(ends, topics, append_time_ms)

    monkeypatch.setattr(dataframe_write, "DataFrameAppend", Raced)
    ours = spark.createDataFrame([("ours-0", 0), ("ours-1", 1)], "value string, partition int")
    first = store.write(ours, topic="t")
    assert made[0].builds == 2
    assert _operations(store)[-2:] == ["reserve", "write"]
    assert {tp.partition: (r.start, r.count) for tp, r in first.ranges.items()} == {0: (1, 1), 1: (0, 1)}
    store.write(spark.createDataFrame([("next", 0)], "value string, partition int"), topic="t")
    assert made[1].builds == 1 and _operations(store)[-2:] == ["reserve", "write"]
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "ours-0"), (0, 2, "next"), (1, 0, "ours-1")]
    # A row refused by the write job of a reserved write: its offsets become an aborted range.
    refused = spark.createDataFrame([("bad", 0, -5)], "value string, partition int, timestamp long")
    with pytest.raises(InvalidRecordError, match="timestamp -5"):
        store.write(refused, topic="t")
    assert _operations(store)[-2:] == ["reserve", "abort_reservation"]
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "ours-0"), (0, 2, "next"), (1, 0, "ours-1")]
    # No file of the lost attempt is left: every data file is in the table.
    state = store.log.latest()
    on_disk = {p.name for p in Path(store.uri.removeprefix("file://")).glob("topic=t/partition=*/*.parquet")}
    referenced = {f.path.rsplit("/", 1)[-1] for p in range(2) for f in state.files_of(TopicPartition("t", p)).all()}
    assert on_disk == referenced


def _operations(store):
    """lakelog's operation tag of every commit, oldest first."""
    found = []
    for version in range(store.log.latest_version() + 1):
        info = store.log.read_commit(version).commit_info
        found.append((info.tags or {}).get(TAG_OPERATION) if info is not None else None)
    return found


@pytest.mark.spark
def test_commits_to_other_partitions_do_not_conflict(store, spark):
    store.create_topic("t", partitions=2)
    ours = spark.createDataFrame([("ours", 0)], "value string, partition int")
    batch = Contended(spark, ours, "t", store.uri, rival_writer(store, "t", 1), times=1)
    result = store.context.admin.append_reserved(batch, RetryPolicy(retries=0))
    assert result.attempts == 1
    assert values(store, "t") == [(0, 0, "ours"), (1, 0, "rival-1")]


@pytest.mark.spark
def test_a_topic_change_during_a_commit_makes_it_retry_against_new_metadata(store, spark):
    store.create_topic("t", partitions=1)
    other = Store.open(store.uri)
    ours = spark.createDataFrame([("ours",)], "value string")
    batch = Contended(spark, ours, "t", store.uri, lambda _: other.create_partitions("t", 3), times=1)
    result = store.context.admin.append_reserved(batch, RetryPolicy(retries=1, backoff_ms=1))
    assert result.attempts == 2
    assert store.describe_topic("t").partitions == 3


def test_a_producer_whose_retries_run_out_fails_its_records_only(plain_store, monkeypatch):
    store = plain_store
    store.create_topic("t")
    producer = store.producer(retries=0, linger_ms=0)
    rival = rival_writer(store, "t", 0)
    original = LogFiles.put_commit
    raced = []

    def lose_race_then_put(self, *args, **kwargs):
        if not raced:  # the rival lands between our plan and our put: our offsets are taken
            raced.append(True)
            rival(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogFiles, "put_commit", lose_race_then_put)
    # The rival lands inside our turn: it goes on without one (as a foreign writer would) instead
    # of waiting for ours; files written before the turn are renumbered, never lost to a race.
    monkeypatch.setattr(committer_module, "TURN_WAIT_MAX_S", 0.05)
    future = producer.send("t", "ours")
    producer.flush()
    assert isinstance(future.exception(), CommitConflictError)
    assert producer.send("t", "next").get().offset == 1
    producer.close()
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "next")]


def lose_responses(monkeypatch, *, land: bool, times: int = 1_000_000):
    """Make the next ``times`` puts of a commit file lose their response (after landing when ``land``)."""
    original = LogFiles.put_commit
    calls = []

    def put_commit(self, version, data, *rest):
        calls.append(version)
        if len(calls) > times:
            return original(self, version, data, *rest)
        if land:
            original(self, version, data, *rest)
        raise CommitStateUnknownError("the connection dropped before the answer arrived")

    monkeypatch.setattr(LogFiles, "put_commit", put_commit)
    return calls


def test_a_commit_whose_response_was_lost_after_landing_counts_once(plain_store, monkeypatch):
    store = plain_store
    store.create_topic("t")
    calls = lose_responses(monkeypatch, land=True, times=1)
    with store.producer(linger_ms=0) as producer:
        first = producer.send("t", "once").get(timeout=60)
        second = producer.send("t", "next").get(timeout=60)
    assert (first.offset, second.offset) == (0, 1)
    assert len(calls) == 2  # settled by reading the version back: no second put of the first batch
    assert values(store, "t") == [(0, 0, "once"), (0, 1, "next")]


def test_a_commit_lost_before_landing_is_settled_and_committed_once(plain_store, monkeypatch):
    store = plain_store
    store.create_topic("t")
    version = store.log.latest_version()
    calls = lose_responses(monkeypatch, land=False, times=2)
    with store.producer(linger_ms=0, retry_backoff_ms=1) as producer:
        assert producer.send("t", "once").get(timeout=60).offset == 0
    # The lost version was taken by an empty commit (whose own first put was lost too, and
    # settled by trying again), so the lost request can never land; the batch then landed after it.
    assert calls == [version + 1, version + 1, version + 1, version + 2]
    assert store.log.latest_version() == version + 2
    assert store.log.read_commit(version + 1).adds == ()
    assert values(store, "t") == [(0, 0, "once")]


def test_an_outcome_that_cannot_be_settled_is_unknown_and_reported_so(plain_store, monkeypatch):
    store = plain_store
    store.create_topic("t")
    original = LogFiles.put_commit

    def unreadable(self, version):
        raise OSError("storage unreachable")

    def put_then_lose_the_log(self, version, data, *rest):
        original(self, version, data, *rest)
        monkeypatch.setattr(LogFiles, "read_commit", unreadable)
        raise CommitStateUnknownError("the connection dropped before the answer arrived")

    monkeypatch.setattr(LogFiles, "put_commit", put_then_lose_the_log)
    with store.producer(linger_ms=0, retries=2, retry_backoff_ms=1) as producer:
        future = producer.send("t", "maybe")
        producer.flush()
    assert isinstance(future.exception(), CommitStateUnknownError)
    monkeypatch.undo()
    # It did land once (the first put), and only once: later attempts found the log unreadable.
    assert values(Store.open(store.uri), "t") == [(0, 0, "maybe")]
