"""A data file of the agent's produce groups, encoded as Parquet without pyarrow's writer.

pyarrow's Parquet writer costs ~0.2 ms a file before a row is written (its writer, properties
and column writers are made for every file), about half of a produce group's write of ~740
records in the agent. Every such file has the same schema (the log columns but the partition
columns), one row group of consecutive offsets, and almost always no headers, so here the file
is put together directly: each column one data page (v1) -- PLAIN values after RLE levels,
Snappy-compressed but the ``offset`` column -- and a footer in Thrift's compact protocol (the
Parquet format's ``parquet.thrift``). The ``offset`` column is laid out as
:func:`engine.commit.data_files._encode` lays out a renumberable file (DELTA_BINARY_PACKED, one
uncompressed page, no statistics), so :meth:`DataFileWriter.renumber` moves it the same way; the
other columns carry min/max statistics where pyarrow's files do. The footer carries the Arrow
schema pyarrow would store (``ARROW:schema``), so Arrow readers get exactly the columns' types.

A file read by pyarrow holds the same table as one pyarrow writes (tests compare them, and the
Parquet schemas), and delta-rs and Spark read it as any other file of the table. Tables this
does not encode -- a record with headers, another layout -- are left to pyarrow
(:func:`encode_log_file` returns None). The agent's produce groups skip the table too: their
placed columns are encoded as they are (:func:`encode_records_file`, the same bytes), which
saves building the rows (~0.2 ms of a group's ~0.5 ms write, measured standalone).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.engine.commit.parquet_pages import (
    column_chunk,
    page_header,
    plain_byte_array,
    rle_levels,
    thrift_int,
    uleb128,
)
from lakelog.engine.schema import LOG_ARROW_SCHEMA, PARTITION_COLUMNS

# parquet.thrift's enums.
_INT32, _INT64, _BYTE_ARRAY = 1, 2, 6
_REQUIRED, _OPTIONAL, _REPEATED = 0, 1, 2
_PLAIN, _RLE, _DELTA_BINARY_PACKED = 0, 3, 5
_UNCOMPRESSED, _SNAPPY = 0, 1
_UTF8, _LIST, _TIMESTAMP_MICROS = 0, 3, 10
# Thrift compact protocol's types.
_T_TRUE, _T_I16, _T_I32, _T_I64, _T_BINARY, _T_LIST, _T_STRUCT = 1, 4, 5, 6, 8, 9, 12

# "<application> version <version>", as parquet-mr's VersionParser reads a writer's name.
CREATED_BY = "lakelog version 0.1.0"

# The file's columns (the log columns but the partition columns) and its top-level fields.
_FILE_SCHEMA = pa.schema([f for f in LOG_ARROW_SCHEMA if f.name not in PARTITION_COLUMNS])
_TOP_LEVEL = (
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "headers",
    "producer_id",
    "producer_epoch",
    "sequence",
)
# The fixed-width columns (each with min/max statistics, as pyarrow's renumberable files have).
_FIXED = {
    "timestamp": np.int64,
    "timestamp_type": np.int32,
    "producer_id": np.int64,
    "producer_epoch": np.int32,
    "sequence": np.int32,
}


def _binary(value: bytes) -> bytes:
    return uleb128(len(value)) + value


def _list_header(size: int, element_type: int) -> bytes:
    return bytes([(size << 4) | element_type]) if size < 15 else bytes([0xF0 | element_type]) + uleb128(size)


def _field(last: int, field_id: int, field_type: int) -> bytes:
    """A field's header in a struct whose previous field was ``last`` (ids rise, by at most 15)."""
    return bytes([((field_id - last) << 4) | field_type])


def _struct(fields: Sequence[tuple[int, int, bytes]]) -> bytes:
    """A struct of (field id, type, encoded value), in rising id order, and its stop byte."""
    out, last = bytearray(), 0
    for field_id, field_type, value in fields:
        out += _field(last, field_id, field_type) + value
        last = field_id
    return bytes(out + b"\x00")


def _schema_element(
    name: str,
    repetition: int,
    physical: int | None = None,
    children: int | None = None,
    converted: int | None = None,
    logical: bytes | None = None,
) -> bytes:
    fields = []
    if physical is not None:
        fields.append((1, _T_I32, thrift_int(physical)))
    fields.append((3, _T_I32, thrift_int(repetition)))
    fields.append((4, _T_BINARY, _binary(name.encode())))
    if children is not None:
        fields.append((5, _T_I32, thrift_int(children)))
    if converted is not None:
        fields.append((6, _T_I32, thrift_int(converted)))
    if logical is not None:
        fields.append((10, _T_STRUCT, logical))
    return _struct(fields)


# LogicalType unions: TIMESTAMP(isAdjustedToUTC=true, unit=MICROS), LIST, STRING.
_TIMESTAMP_UTC_MICROS = _struct(
    [(8, _T_STRUCT, _struct([(1, _T_TRUE, b""), (2, _T_STRUCT, _struct([(2, _T_STRUCT, b"\x00")]))]))]
)
_LIST_TYPE = _struct([(3, _T_STRUCT, b"\x00")])
_STRING_TYPE = _struct([(1, _T_STRUCT, b"\x00")])

_SCHEMA = [
    _schema_element("schema", _REQUIRED, children=len(_TOP_LEVEL)),
    _schema_element("offset", _REQUIRED, _INT64),
    _schema_element("timestamp", _OPTIONAL, _INT64, converted=_TIMESTAMP_MICROS, logical=_TIMESTAMP_UTC_MICROS),
    _schema_element("timestamp_type", _OPTIONAL, _INT32),
    _schema_element("key", _OPTIONAL, _BYTE_ARRAY),
    _schema_element("value", _OPTIONAL, _BYTE_ARRAY),
    _schema_element("headers", _OPTIONAL, children=1, converted=_LIST, logical=_LIST_TYPE),
    _schema_element("list", _REPEATED, children=1),
    _schema_element("element", _OPTIONAL, children=2),
    _schema_element("key", _OPTIONAL, _BYTE_ARRAY, converted=_UTF8, logical=_STRING_TYPE),
    _schema_element("value", _OPTIONAL, _BYTE_ARRAY),
    _schema_element("producer_id", _OPTIONAL, _INT64),
    _schema_element("producer_epoch", _OPTIONAL, _INT32),
    _schema_element("sequence", _OPTIONAL, _INT32),
]
_SCHEMA_LIST = _list_header(len(_SCHEMA), _T_STRUCT) + b"".join(_SCHEMA)


class _Leaf:
    """One leaf column: its path, physical type, codec, and its ColumnMetaData's first fields
    (``meta_head``; ``plain_head`` for a chunk stored uncompressed). ``sampled``: compressed
    only where a sample of its page shrinks (:func:`_stored`)."""

    def __init__(
        self, path: tuple[str, ...], physical: int, codec: int, encodings: tuple[int, ...], sampled: bool = False
    ) -> None:
        self.path, self.physical, self.codec, self.sampled = path, physical, codec, sampled
        head = (
            _field(0, 1, _T_I32)
            + thrift_int(physical)
            + _field(1, 2, _T_LIST)
            + _list_header(len(encodings), _T_I32)
            + b"".join(thrift_int(e) for e in encodings)
            + _field(2, 3, _T_LIST)
            + _list_header(len(path), _T_BINARY)
            + b"".join(_binary(p.encode()) for p in path)
            + _field(3, 4, _T_I32)
        )
        self.meta_head, self.plain_head = head + thrift_int(codec), head + thrift_int(_UNCOMPRESSED)


_LEAVES = [
    _Leaf(("offset",), _INT64, _UNCOMPRESSED, (_DELTA_BINARY_PACKED, _RLE)),
    _Leaf(("timestamp",), _INT64, _SNAPPY, (_PLAIN, _RLE)),
    _Leaf(("timestamp_type",), _INT32, _SNAPPY, (_PLAIN, _RLE)),
    _Leaf(("key",), _BYTE_ARRAY, _SNAPPY, (_PLAIN, _RLE), sampled=True),
    _Leaf(("value",), _BYTE_ARRAY, _SNAPPY, (_PLAIN, _RLE), sampled=True),
    _Leaf(("headers", "list", "element", "key"), _BYTE_ARRAY, _UNCOMPRESSED, (_PLAIN, _RLE)),
    _Leaf(("headers", "list", "element", "value"), _BYTE_ARRAY, _UNCOMPRESSED, (_PLAIN, _RLE)),
    _Leaf(("producer_id",), _INT64, _SNAPPY, (_PLAIN, _RLE)),
    _Leaf(("producer_epoch",), _INT32, _SNAPPY, (_PLAIN, _RLE)),
    _Leaf(("sequence",), _INT32, _SNAPPY, (_PLAIN, _RLE)),
]
# Every leaf ordered by its type's own order (ColumnOrder.TYPE_ORDER), as parquet-cpp declares.
_COLUMN_ORDERS = _list_header(len(_LEAVES), _T_STRUCT) + _struct([(1, _T_STRUCT, b"\x00")]) * len(_LEAVES)
# parquet-cpp's DELTA_BINARY_PACKED blocks: 256 values in 4 miniblocks.
_DELTA_BLOCK_VALUES, _DELTA_MINIBLOCKS = 256, 4
_MAGIC = b"PAR1"
_ROW_GROUP_COLUMNS = _list_header(len(_LEAVES), _T_STRUCT)
# RowGroup 5: file_offset (the first column chunk's, after the magic), then 6: total_compressed_size.
_ROW_GROUP_TAIL = _field(3, 5, _T_I64) + thrift_int(len(_MAGIC)) + _field(5, 6, _T_I64)
# FileMetaData 1: version, 2: schema, and 3: num_rows's header.
_FOOTER_HEAD = _field(0, 1, _T_I32) + thrift_int(2) + _field(1, 2, _T_LIST) + _SCHEMA_LIST + _field(2, 3, _T_I64)


@functools.cache
def _footer_tail() -> bytes:
    """FileMetaData after its row groups: 5: key_value_metadata holding the ``ARROW:schema``
    pyarrow writes for the file schema (asked of pyarrow once: a file of no rows), 6:
    created_by, 7: column_orders, and the struct's end."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_batches([], schema=_FILE_SCHEMA), sink)  # not empty_table(): it imports pandas
    stored = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata.metadata or {}
    key_value = _struct([(1, _T_BINARY, _binary(b"ARROW:schema")), (2, _T_BINARY, _binary(stored[b"ARROW:schema"]))])
    return (
        _field(4, 5, _T_LIST)
        + _list_header(1, _T_STRUCT)
        + key_value
        + _field(5, 6, _T_BINARY)
        + _binary(CREATED_BY.encode())
        + _field(6, 7, _T_LIST)
        + _COLUMN_ORDERS
        + b"\x00"
    )


def first_offset_bytes(first: int) -> bytes:
    """How a DELTA_BINARY_PACKED header holds a first value of ``first`` (zigzag ULEB128)."""
    return thrift_int(first)


def first_offset_at(count: int) -> int:
    """Where the first value starts in :func:`consecutive_offsets` of ``count`` values."""
    return len(uleb128(_DELTA_BLOCK_VALUES) + uleb128(_DELTA_MINIBLOCKS) + uleb128(count))


def consecutive_offsets(first: int, count: int) -> bytes:
    """``count`` consecutive int64s from ``first`` as parquet-cpp's DELTA_BINARY_PACKED writes
    them: block size, miniblocks, count, first value (zigzag); per block a minimum delta of 1
    and four bit widths of 0 (every delta is the minimum: no packed bits follow)."""
    blocks = -(-(count - 1) // _DELTA_BLOCK_VALUES)
    header = uleb128(_DELTA_BLOCK_VALUES) + uleb128(_DELTA_MINIBLOCKS) + uleb128(count) + thrift_int(first)
    return header + (uleb128(2) + bytes(_DELTA_MINIBLOCKS)) * blocks


def _levels_run(count: int, level: int) -> bytes:
    """``count`` equal levels: one RLE run after data page v1's 4-byte length."""
    run = uleb128(count << 1) + bytes([level])
    return len(run).to_bytes(4, "little") + run


def _present(array: pa.Array) -> np.ndarray | None:
    """One byte per value, 1 where it is not null; None when none is."""
    if array.null_count == 0:
        return None
    bits = np.frombuffer(array.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little")[array.offset : array.offset + len(array)]


def _definition_levels(count: int, present: np.ndarray | None, null_count: int) -> bytes:
    if present is None:
        return _levels_run(count, 1)
    if null_count == count:
        return _levels_run(count, 0)
    return rle_levels(present)


def _fixed_page(array: pa.Array, dtype: type) -> tuple[bytes, bytes]:
    """A fixed-width optional column's page body and its statistics."""
    count = len(array)
    values = np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset : array.offset + count]
    present = _present(array)
    if present is not None:
        values = values[present.view(bool)]
    return _values_page(count, values, present, array.null_count)


def _values_page(count: int, values: np.ndarray, present: np.ndarray | None, null_count: int) -> tuple[bytes, bytes]:
    """The page body and statistics of a fixed-width optional column of ``count`` rows whose
    non-null ``values`` are these (``present``: one byte per row, None when none is null)."""
    width = values.dtype.itemsize
    body = _definition_levels(count, present, null_count) + values.tobytes()
    nulls = thrift_int(null_count)
    if not len(values):
        return body, b"\x36" + nulls + b"\x00"  # 3: null_count
    size = bytes([width])
    low = size + int(values.min()).to_bytes(width, "little", signed=True)
    high = size + int(values.max()).to_bytes(width, "little", signed=True)
    # 1: max, 2: min (deprecated: readers before PARQUET-1025 read only them), 3: null_count,
    # 5: max_value, 6: min_value.
    return body, b"\x18" + high + b"\x18" + low + b"\x16" + nulls + b"\x28" + high + b"\x18" + low + b"\x00"


def _binary_page(array: pa.Array) -> bytes:
    count = len(array)
    present = _present(array)
    levels = _definition_levels(count, present, array.null_count)
    if array.null_count == count:
        return levels
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset : array.offset + count + 1]
    data = array.buffers()[2]
    return plain_byte_array(
        offsets, np.frombuffer(data, dtype=np.uint8) if data is not None else _NO_BYTES, present, levels
    )


_NO_BYTES = np.zeros(0, dtype=np.uint8)


def encode_log_file(columns: pa.Table, first_offset: int) -> tuple[bytes, int] | None:
    """``columns`` (a data file's: the log columns but ``topic`` and ``partition``, in
    LOG_ARROW_SCHEMA's order and types, its ``offset`` column ``first_offset`` ..
    ``first_offset + rows - 1``, in one row group) as a Parquet file, and the position in it of
    the one value its offsets are numbered from (:meth:`DataFileWriter.renumber`). None when the
    table is not one this encodes: no rows, a record with headers, another schema, offsets that
    do not start at ``first_offset`` and end ``rows - 1`` later (pyarrow's writer does those).
    The offsets between are the caller's to have checked: the file holds only their first."""
    count = columns.num_rows
    if count == 0 or not columns.schema.equals(_FILE_SCHEMA):
        return None
    arrays = dict(zip(_TOP_LEVEL, map(_single, columns.columns), strict=True))
    headers = arrays["headers"]
    header_offsets = np.frombuffer(headers.buffers()[1], dtype=np.int32)[headers.offset : headers.offset + count + 1]
    if int(header_offsets[-1]) != int(header_offsets[0]) or arrays["offset"].null_count:
        return None  # records with headers: pyarrow writes their nested levels
    offsets = np.frombuffer(arrays["offset"].buffers()[1], dtype=np.int64)[arrays["offset"].offset :][:count]
    if int(offsets[0]) != first_offset or int(offsets[-1]) != first_offset + count - 1:
        return None  # not numbered from first_offset on: the file would say otherwise
    # Each leaf's page body and statistics, in leaf order.
    pages: list[tuple[bytes, bytes | None]] = [(consecutive_offsets(first_offset, count), None)]
    for name in ("timestamp", "timestamp_type"):
        pages.append(_fixed_page(arrays[name], _FIXED[name]))
    pages.append((_binary_page(arrays["key"]), None))
    pages.append((_binary_page(arrays["value"]), None))
    # No header anywhere: one repetition level of 0 and one definition level per record (1 for
    # an empty list, 0 for a null one), for each of the two leaves.
    header_levels = _levels_run(count, 0) + _definition_levels(count, _present(headers), headers.null_count)
    pages += [(header_levels, None), (header_levels, None)]
    for name in ("producer_id", "producer_epoch", "sequence"):
        pages.append(_fixed_page(arrays[name], _FIXED[name]))
    return _file(count, first_offset, pages)


def encode_records_file(
    first_offset: int,
    timestamps_us: np.ndarray,
    keys: pa.Array,
    values: pa.Array,
    producer_ids: np.ndarray,
    producer_epochs: np.ndarray,
    sequences: np.ndarray,
) -> tuple[bytes, int]:
    """The file :func:`encode_log_file` makes of the rows of records numbered ``first_offset``
    on, without headers (null), timestamps CreateTime, put together from their columns
    without a table of them: ``timestamps_us`` (int64, microseconds), ``producer_ids`` (int64),
    ``producer_epochs`` and ``sequences`` (int32) one per record, ``keys`` and ``values``
    binary. The same bytes as :func:`encode_log_file` of the table of those rows (a test
    compares them); the caller owns the columns' lengths and types."""
    count = len(timestamps_us)
    no_headers = _levels_run(count, 0) + _levels_run(count, 0)
    pages: list[tuple[bytes, bytes | None]] = [
        (consecutive_offsets(first_offset, count), None),
        _values_page(count, timestamps_us, None, 0),
        _values_page(count, np.zeros(count, dtype=np.int32), None, 0),
        (_binary_page(keys), None),
        (_binary_page(values), None),
        (no_headers, None),
        (no_headers, None),
        _values_page(count, producer_ids, None, 0),
        _values_page(count, producer_epochs, None, 0),
        _values_page(count, sequences, None, 0),
    ]
    return _file(count, first_offset, pages)


def _file(count: int, first_offset: int, pages: list[tuple[bytes, bytes | None]]) -> tuple[bytes, int]:
    """The Parquet file of one row group of ``count`` rows whose leaves hold ``pages`` (each
    leaf's page body and statistics, in leaf order), and where it holds ``first_offset``."""
    out = [_MAGIC]
    at = len(_MAGIC)
    chunks: list[bytes] = []
    total_uncompressed = total_compressed = 0
    offsets_at = -1
    for leaf, (body, stats) in zip(_LEAVES, pages, strict=True):
        stored = _stored(leaf, body)
        encoding = _DELTA_BINARY_PACKED if leaf.path == ("offset",) else _PLAIN
        header = page_header(len(body), len(stored), count, encoding)
        if leaf.path == ("offset",):
            # The values end the page: the first offset follows block size, miniblocks and count.
            offsets_at = at + len(header) + first_offset_at(count)
        uncompressed, compressed = len(header) + len(body), len(header) + len(stored)
        head = leaf.plain_head if stored is body else leaf.meta_head
        chunks.append(column_chunk(head, count, uncompressed, compressed, at, stats))
        out += [header, stored]
        at += compressed
        total_uncompressed += uncompressed
        total_compressed += compressed
    row_group = (
        b"\x19"  # 1: columns
        + _ROW_GROUP_COLUMNS
        + b"".join(chunks)
        + b"\x16"  # 2: total_byte_size
        + thrift_int(total_uncompressed)
        + b"\x16"  # 3: num_rows
        + thrift_int(count)
        + _ROW_GROUP_TAIL
        + thrift_int(total_compressed)
        + b"\x14\x00\x00"  # 7: ordinal 0, end
    )
    footer = b"".join([_FOOTER_HEAD, thrift_int(count), b"\x19\x1c", row_group, _footer_tail()])
    out += [footer, len(footer).to_bytes(4, "little"), _MAGIC]
    return b"".join(out), offsets_at


# A sampled column's page is compressed only if Snappy makes this much of it at least an
# eighth smaller (as btrfs keeps a compressed extent only if it shrank): Kafka producers' values
# are often compressed already or random (ProducerPerformance's payloads are random letters),
# and Snappy then costs ~50 us a 75 KB page to save nothing (measured: 0.4 %).
_SAMPLE_BYTES = 8192


def _stored(leaf: _Leaf, body: bytes) -> bytes:
    """The page body as the chunk stores it: Snappy-compressed, or ``body`` itself when the
    leaf is stored uncompressed (the ``offset`` column, headers) or a sampled leaf's sample
    does not shrink by an eighth."""
    if leaf.codec != _SNAPPY:
        return body
    if leaf.sampled and len(body) > _SAMPLE_BYTES:
        sample = _snappy().compress(memoryview(body)[:_SAMPLE_BYTES], asbytes=True)
        if len(sample) > _SAMPLE_BYTES - _SAMPLE_BYTES // 8:
            return body
    stored = _snappy().compress(body, asbytes=True)
    return body if leaf.sampled and len(stored) > len(body) - len(body) // 8 else stored


@functools.cache
def _snappy() -> pa.Codec:
    return pa.Codec("snappy")


def _single(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks)
