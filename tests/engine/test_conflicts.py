"""The commit loop under real Delta conflicts, and commits whose outcome is unknown."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JError

from engine import LogStore
from engine.commit import DataWriteError, RetryPolicy
from engine.dataframe_append import DataFrameAppend
from engine.delta_jvm import DeltaTxn
from engine.errors import CommitConflictError, CommitStateUnknownError, RetriableError

pytestmark = pytest.mark.spark


class Contended(DataFrameAppend):
    """An append during whose every attempt (up to ``times``) a rival commits first."""

    def __init__(self, spark, df, topic, rival, times):
        super().__init__(spark, df, topic)
        self.rival = rival
        self.times = times
        self.attempts = 0

    def build(self, ends, topics, append_time_ms):
        self.attempts += 1
        if self.attempts <= self.times:
            self.rival(self.attempts)
        return super().build(ends, topics, append_time_ms)


def values(store, topic):
    return sorted((r.partition, r.offset, bytes(r.value).decode()) for r in store.read(topic).collect())


def rival_writer(store, spark, topic, partition):
    other = LogStore.open(store.uri, spark=spark)  # its own writer and view

    def commit(attempt):
        other.write(spark.createDataFrame([(f"rival-{attempt}", partition)], "value string, partition int"), topic)

    return commit


def test_retries_are_bounded_and_exhaustion_commits_nothing(store, spark):
    store.create_topic("t", partitions=2)
    ours = spark.createDataFrame([("ours", 0)], "value string, partition int")
    batch = Contended(spark, ours, "t", rival_writer(store, spark, "t", 0), times=99)
    with pytest.raises(CommitConflictError, match="3 times") as caught:
        store._writer.append(batch, RetryPolicy(retries=2, backoff_ms=1, backoff_max_ms=1))
    assert isinstance(caught.value, RetriableError) and caught.value.attempts == 3
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "rival-2"), (0, 2, "rival-3")]


def test_a_conflict_is_retried_after_the_rivals_offsets(store, spark):
    store.create_topic("t", partitions=2)
    ours = spark.createDataFrame([("ours", 0)], "value string, partition int")
    batch = Contended(spark, ours, "t", rival_writer(store, spark, "t", 0), times=1)
    result = store._writer.append(batch, RetryPolicy(retries=2, backoff_ms=1))
    assert result.attempts == 2
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "ours")]


def test_commits_to_other_partitions_do_not_conflict(store, spark):
    store.create_topic("t", partitions=2)
    ours = spark.createDataFrame([("ours", 0)], "value string, partition int")
    batch = Contended(spark, ours, "t", rival_writer(store, spark, "t", 1), times=1)
    result = store._writer.append(batch, RetryPolicy(retries=0))
    assert result.attempts == 1
    assert values(store, "t") == [(0, 0, "ours"), (1, 0, "rival-1")]


def test_a_topic_change_during_a_commit_makes_it_retry_against_new_metadata(store, spark):
    store.create_topic("t", partitions=1)
    other = LogStore.open(store.uri, spark=spark)
    ours = spark.createDataFrame([("ours",)], "value string")
    batch = Contended(spark, ours, "t", lambda _: other.create_partitions("t", 3), times=1)
    result = store._writer.append(batch, RetryPolicy(retries=1, backoff_ms=1))
    assert result.attempts == 2
    assert store.describe_topic("t").partitions == 3


def test_a_producer_whose_retries_run_out_fails_its_records_only(store, spark):
    store.create_topic("t")
    producer = store.producer(retries=0, linger_ms=0)
    rival = rival_writer(store, spark, "t", 0)
    original = DeltaTxn.add_files
    raced = []

    def write_then_lose_race(self, *args):
        written = original(self, *args)
        if not raced:
            raced.append(True)
            rival(1)
        return written

    DeltaTxn.add_files = write_then_lose_race
    try:
        future = producer.send("t", "ours")
        producer.flush()
    finally:
        DeltaTxn.add_files = original
    assert isinstance(future.exception(), CommitConflictError)
    assert producer.send("t", "next").get().offset == 1
    producer.close()
    assert values(store, "t") == [(0, 0, "rival-1"), (0, 1, "next")]


def fail_commit(monkeypatch, *, land: bool, times: int = 1_000_000):
    """Make the next ``times`` commit calls fail (after landing when ``land``)."""
    original = DeltaTxn.commit
    calls = []

    def commit(self, actions, operation, tags, extra=()):
        calls.append(True)
        if len(calls) > times:
            return original(self, actions, operation, tags, extra)
        if land:
            original(self, actions, operation, tags, extra)
        raise Py4JError("Answer from Java side is empty")  # the gateway died mid-call

    monkeypatch.setattr(DeltaTxn, "commit", commit)
    return calls


def test_a_commit_that_landed_before_its_call_failed_counts_once(store, spark, monkeypatch):
    store.create_topic("t")
    fail_commit(monkeypatch, land=True)
    result = store.write(spark.createDataFrame([("once",)], "value string"), topic="t")
    assert result.version == store.reader.latest_version()
    monkeypatch.undo()
    assert values(store, "t") == [(0, 0, "once")]


def test_a_commit_that_did_not_land_is_reported_as_not_committed(store, spark, monkeypatch):
    store.create_topic("t")
    version = store.reader.latest_version()
    fail_commit(monkeypatch, land=False)
    with pytest.raises(DataWriteError, match="did not land"):
        store.write(spark.createDataFrame([("lost",)], "value string"), topic="t")
    assert store.reader.latest_version() == version


def test_an_outcome_that_cannot_be_checked_is_unknown(store, spark, monkeypatch):
    store.create_topic("t")
    fail_commit(monkeypatch, land=True)

    def unreadable(self):
        raise OSError("storage unreachable")

    monkeypatch.setattr(type(store.reader), "latest_version", unreadable)
    with pytest.raises(CommitStateUnknownError, match="could not be re-read"):
        store.write(spark.createDataFrame([("maybe",)], "value string"), topic="t")


# -- the idempotent producer: retries after an unknown outcome ---------------


def test_an_idempotent_retry_after_a_landed_commit_does_not_duplicate(store, monkeypatch):
    store.create_topic("t")
    calls = fail_commit(monkeypatch, land=True, times=1)
    with store.producer(linger_ms=0) as producer:
        first = producer.send("t", "once").get(timeout=60)
        second = producer.send("t", "next").get(timeout=60)
    assert (first.offset, second.offset) == (0, 1)
    assert len(calls) == 2  # the retry found the first batch committed and did not commit it again
    monkeypatch.undo()
    assert values(store, "t") == [(0, 0, "once"), (0, 1, "next")]


def test_an_idempotent_retry_after_a_lost_commit_commits_once(store, monkeypatch):
    store.create_topic("t")
    calls = fail_commit(monkeypatch, land=False, times=2)
    with store.producer(linger_ms=0, retry_backoff_ms=1) as producer:
        assert producer.send("t", "once").get(timeout=60).offset == 0
    assert len(calls) == 3
    monkeypatch.undo()
    assert values(store, "t") == [(0, 0, "once")]


def test_without_idempotence_a_landed_commit_is_found_by_its_files(store, monkeypatch):
    store.create_topic("t")
    calls = fail_commit(monkeypatch, land=True, times=1)
    with store.producer(linger_ms=0, enable_idempotence=False) as producer:
        assert producer.send("t", "once").get(timeout=60).offset == 0
    assert len(calls) == 1
    monkeypatch.undo()
    assert values(store, "t") == [(0, 0, "once")]


def test_unknown_outcomes_until_retries_run_out_are_reported_as_unknown(store, monkeypatch):
    store.create_topic("t")
    version = store.reader.latest_version()
    fail_commit(monkeypatch, land=False)
    with store.producer(linger_ms=0, retries=2, retry_backoff_ms=1) as producer:
        future = producer.send("t", "maybe")
        producer.flush()
    assert isinstance(future.exception(), CommitStateUnknownError)
    assert store.reader.latest_version() == version
