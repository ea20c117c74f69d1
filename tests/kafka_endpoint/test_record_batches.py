"""Record batches v2 to and from log rows, and kio messages built for any version (pure)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.kafka_endpoint.messages import MalformedRequestError, build, parse_request, response_class
from lakelog.kafka_endpoint.record_batches import InvalidRecordBatchError, decode_batches, encode_batch


def _rows(offsets: list[int]) -> pa.Table:
    n = len(offsets)
    stamps = [dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=7 * i) for i in range(n)]
    return pa.table(
        {
            "topic": ["t"] * n,
            "partition": [0] * n,
            "offset": offsets,
            "timestamp": stamps,
            "timestamp_type": [0] * n,
            "key": [None if i % 2 else f"k{i}".encode() for i in range(n)],
            "value": [f"v{i}".encode() for i in range(n)],
            "headers": [[{"key": "h", "value": b"x"}] if i == 0 else None for i in range(n)],
            "producer_id": [None] * n,
            "producer_epoch": [None] * n,
            "sequence": [None] * n,
        },
        schema=LOG_ARROW_SCHEMA,
    )


def test_a_fetched_batch_keeps_offsets_gaps_timestamps_and_headers():
    data = encode_batch(_rows([40, 41, 45]))  # a compacted partition's gap stays a gap
    from aiokafka.record.memory_records import MemoryRecords

    batch = MemoryRecords(data).next_batch()
    assert batch.validate_crc() and batch.base_offset == 40
    records = list(batch)
    assert [r.offset for r in records] == [40, 41, 45]
    assert [r.timestamp for r in records] == [1704067200000, 1704067200007, 1704067200014]
    assert records[0].headers == [("h", b"x")] and records[1].key is None
    assert encode_batch(_rows([])) == b""


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])  # none, gzip, snappy, lz4, zstd
def test_produced_batches_decode_in_every_codec(compression):
    builder = DefaultRecordBatchBuilder(2, compression, False, 7, 0, 0, 2**20)
    builder.append(0, 1_700_000_000_001, b"k", b"v", [("a", b"1")])
    builder.append(1, 1_700_000_000_002, None, None, [])
    (batch,) = decode_batches(bytes(builder.build()))
    assert batch.keys == [b"k", None] and batch.values == [b"v", None]
    assert batch.timestamps == [1_700_000_000_001, 1_700_000_000_002]
    assert batch.headers == [[("a", b"1")], None] and batch.producer_id == 7


def _batch(records: list[tuple], compression: int = 0, producer_id: int = 7, base_sequence: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, compression, False, producer_id, 0, base_sequence, 2**20)
    for i, (stamp, key, value, headers) in enumerate(records):
        builder.append(i, stamp, key, value, headers)
    return bytes(builder.build())


def test_batches_without_headers_are_read_into_columns_as_aiokafka_reads_them():
    """Uncompressed records without headers are read in C straight into Arrow columns (no
    object per record): null and empty keys and values, big and 0 timestamp deltas, several
    batches in one request; each batch equals what aiokafka's record reader makes of it."""
    from aiokafka.record.memory_records import MemoryRecords

    first = [
        (1_700_000_000_000 + 1000 * i, None if i % 3 else f"k{i}".encode(), f"v{i}".encode() * i, [])
        for i in range(300)
    ]
    second = [(5, b"", None, []), (0, None, b"", []), (2**40, b"x" * 70_000, b"y", [])]
    data = _batch(first) + _batch(second, producer_id=9, base_sequence=300)
    batches = decode_batches(data)
    assert [type(b._keys) for b in batches] == [pa.BinaryArray, pa.BinaryArray]  # the columns' path
    reader = MemoryRecords(data)
    for produced in batches:
        rows = list(reader.next_batch())
        assert produced.keys == [r.key for r in rows] and produced.values == [r.value for r in rows]
        assert produced.timestamps == [r.timestamp for r in rows] and produced.headers == [None] * len(rows)
        assert produced.key_column.to_pylist() == produced.keys and len(produced) == len(rows)
    assert (batches[1].producer_id, batches[1].base_sequence) == (9, 300)


def test_batches_with_headers_or_compressed_are_read_record_by_record():
    with_headers = decode_batches(_batch([(1, b"k", b"v", [("h", b"1")]), (2, None, b"w", [])]))
    compressed = decode_batches(_batch([(1, b"k", b"v", [])], compression=1))
    assert [type(b._keys) for b in with_headers + compressed] == [list, list]
    assert with_headers[0].headers == [[("h", b"1")], None] and not with_headers[0].bare
    assert compressed[0].values == [b"v"] and compressed[0].bare


def test_a_record_section_that_does_not_parse_to_its_count_is_left_to_the_general_reader():
    from lakelog.kafka_endpoint.record_columns import read_columns

    data = _batch([(1, b"k", b"v", []), (2, None, b"w", [])])
    assert read_columns(data, 61, len(data), 2, 0) is not None
    assert read_columns(data, 61, len(data), 3, 0) is None  # fewer records than counted
    assert read_columns(data, 61, len(data), 1, 0) is None  # more
    assert read_columns(data, 61, len(data) - 1, 2, 0) is None  # cut short
    assert read_columns(data + b"\x00", 61, len(data) + 1, 2, 0) is None  # a stray byte after them
    assert read_columns(b"\xff" * 20, 0, 20, 1, 0) is None  # a varint that never ends
    assert read_columns(data, 61, len(data) + 5, 2, 0) is None  # past the buffer
    # A batch cut short at the end of a request is left out, as aiokafka's reader leaves it.
    assert decode_batches(data[:-3]) == []


def test_corrupt_batches_are_refused():
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**20)
    builder.append(0, 1, b"k", b"v", [])
    data = bytearray(builder.build())
    data[-1] ^= 0xFF
    with pytest.raises(InvalidRecordBatchError, match="CRC"):
        decode_batches(bytes(data))
    with pytest.raises(InvalidRecordBatchError):
        decode_batches(b"\x00" * 30)


def test_every_byte_the_crc_covers_is_checked_in_every_batch_of_a_request():
    def batch(value: bytes) -> bytes:
        builder = DefaultRecordBatchBuilder(2, 0, False, 7, 0, 0, 2**20)
        for i in range(3):
            builder.append(i, 1_700_000_000_000 + i, None, value + bytes([i]), [])
        return bytes(builder.build())

    first, second = batch(b"a" * 50), batch(b"b" * 70)
    request = first + second
    assert [b.values for b in decode_batches(request)] == [
        [b"a" * 50 + bytes([i]) for i in range(3)],
        [b"b" * 70 + bytes([i]) for i in range(3)],
    ]
    # The second batch's stored CRC (bytes 17-20), its attributes (21, the first byte covered), a
    # record's byte and its last byte: each changed alone makes the request refused.
    for at in (17, 20, 21, 40, len(second) - 1):
        damaged = bytearray(request)
        damaged[len(first) + at] ^= 0x01
        with pytest.raises(InvalidRecordBatchError, match="CRC-32C mismatch"):
            decode_batches(bytes(damaged))


def test_responses_of_any_version_are_built_from_plain_values():
    old, new = response_class(3, 1), response_class(3, 12)  # Metadata v1 and v12
    for cls in (old, new):
        body = build(cls, brokers=[{"node_id": 0, "host": "h", "port": 1}], controller_id=0, topics=[])
        assert body.brokers[0].host == "h"
    with pytest.raises(MalformedRequestError):
        parse_request(b"\x00\x03\x00\x0c\x00\x00\x00\x01\x01", {3: (1, 12)})
    assert parse_request(b"\x00\x03\x00\x63\x00\x00\x00\x05", {3: (1, 12)}) == (3, 99, 5)
