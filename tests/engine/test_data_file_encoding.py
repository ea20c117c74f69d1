"""How a data file's columns are encoded: dictionaries only where a file's values repeat,
statistics only where a reader prunes by them; the rows read back as written; Delta's
``stats`` of a file and the rows a produce group's files are built from."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakelog.engine.commit.data_files import DataFileWriter, file_stats_json, partition_runs
from lakelog.engine.produce.batches import log_rows
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.topics import TopicPartition

HEADERS = LOG_ARROW_SCHEMA.field("headers").type


def test_only_repeating_columns_are_dictionary_encoded_and_the_rows_read_back(tmp_path):
    n = 500
    rows = {
        "topic": ["t"] * n,
        "partition": pa.array([3] * n, pa.int32()),
        "offset": pa.array(range(100, 100 + n), pa.int64()),
        "timestamp": pa.array([1_700_000_000_000_000 + i * 1000 for i in range(n)], pa.timestamp("us", tz="UTC")),
        "timestamp_type": pa.array([0] * n, pa.int32()),
        "key": pa.array([f"user-{i % 7}".encode() for i in range(n)]),
        "value": pa.array([f"payload {i}".encode() * 3 for i in range(n)]),
        "headers": pa.array([[{"key": "trace", "value": str(i).encode()}] for i in range(n)], HEADERS),
        "producer_id": pa.array([42] * n, pa.int64()),
        "producer_epoch": pa.array([0] * n, pa.int32()),
        "sequence": pa.array(range(n), pa.int32()),
    }
    table = pa.table(rows, schema=LOG_ARROW_SCHEMA)
    (written,) = DataFileWriter(str(tmp_path)).write(table)
    parquet = pq.ParquetFile(written.full_path)
    group = parquet.metadata.row_group(0)
    encoded = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    dictionary = {name for name, column in encoded.items() if "RLE_DICTIONARY" in column.encodings}
    assert dictionary == {"timestamp_type", "key", "headers.list.element.key", "producer_id", "producer_epoch"}
    with_statistics = {name for name, column in encoded.items() if column.is_stats_set}
    assert {"offset", "timestamp"} <= with_statistics and not {"key", "value"} & with_statistics
    back = parquet.read()
    for name in back.column_names:
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name


def _stats_table(offsets: list[int | None], micros: list[int | None]) -> pa.Table:
    return pa.table(
        {"offset": pa.array(offsets, pa.int64()), "timestamp": pa.array(micros, pa.timestamp("us", tz="UTC"))}
    )


def _kernel_stats(part: pa.Table) -> tuple[dict, dict]:
    """What a compute kernel says of the two columns: the reference the stats are held to."""
    lows, highs = {}, {}
    for name in ("offset", "timestamp"):
        bounds = pc.min_max(part.column(name).cast(pa.int64()))  # a timestamp as its microseconds
        if bounds["min"].is_valid:
            lows[name], highs[name] = bounds["min"].as_py(), bounds["max"].as_py()
    return lows, highs


def _as_micros(stamp: str, *, upper: bool) -> int:
    ms = int(dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    return ms * 1000 + (999 if upper else 0)


@pytest.mark.parametrize(
    ("offsets", "micros", "start", "length"),
    [
        ([5, 6, 7, 8], [1_700_000_000_123_456, 1_699_999_999_000_001, 1_700_000_000_000_000, 3], 0, 4),
        # A slice: the values from its offset on (the extremes outside it).
        ([1, 20, 30, 25, 100], [-(10**12), 5_000, -1_500, 9_000, 10**15], 1, 3),
        ([None, 3, None, 1], [None, 2_000, 1_000, None], 0, 4),  # nulls: counted, left out of the bounds
        ([None, None], [None, None], 0, 2),  # no value: no bounds
        ([1, 2], [1_000, 2_000], 1, 0),  # no rows
    ],
)
def test_file_stats_hold_each_columns_bounds_and_nulls_of_the_rows_given(offsets, micros, start, length):
    part = _stats_table(offsets, micros).slice(start, length)
    stats = json.loads(file_stats_json(part))
    lows, highs = _kernel_stats(part)
    assert stats["numRecords"] == length
    assert stats["nullCount"] == {name: part.column(name).null_count for name in ("offset", "timestamp")}
    assert stats["minValues"].get("offset") == lows.get("offset")
    assert stats["maxValues"].get("offset") == highs.get("offset")
    if "timestamp" not in lows:
        assert "timestamp" not in stats["minValues"] and "timestamp" not in stats["maxValues"]
    else:
        # Delta's ms strings: the low rounded down, the high up, so both hold every row.
        assert _as_micros(stats["minValues"]["timestamp"], upper=False) <= lows["timestamp"]
        assert lows["timestamp"] - _as_micros(stats["minValues"]["timestamp"], upper=False) < 1000
        assert _as_micros(stats["maxValues"]["timestamp"], upper=True) >= highs["timestamp"]
        assert _as_micros(stats["maxValues"]["timestamp"], upper=True) - highs["timestamp"] < 2000


def test_log_rows_name_each_rows_topic_for_one_topic_and_for_several():
    tps = [TopicPartition("naïve-topic", 0), TopicPartition("b", 1), TopicPartition("naïve-topic", 2)]
    for row_tps, expected in (
        ([0, 0, 2, 2], ["naïve-topic"] * 4),
        ([1, 0, 2, 1], ["b", "naïve-topic", "naïve-topic", "b"]),
    ):
        used = [tps[i] for i in sorted(set(row_tps))]
        remap = {tps.index(tp): i for i, tp in enumerate(used)}
        ids = np.array([remap[i] for i in row_tps])
        n = len(ids)
        table, _ = log_rows(
            used,
            ids,
            np.arange(10, 10 + n),
            np.zeros(n, dtype=np.int64),
            keys=pa.nulls(n, pa.binary()),
            values=pa.array([b"v"] * n),
            headers=pa.nulls(n, HEADERS),
            sequences=pa.array(range(n), pa.int32()),
            producer_id=7,
            producer_epoch=0,
            topics={},
            append_time_ms=0,
        )
        table.validate(full=True)
        assert table.schema == LOG_ARROW_SCHEMA
        assert table.column("topic").to_pylist() == expected
        assert table.column("partition").to_pylist() == [tps[i].partition for i in row_tps]


def test_a_write_told_its_partition_runs_writes_the_files_a_search_for_them_finds(tmp_path):
    n = 6
    table = pa.table(
        {
            "topic": ["a", "a", "a", "b", "b", "a"],
            "partition": pa.array([0, 0, 0, 1, 1, 2], pa.int32()),
            "offset": pa.array([5, 6, 7, 0, 1, 9], pa.int64()),
            "timestamp": pa.array([1_000 * i for i in range(n)], pa.timestamp("us", tz="UTC")),
            "timestamp_type": pa.array([0] * n, pa.int32()),
            "key": pa.nulls(n, pa.binary()),
            "value": pa.array([bytes([i]) for i in range(n)]),
            "headers": pa.nulls(n, HEADERS),
            "producer_id": pa.array([1] * n, pa.int64()),
            "producer_epoch": pa.array([0] * n, pa.int32()),
            "sequence": pa.array(range(n), pa.int32()),
        },
        schema=LOG_ARROW_SCHEMA,
    )
    writer = DataFileWriter(str(tmp_path))
    runs = partition_runs(table)
    assert runs == [(TopicPartition("a", 0), 0, 3), (TopicPartition("b", 1), 3, 2), (TopicPartition("a", 2), 5, 1)]
    searched = writer.write(table, sync=False, renumberable=True)
    told = writer.write(table, sync=False, renumberable=True, runs=runs)
    assert [(f.stats.tp, f.stats.min_offset, f.stats.max_offset, f.add.stats) for f in told] == [
        (f.stats.tp, f.stats.min_offset, f.stats.max_offset, f.add.stats) for f in searched
    ]
    assert [f.offsets_at for f in told] == [f.offsets_at for f in searched]
    for mine, theirs in zip(told, searched, strict=True):
        assert pq.read_table(mine.full_path).equals(pq.read_table(theirs.full_path))


# A record time whose stats string (1974-05-10T12:24:33.686Z) a float read back as ...685.
FLOAT_LOSES_A_MS = 137_420_673_686


@pytest.mark.parametrize(
    ("micros", "renumberable"),
    [
        ([FLOAT_LOSES_A_MS * 1000, FLOAT_LOSES_A_MS * 1000 + 1], True),  # the max rounded up to ...687
        ([1_700_000_000_123_456, 1_699_999_999_000_001, 3], False),
        ([None, 2_000, None], False),  # nulls stay out of the bounds
        ([None, None, None], False),  # no timestamp: no bounds
    ],
)
def test_a_written_files_statistics_are_what_its_add_action_says(tmp_path, micros, renumberable):
    n = len(micros)
    table = pa.table(
        {
            "topic": ["t"] * n,
            "partition": pa.array([4] * n, pa.int32()),
            "offset": pa.array(range(10, 10 + n), pa.int64()),
            "timestamp": pa.array(micros, pa.timestamp("us", tz="UTC")),
            "timestamp_type": pa.array([0] * n, pa.int32()),
            "key": pa.nulls(n, pa.binary()),
            "value": pa.array([b"v"] * n),
            "headers": pa.nulls(n, HEADERS),
            "producer_id": pa.array([-1] * n, pa.int64()),
            "producer_epoch": pa.array([0] * n, pa.int32()),
            "sequence": pa.array(range(n), pa.int32()),
        },
        schema=LOG_ARROW_SCHEMA,
    )
    (written,) = DataFileWriter(str(tmp_path)).write(table, sync=not renumberable, renumberable=renumberable)
    assert written.stats == written.add.file_stats()  # built without reading its JSON back
    known = [m for m in micros if m is not None]
    if known:
        assert written.stats.min_timestamp_ms == min(known) // 1000
        assert written.stats.max_timestamp_ms == -(-max(known) // 1000)
    else:
        assert written.stats.min_timestamp_ms is None and written.stats.max_timestamp_ms is None


def test_a_record_is_found_by_its_own_time_after_the_store_is_opened_again(tmp_path):
    """offsetsForTimes skips a file whose newest record is older than the time asked for: its
    stats time read back 1 ms low made the record at exactly that time look older."""
    from lakelog.store import Store

    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    producer = store.producer()
    producer.send("t", b"then", partition=0, timestamp=FLOAT_LOSES_A_MS)
    producer.close()
    for opened in (store, Store.open(tmp_path / "store")):
        found = opened.offsets_for_times("t", {0: FLOAT_LOSES_A_MS})[0]
        assert found is not None and (found.offset, found.timestamp) == (0, FLOAT_LOSES_A_MS)
