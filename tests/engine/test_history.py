"""History and time travel on a real store: who wrote what, a topic as of a version or time,
the value of a key at a time across log compaction."""

from __future__ import annotations

import time

import pytest

from lakelog.cli import main as cli_main
from lakelog.compaction import maintain
from lakelog.engine.commit import Committer
from lakelog.engine.errors import InvalidOffsetError, InvalidRecordError, UnknownTopicOrPartitionError
from tests.compaction.produce import commit

pytestmark = pytest.mark.spark


def tick() -> int:
    """A time strictly between the commit before and the commit after."""
    time.sleep(0.02)
    now = int(time.time() * 1000)
    time.sleep(0.02)
    return now


@pytest.fixture(scope="module")
def prices(spark, tmp_path_factory):
    """A compacted topic written by an idempotent producer, a transaction and direct commits,
    then compacted; the times between its commits are kept."""
    from lakelog.store import Store

    store = Store.open(tmp_path_factory.mktemp("history") / "store", spark=spark)
    store.create_topic("prices", partitions=1, config={"cleanup.policy": "compact", "min.compaction.lag.ms": 0})
    marks = {"created": tick()}
    with store.producer(client_id="feed") as producer:
        producer.send("prices", b"10", key=b"apple").get()
    marks["apple=10"] = tick()
    txn = store.transactional_producer("repricer")
    txn.init_transactions()
    txn.begin_transaction()
    txn.send("prices", b"11", key=b"apple")
    txn.send("prices", b"5", key=b"pear")
    txn.commit_transaction()
    txn.close()
    marks["apple=11"] = tick()
    writer = Committer(store.log, "direct")
    now = int(time.time() * 1000)
    commit(writer, "prices", 0, [(b"apple", b"12", now)])
    marks["apple=12"] = tick()
    commit(writer, "prices", 0, [(b"pear", None, now)])  # a tombstone, the newest file
    marks["pear deleted"] = tick()
    report = maintain(store, topics=["prices"], vacuum=False, optimize=False)
    assert report.topics[0].records_removed_by_compaction == 1  # apple=11 (apple=10 starts its file)
    return store, marks


def test_history_names_each_writer_and_the_offsets_added_and_removed(prices):
    store, _ = prices
    entries = store.history_entries("prices")
    assert [e.operation for e in entries] == ["create_topic", "produce", "transaction", "produce", "produce", "compact"]
    produce, transaction, compact = entries[1], entries[2], entries[5]
    assert produce.client_id == "feed" and produce.producer_id is not None
    assert (transaction.transactional_id, transaction.transaction_epoch) == ("repricer", 0)
    assert [(c.start_offset, c.end_offset, c.records) for c in transaction.added()] == [(1, 3, 2)]
    # compaction removed the three older files and added one holding three of their four records
    assert [(c.start_offset, c.end_offset, c.records, c.files) for c in compact.removed()] == [(0, 4, 4, 3)]
    assert [(c.start_offset, c.end_offset, c.records, c.files) for c in compact.added()] == [(0, 4, 3, 1)]

    df = store.history("prices")
    assert df.columns == [
        "version",
        "timestamp",
        "operation",
        "delta_operation",
        "client_id",
        "producer_id",
        "transactional_id",
        "transaction_epoch",
        "query_id",
        "topic",
        "added",
        "removed",
        "details",
    ]
    row = df.where("operation = 'compact'").first()
    assert row.delta_operation == "LOG COMPACTION" and row.removed[0].records == 4 and row.added[0].records == 3
    assert df.count() == len(entries)
    assert store.history().count() > len(entries)  # the whole store also has the transaction's init


def test_a_topic_reads_as_it_was_at_a_version_or_a_time(prices):
    store, marks = prices
    values = lambda df: [(r.offset, r.value) for r in df.orderBy("offset").collect()]  # noqa: E731
    transaction_version = store.history_entries("prices")[2].version
    assert values(store.read("prices", as_of_version=transaction_version)) == [(0, b"10"), (1, b"11"), (2, b"5")]
    assert values(store.read("prices", as_of_timestamp=marks["apple=11"])) == [(0, b"10"), (1, b"11"), (2, b"5")]
    assert values(store.read("prices", as_of_timestamp=marks["apple=10"])) == [(0, b"10")]
    assert values(store.read("prices", as_of_timestamp=marks["created"])) == []
    # offsets resolve at that version too: "latest" then was 1
    late = store.read("prices", starting_offsets={"prices": {0: 1}}, as_of_timestamp=marks["apple=12"])
    assert values(late) == [(1, b"11"), (2, b"5"), (3, b"12")]
    # today the compacted log no longer holds apple=11
    assert values(store.read("prices")) == [(0, b"10"), (2, b"5"), (3, b"12"), (4, None)]


def test_the_value_of_a_key_at_a_time_survives_log_compaction(prices):
    store, marks = prices
    assert store.value_at("prices", b"apple", as_of_timestamp=marks["created"]) is None
    assert store.value_at("prices", b"apple", as_of_timestamp=marks["apple=10"]) == b"10"
    assert store.value_at("prices", "apple", as_of_timestamp=marks["apple=11"]) == b"11"  # compacted away since
    assert store.value_at("prices", b"pear", as_of_timestamp=marks["apple=12"]) == b"5"
    assert store.value_at("prices", b"pear", as_of_timestamp=marks["pear deleted"]) is None  # tombstone
    assert store.value_at("prices", b"apple") == b"12"
    assert store.value_at("prices", b"plum") is None


def test_bad_time_travel_is_refused_by_name(prices):
    store, marks = prices
    latest = store.log.latest_version()
    with pytest.raises(InvalidOffsetError, match=f"as_of_version {latest + 1} is outside the log's versions"):
        store.read("prices", as_of_version=latest + 1)
    with pytest.raises(InvalidOffsetError, match="before the oldest version"):
        store.read("prices", as_of_timestamp=0)
    with pytest.raises(InvalidOffsetError, match="in the future"):
        store.value_at("prices", b"apple", as_of_timestamp=int(time.time() * 1000) + 3_600_000)
    with pytest.raises(InvalidOffsetError, match="not both"):
        store.read("prices", as_of_version=1, as_of_timestamp=marks["apple=10"])
    with pytest.raises(UnknownTopicOrPartitionError, match="'prices'"):
        store.read("prices", as_of_version=0)  # the topic did not exist yet
    with pytest.raises(InvalidRecordError, match="key must be bytes or str"):
        store.value_at("prices", 7)
    assert store.value_at("prices", b"apple") == b"12"  # nothing changed


def test_a_version_whose_files_vacuum_deleted_is_named(store):
    store.create_topic("t", partitions=1, config={"cleanup.policy": "compact", "min.compaction.lag.ms": 0})
    writer = Committer(store.log, "w")
    now = int(time.time() * 1000)
    first = commit(writer, "t", 0, [(b"k", b"1", now), (b"k", b"2", now)])
    commit(writer, "t", 0, [(b"k", b"3", now), (b"k", b"4", now)])
    commit(writer, "t", 0, [(b"k", b"5", now)])
    maintain(store, topics=["t"], vacuum=True, vacuum_retention_hours=0)
    with pytest.raises(InvalidOffsetError, match=f"version {first} cannot be read any more: VACUUM deleted"):
        store.read("t", as_of_version=first)
    assert store.value_at("t", b"k") == b"5"


def test_cli_history_shows_writers_and_changes(prices, capsys):
    store, _ = prices
    assert cli_main(["--store", store.uri, "history", "--topic", "prices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["VERSION", "TIME", "OPERATION", "CLIENT", "WRITER", "CHANGES"]
    assert any("transaction" in line and "txn repricer epoch 0" in line and "+prices-0:1..2" in line for line in lines)
    assert any("compact" in line and "-prices-0:0..3" in line and "+prices-0:0..3(3)" in line for line in lines)
    assert cli_main(["--store", store.uri, "history", "--topic", "nope"]) == 6
    assert "nope" in capsys.readouterr().err
