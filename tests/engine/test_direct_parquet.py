"""A data file of consecutive records without headers is put together without pyarrow's writer
(engine.commit.direct_parquet): it holds what pyarrow's own file of the same rows holds, with the
same Parquet and Arrow schema and the offsets where renumbering looks for them; Snappy only where
a value page shrinks; anything else is left to pyarrow. delta-rs reads a table of such files
beside pyarrow's. No JVM (Spark reads them in tests/engine/test_commit_turns.py and every Spark
test of produced records)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakelog.engine.commit.data_files import ROW_GROUP_ROWS, _encode, _first_offset_position
from lakelog.engine.commit.direct_parquet import CREATED_BY, encode_log_file
from lakelog.engine.commit.parquet_pages import thrift_int, uleb128
from lakelog.engine.schema import LOG_ARROW_SCHEMA, PARTITION_COLUMNS
from lakelog.store import Store

FILE_SCHEMA = pa.schema([f for f in LOG_ARROW_SCHEMA if f.name not in PARTITION_COLUMNS])
HEADERS = LOG_ARROW_SCHEMA.field("headers").type
LETTERS = np.random.default_rng(7)


def _random_letters(n: int, size: int) -> list[bytes]:
    # ProducerPerformance's payloads: random upper-case letters (Snappy finds nothing in them).
    return [bytes(LETTERS.integers(65, 91, size, dtype=np.uint8)) for _ in range(n)]


def _columns(n: int, first: int = 1000, **overrides: object) -> pa.Table:
    columns: dict[str, object] = {
        "offset": pa.array(range(first, first + n), pa.int64()),
        "timestamp": pa.array([1_700_000_000_000_000 + 1000 * i for i in range(n)], pa.timestamp("us", tz="UTC")),
        "timestamp_type": pa.array([0] * n, pa.int32()),
        "key": pa.array([None] * n, pa.binary()),
        "value": pa.array(_random_letters(n, 100), pa.binary()),
        "headers": pa.array([[]] * n, HEADERS),
        "producer_id": pa.array([4711] * n, pa.int64()),
        "producer_epoch": pa.array([0] * n, pa.int32()),
        "sequence": pa.array(range(n), pa.int32()),
    }
    columns.update(overrides)
    return pa.table(columns, schema=FILE_SCHEMA)


def _sometimes(values: list, every: int) -> list:
    return [None if i % every == 0 else v for i, v in enumerate(values)]


CASES = {
    "producer-perf": lambda: _columns(740),
    "one record": lambda: _columns(1, first=0),
    "keys, some null": lambda: _columns(300, key=pa.array(_sometimes([f"k{i % 9}".encode() for i in range(300)], 4))),
    "nulls in every nullable column": lambda: _columns(
        257,
        timestamp=pa.array(
            _sometimes([1_700_000_000_000_000 + i for i in range(257)], 5), pa.timestamp("us", tz="UTC")
        ),
        timestamp_type=pa.array(_sometimes([1] * 257, 3), pa.int32()),
        key=pa.array(_sometimes([b"k"] * 257, 2), pa.binary()),
        value=pa.array(_sometimes([b"v" * (i % 40) for i in range(257)], 7), pa.binary()),
        headers=pa.array(_sometimes([[]] * 257, 6), HEADERS),
        producer_id=pa.array([None] * 257, pa.int64()),
        producer_epoch=pa.array([None] * 257, pa.int32()),
        sequence=pa.array([None] * 257, pa.int32()),
    ),
    "every value empty or null": lambda: _columns(
        20, value=pa.array([b"" if i % 2 else None for i in range(20)], pa.binary())
    ),
    "compressible values": lambda: _columns(
        500, value=pa.array([json.dumps({"user": i % 13, "event": "click"}).encode() for i in range(500)])
    ),
    "a sliced table": lambda: _columns(900, first=0).slice(100, 700),
    "a full row group": lambda: _columns(
        ROW_GROUP_ROWS, first=2**40, value=pa.array([b"x"] * ROW_GROUP_ROWS), sequence=pa.array([7] * ROW_GROUP_ROWS)
    ),
    "chunked columns": lambda: pa.concat_tables([_columns(100, first=5), _columns(50, first=105)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_file_holds_what_pyarrows_file_of_the_rows_holds(case):
    columns = CASES[case]()
    first = columns.column("offset")[0].as_py()
    encoded = encode_log_file(columns, first)
    assert encoded is not None
    data, offsets_at = encoded
    sink = pa.BufferOutputStream()
    _encode(columns, sink, renumberable=True)
    theirs = pq.ParquetFile(pa.BufferReader(sink.getvalue()))
    ours = pq.ParquetFile(pa.BufferReader(data))

    assert ours.read().equals(columns.combine_chunks())
    assert ours.schema.equals(theirs.schema) and ours.schema_arrow.equals(theirs.schema_arrow)
    assert ours.metadata.num_row_groups == 1 and ours.metadata.created_by == CREATED_BY
    # Renumbering finds the first offset where the writer says it is, checked byte for byte.
    assert offsets_at == _first_offset_position(pa.py_buffer(data), ours.metadata, first, columns.num_rows)
    ours_group, theirs_group = ours.metadata.row_group(0), theirs.metadata.row_group(0)
    for i in range(ours_group.num_columns):
        mine, pyarrows = ours_group.column(i), theirs_group.column(i)
        assert mine.path_in_schema == pyarrows.path_in_schema
        assert (mine.statistics is None) == (pyarrows.statistics is None), mine.path_in_schema
        if mine.statistics is not None:
            assert mine.statistics.null_count == pyarrows.statistics.null_count
            assert mine.statistics.has_min_max == pyarrows.statistics.has_min_max
            if mine.statistics.has_min_max:
                assert (mine.statistics.min, mine.statistics.max) == (pyarrows.statistics.min, pyarrows.statistics.max)


def test_values_are_compressed_only_where_snappy_shrinks_them():
    def value_codec(columns: pa.Table) -> tuple[str, int]:
        encoded = encode_log_file(columns, 1000)
        assert encoded is not None
        meta = pq.ParquetFile(pa.BufferReader(encoded[0])).metadata.row_group(0)
        value = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == "value")
        return value.compression, value.total_compressed_size

    random_codec, random_size = value_codec(_columns(740))
    assert random_codec == "UNCOMPRESSED" and random_size > 740 * 100
    text = [json.dumps({"user": i % 13, "page": "/cart", "event": "click"}).encode() for i in range(740)]
    text_codec, text_size = value_codec(_columns(740, value=pa.array(text)))
    assert text_codec == "SNAPPY" and text_size < sum(map(len, text)) // 2


def test_tables_it_does_not_encode_are_left_to_pyarrow():
    with_headers = _columns(10, headers=pa.array([[{"key": "trace", "value": b"1"}]] + [[]] * 9, HEADERS))
    with_partition_columns = pa.table(
        {"topic": ["t"] * 3, "partition": pa.array([0] * 3, pa.int32()), **_columns(3).to_pydict()},
        schema=LOG_ARROW_SCHEMA,
    )
    assert encode_log_file(with_headers, 1000) is None
    assert encode_log_file(_columns(10, first=1000), 999) is None  # not numbered from the first given
    assert encode_log_file(_columns(10, first=1000).slice(0, 9), 1000) is not None
    assert encode_log_file(_columns(0), 1000) is None
    assert encode_log_file(with_partition_columns, 1000) is None
    assert encode_log_file(_columns(3).cast(FILE_SCHEMA.set(4, pa.field("value", pa.large_binary()))), 1000) is None


def test_delta_rs_reads_a_topic_of_such_files_and_pyarrows_alike(tmp_path):
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    producer = store.producer(**{"client.id": "p", "linger.ms": 0})
    sent = []
    for i in range(40):
        headers = [("trace", str(i).encode())] if i % 10 == 9 else None  # every tenth: pyarrow's file
        producer.send("t", f"v{i}".encode(), key=None if i % 2 else f"k{i}".encode(), headers=headers)
        sent.append((f"k{i}".encode() if i % 2 == 0 else None, f"v{i}".encode()))
        if i % 5 == 4:
            producer.flush()
    producer.flush()
    producer.close()

    table = DeltaTable(store.uri).to_pyarrow_table().sort_by("offset")
    assert table.column("offset").to_pylist() == list(range(40))
    assert list(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)) == sent
    writers = {pq.read_metadata(path).created_by for path in _data_files(store.uri)}
    assert CREATED_BY in writers and any(w.startswith("parquet-cpp") for w in writers)  # both encoders


def _data_files(uri: str) -> list[str]:
    from pathlib import Path

    return [str(p) for p in Path(uri.removeprefix("file://")).rglob("*.parquet") if "_delta_log" not in p.parts]


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_383, 16_384, 2**32, 2**63 - 1, 2**64 - 1])
def test_uleb128_writes_seven_bits_a_byte_lowest_first_with_a_continuation_bit(value):
    encoded = uleb128(value)
    assert all(b & 0x80 for b in encoded[:-1]) and not encoded[-1] & 0x80
    assert sum((b & 0x7F) << (7 * i) for i, b in enumerate(encoded)) == value
    assert len(encoded) == max(1, -(-value.bit_length() // 7))


@pytest.mark.parametrize("value", [0, -1, 1, -64, 63, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_a_thrift_compact_integer_is_its_zigzag_in_uleb128(value):
    assert thrift_int(value) == uleb128(((value << 1) ^ (value >> 63)) & (2**64 - 1))
