"""Commits written without a JVM (Python Data Source workers) racing JVM commits."""

from __future__ import annotations

import threading

import pytest

from engine.commit import AppTransaction, RetryPolicy
from engine.direct_commit import DirectCommitter
from engine.errors import CommitConflictError, InvalidTxnStateError
from engine.offsets import TopicPartition
from engine.producer_batch import ProducerBatch, RecordBatch

pytestmark = pytest.mark.spark


def batch(label: str, n: int, app: AppTransaction | None = None) -> ProducerBatch:
    records = RecordBatch()
    for i in range(n):
        records.add(TopicPartition("t", 0), None, f"{label}-{i}".encode(), None, 1000, 8, -1)
    return ProducerBatch(records, -1, app)


def test_direct_and_jvm_commits_racing_keep_offsets_dense_and_batches_whole(store):
    store.create_topic("t", partitions=1)
    errors = []

    def direct(worker: int) -> None:
        try:
            committer = DirectCommitter(store.uri, f"direct-{worker}")
            for b in range(15):
                committer.append(batch(f"d{worker}.{b}", 5), RetryPolicy(retries=100, backoff_ms=5))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=direct, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    with store.producer(linger_ms=0) as producer:
        for b in range(15):
            for i in range(5):
                producer.send("t", f"j.{b}-{i}", partition=0)
            producer.flush()
    for t in threads:
        t.join()
    assert not errors
    rows = store.read("t").orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(300))
    values = [bytes(r.value).decode() for r in rows]
    for start in range(0, 300, 5):  # every batch of 5 landed whole and in order
        labels = {v.rsplit("-", 1)[0] for v in values[start : start + 5]}
        assert len(labels) == 1
        assert [v.rsplit("-", 1)[1] for v in values[start : start + 5]] == ["0", "1", "2", "3", "4"]


def test_conflicts_are_retried_within_the_bound_then_nothing_is_committed(store, monkeypatch):
    store.create_topic("t", partitions=1)
    committer = DirectCommitter(store.uri, "direct")
    version = committer.reader.latest_version()
    attempts = []
    monkeypatch.setattr("engine.direct_commit.put_commit", lambda *a: attempts.append(a) or False)
    with pytest.raises(CommitConflictError):
        committer.append(batch("x", 3), RetryPolicy(retries=2, backoff_ms=1))
    assert len(attempts) == 3
    assert committer.reader.latest_version() == version
    assert store.end_offsets("t") == {0: 0}


def test_an_app_transaction_commits_once(store):
    store.create_topic("t", partitions=1)
    committer = DirectCommitter(store.uri, "direct")
    committer.append(batch("a", 2, AppTransaction("sink-x", 0)), RetryPolicy())
    with pytest.raises(InvalidTxnStateError):
        committer.append(batch("a", 2, AppTransaction("sink-x", 0)), RetryPolicy())
    assert committer.app_version(committer.latest_view(), "sink-x") == 0
    assert store.end_offsets("t") == {0: 2}
