"""A commit's next state is derived while the disk syncs its file (TableLog.prepare) and taken
once it landed, so nothing but the view's swap lies between a commit landing and its
acknowledgement; a state derived from another base is never taken. No Spark anywhere."""

from __future__ import annotations

import json
import os
import time

from lakelog.engine.commit import Committer, RetryPolicy, TableLog, TableState
from lakelog.engine.commit.follower import PreparedState
from lakelog.engine.commit.log_files import checksum_name, commit_name
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

T0 = TopicPartition("t", 0)
FAST = RetryPolicy(retries=5, backoff_ms=1, backoff_max_ms=5)


def batch(values: list[str]) -> ProducerBatch:
    records = RecordBatch()
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        records.add(T0, None, v.encode(), None, now, len(v), i)
    return ProducerBatch(records, 1, None)


def test_a_commits_state_is_derived_before_its_file_appears_and_taken_once_it_landed(tmp_path, monkeypatch):
    store = Store.open(str(tmp_path / "store"))
    store.create_topic("t", partitions=1)
    committer = Committer(TableLog(store.uri), "test")
    log_dir = os.path.join(store.uri, "_delta_log")
    applied: list[tuple[int, bool]] = []
    original = TableState.apply

    def apply(self, version, commit):
        applied.append((version, os.path.exists(os.path.join(log_dir, commit_name(version)))))
        return original(self, version, commit)

    monkeypatch.setattr(TableState, "apply", apply)
    committer.latest()  # the view follows the log up to now
    applied.clear()
    result = committer.append(batch(["a", "b"]), FAST)
    version = result.version
    assert version is not None
    # Derived once, while the commit file was not yet there; advance took it as it was.
    assert applied == [(version, False)]
    known = committer.log.known()
    assert known is not None and known.version == version
    fresh = TableLog(store.uri).latest()
    assert known.ends == fresh.ends == {T0: 2}
    assert sorted(f.path for f in known.files) == sorted(f.path for f in fresh.files)
    # The .crc written is the derived state's checksum.
    with open(os.path.join(log_dir, checksum_name(version))) as crc:
        written = json.load(crc)
    assert known.checksum is not None and written == dict(known.checksum)
    assert written["numFiles"] == len(fresh.files)


def test_a_state_prepared_from_another_base_is_not_taken(tmp_path):
    store = Store.open(str(tmp_path / "store"))
    store.create_topic("t", partitions=1)
    committer = Committer(TableLog(store.uri), "test")
    committer.append(batch(["a"]), FAST)
    log = TableLog(store.uri)
    base = log.latest()
    version = base.version + 1
    committer.append(batch(["b", "c"]), FAST)  # lands as `version`, written by another view
    commit = log.read_commit(version)
    assert commit is not None
    prepared = log.prepare(version, commit)
    assert prepared is not None and prepared.base is base and prepared.state.ends == {T0: 3}
    # A state derived from a base that is not the one known now (an equal but other object)
    # is derived again rather than taken.
    stale = PreparedState(TableLog(store.uri).latest(), base, None)
    advanced = log.advance(version, commit, stale)
    assert advanced is not None and advanced is not base and advanced.ends == {T0: 3}
    # Nothing to prepare from when the version does not follow the known state.
    assert log.prepare(version, commit) is None
    assert log.prepare(version + 5, commit) is None
