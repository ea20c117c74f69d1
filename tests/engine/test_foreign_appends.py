"""Rows another writer appends into the log table (a plain Delta append, here delta-rs'
``write_deltalake``) never surface as records and never move an offset: not for readers
that followed the log while it happened, not for a process that opens the store
afterwards, not for producers, consumers of any fetch size, offset lookups or
maintenance. Each read that meets them says so with a ForeignRowsWarning. No JVM."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakelog.compaction import maintain
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import ForeignRowsWarning
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

NOW = int(time.time() * 1000)


def foreign_rows(rows: list[tuple[int, int, bytes]], ts_ms: int = NOW) -> pa.Table:
    """Log-table rows (partition, offset, value) of topic ``t``, as a careless writer makes them."""
    n = len(rows)
    return pa.table(
        {
            "topic": pa.array(["t"] * n, pa.string()),
            "partition": pa.array([p for p, _, _ in rows], pa.int32()),
            "offset": pa.array([o for _, o, _ in rows], pa.int64()),
            "timestamp": pa.array([ts_ms * 1000] * n, pa.timestamp("us", tz="UTC")),
            "timestamp_type": pa.array([0] * n, pa.int32()),
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array([v for _, _, v in rows], pa.binary()),
            "headers": pa.array([[]] * n, LOG_ARROW_SCHEMA.field("headers").type),
            "producer_id": pa.array([None] * n, pa.int64()),
            "producer_epoch": pa.array([None] * n, pa.int32()),
            "sequence": pa.array([None] * n, pa.int32()),
        },
        schema=pa.schema([pa.field(f.name, f.type, nullable=True) for f in LOG_ARROW_SCHEMA]),
    )


def append_foreign(store: Store, rows: list[tuple[int, int, bytes]]) -> None:
    write_deltalake(store.uri, foreign_rows(rows), mode="append", partition_by=["topic", "partition"])


def produce(store: Store, partition: int, values: list[bytes]) -> list[int]:
    producer = store.producer(**{"client.id": "p"})
    futures = [producer.send("t", v, partition=partition) for v in values]
    producer.flush()
    offsets = [f.get(10).offset for f in futures]
    producer.close()
    return offsets


def consume_all(store: Store, fetch_min_records: int | None) -> dict[int, list[tuple[int, bytes]]]:
    config = {"auto.offset.reset": "earliest", "client.id": "c"}
    if fetch_min_records is not None:
        config["fetch.min.records"] = fetch_min_records
    consumer = store.consumer(**config)
    consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    seen: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    idle = 0
    while idle < 3:
        batch = consumer.poll(max_records=5, timeout_ms=50)
        if not batch:
            idle += 1
            continue
        idle = 0
        for record in batch:
            seen[record.partition].append((record.offset, record.value))
    consumer.close()
    return seen


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open(tmp_path / "store")
    s.create_topic("t", partitions=2)
    return s


def expected(values: dict[int, list[bytes]]) -> dict[int, list[tuple[int, bytes]]]:
    return {p: list(enumerate(vs)) for p, vs in values.items()}


def test_foreign_rows_never_surface_never_move_offsets(store: Store, tmp_path: Path) -> None:
    values = {0: [f"a{i}".encode() for i in range(25)], 1: [f"b{i}".encode() for i in range(25)]}
    for p, vs in values.items():
        assert produce(store, p, vs) == list(range(25))
    # A consumer that followed the log before the foreign commit, and one that opens after.
    follower = Store.open(tmp_path / "store")
    follower.end_offsets("t")
    # The case: two rows at offsets 0 and 1, one past the end.
    append_foreign(store, [(0, 0, b"X0"), (0, 1, b"X1"), (1, 30, b"far")])
    with pytest.warns(ForeignRowsWarning):
        PartitionReader(store.uri).read(store.log.latest().files_of(TopicPartition("t", 0)), TopicPartition("t", 0), 0)
    for opened in (follower, Store.open(tmp_path / "store")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ForeignRowsWarning)
            assert opened.end_offsets("t") == {0: 25, 1: 25}
            assert opened.beginning_offsets("t") == {0: 0, 1: 0}
            for fetch in (1, 7, None):
                assert consume_all(opened, fetch) == expected(values), fetch
            hit = opened.offsets_for_times("t", {0: 0, 1: 0})
            assert hit[0].offset == 0 and hit[1].offset == 0
    # The next produce goes on from the committed end (not from the foreign row at 30).
    fresh = Store.open(tmp_path / "store")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForeignRowsWarning)
        assert produce(fresh, 1, [b"b25", b"b26"]) == [25, 26]
        assert produce(fresh, 0, [b"a25"]) == [25]
        values[1] += [b"b25", b"b26"]
        values[0] += [b"a25"]
        assert consume_all(Store.open(tmp_path / "store"), 1) == expected(values)
        assert Store.open(tmp_path / "store").end_offsets("t") == {0: 26, 1: 27}


def test_foreign_rows_at_offsets_the_log_reaches_later_stay_out(store: Store, tmp_path: Path) -> None:
    """A row appended past the end is not a record; when lakelog's own records reach that
    offset later, lakelog's row is the record there, not the foreign one."""
    produce(store, 0, [b"a0", b"a1"])
    append_foreign(store, [(0, 3, b"early"), (0, 4, b"early")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForeignRowsWarning)
        assert produce(Store.open(tmp_path / "store"), 0, [b"a2", b"a3", b"a4", b"a5"]) == [2, 3, 4, 5]
        for opened in (store, Store.open(tmp_path / "store")):
            seen = consume_all(opened, 1)[0]
            assert seen == [(i, f"a{i}".encode()) for i in range(6)]


def test_maintenance_keeps_records_and_never_adopts_foreign_rows(store: Store, tmp_path: Path) -> None:
    values = {0: [f"a{i}".encode() for i in range(10)], 1: [f"b{i}".encode() for i in range(10)]}
    for p, vs in values.items():
        for v in vs:  # one file per record: maintenance has something to merge
            produce(store, p, [v])
    append_foreign(store, [(0, 3, b"dup"), (0, 12, b"far"), (1, 9, b"dup"), (1, 10, b"far")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForeignRowsWarning)
        report = maintain(store, topics=["t"], vacuum=False)
        assert report.topics[0].versions, report.lines()
        for opened in (store, Store.open(tmp_path / "store")):
            assert consume_all(opened, 1) == expected(values)
            assert opened.end_offsets("t") == {0: 10, 1: 10}
        assert produce(Store.open(tmp_path / "store"), 0, [b"a10"]) == [10]


def test_a_table_without_end_markers_still_reads(store: Store, tmp_path: Path) -> None:
    """Partitions no lakelog append has marked (tables written before the markers) end one
    past their largest offset, as before."""
    produce(store, 0, [b"a0", b"a1"])
    state = store.log.latest()
    tp = TopicPartition("t", 0)
    assert state.committed_end(tp) == 2
    assert state.committed_end(TopicPartition("t", 1)) is None
    assert state.end_offset(TopicPartition("t", 1)) == 0


def test_foreign_rows_below_the_log_start_retention_left_stay_out(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=2, config={"retention.ms": 3_600_000})
    old = NOW - 10 * 3_600_000
    producer = store.producer(**{"client.id": "p", "linger.ms": 0})
    for i in range(5):  # one file per record; the first four are past retention
        producer.send("t", f"a{i}".encode(), partition=0, timestamp=old if i < 4 else NOW).get(10)
    producer.close()
    maintain(store, topics=["t"], vacuum=False, now_ms=NOW)
    assert store.beginning_offsets("t")[0] == 4
    append_foreign(store, [(0, 1, b"below"), (0, 2, b"below")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForeignRowsWarning)
        for opened in (store, Store.open(tmp_path / "store")):
            assert opened.beginning_offsets("t") == {0: 4, 1: 0}
            assert consume_all(opened, 1)[0] == [(4, b"a4")]
            maintain(opened, topics=["t"], vacuum=False, now_ms=NOW)
            assert consume_all(opened, None)[0] == [(4, b"a4")]
    with pytest.warns(ForeignRowsWarning, match="below its log start"):
        tp = TopicPartition("t", 0)
        PartitionReader(store.uri).read(store.log.latest().files_of(tp), tp, 0)


def test_the_newest_record_by_timestamp_is_found_across_files_and_never_a_foreign_row(store: Store) -> None:
    """ListOffsets MAX_TIMESTAMP (-3): the earliest record holding the largest timestamp; the files
    whose statistics stay below it are not read; a foreign row past the end is no record."""
    for stamps in ([1_000, 5_000], [2_000, 9_000, 3_000], [9_000, 4_000]):  # one file each
        with store.producer(linger_ms=0) as producer:
            for ts in stamps:
                producer.send("t", b"x", partition=0, timestamp=ts)
    tp = TopicPartition("t", 0)
    reader = PartitionReader(store.uri)
    read = []
    real_read_file = reader.read_file
    reader.read_file = lambda path, *a, **kw: read.append(path) or real_read_file(path, *a, **kw)  # type: ignore[method-assign]
    assert reader.max_timestamp(store.log.latest().files_of(tp), tp) == (3, 9_000)
    assert len(read) == 2  # the first file's statistics (max 5000) rule it out
    assert reader.max_timestamp(store.log.latest().files_of(TopicPartition("t", 1)), TopicPartition("t", 1)) is None
    append_foreign(store, [(0, 7, b"foreign")])  # stamped NOW, past the end offset 7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForeignRowsWarning)
        assert PartitionReader(store.uri).max_timestamp(store.log.latest().files_of(tp), tp) == (3, 9_000)
