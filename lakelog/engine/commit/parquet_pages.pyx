# cython: language_level=3, boundscheck=False, wraparound=False
"""Parquet page bodies of lakelog's data files, built in C (Cython): a binary column's values
in Parquet's PLAIN layout (each a 4-byte little-endian length, then its bytes) and definition or
repetition levels in Parquet's RLE/bit-packed hybrid (runs only), as data page v1 carries them
(after a 4-byte little-endian length). The rest of a file is put together by
:mod:`engine.commit.direct_parquet`. import-linter reads no ``.pyx``: this module imports
nothing of lakelog.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.string cimport memcpy


cdef inline void _put_u32(char* out, uint32_t value) noexcept:
    out[0] = <char>(value & 0xFF)
    out[1] = <char>((value >> 8) & 0xFF)
    out[2] = <char>((value >> 16) & 0xFF)
    out[3] = <char>((value >> 24) & 0xFF)


cdef inline Py_ssize_t _uleb(char* out, Py_ssize_t at, unsigned long long value) noexcept:
    """``value`` in ULEB128 at ``out[at]``; where the next byte goes."""
    while value >= 0x80:
        out[at] = <char>((value & 0x7F) | 0x80)
        value >>= 7
        at += 1
    out[at] = <char>value
    return at + 1


def plain_byte_array(
    const int32_t[::1] offsets, const uint8_t[::1] data, const uint8_t[::1] present=None, bytes before=b""
):
    """``before``, then the PLAIN encoding of a binary column's values: ``offsets`` are its
    ``count + 1`` Arrow offsets into ``data`` (the slice's own, not rebased); ``present[i]`` is 0
    for a null (written as nothing), None when every value is there."""
    cdef Py_ssize_t count = offsets.shape[0] - 1
    cdef Py_ssize_t i, size = len(before), at = len(before)
    cdef int32_t start, length
    if present is not None and present.shape[0] != count:
        raise ValueError("present holds a flag per value")
    for i in range(count):
        if present is None or present[i]:
            length = offsets[i + 1] - offsets[i]
            if length < 0 or offsets[i + 1] > data.shape[0]:
                raise ValueError("offsets outside the data")
            size += 4 + length
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* buf = PyBytes_AS_STRING(out)
    if at:
        memcpy(buf, PyBytes_AS_STRING(before), at)
    for i in range(count):
        if present is None or present[i]:
            start = offsets[i]
            length = offsets[i + 1] - start
            _put_u32(buf + at, <uint32_t>length)
            at += 4
            if length:
                memcpy(buf + at, &data[start], length)
                at += length
    return out


def rle_levels(const uint8_t[::1] levels):
    """``levels`` (each below 256) as Parquet's RLE/bit-packed hybrid of runs, after the 4-byte
    length data page v1 puts before them: per run of equal levels its length as a ULEB128 of
    ``length << 1`` and the level in one byte (the width of levels up to 8 bits)."""
    cdef Py_ssize_t n = levels.shape[0]
    cdef Py_ssize_t i = 0, j, size = 4, at = 4
    cdef uint32_t run
    # First the size: a run takes its header's bytes and one for the level.
    while i < n:
        j = i + 1
        while j < n and levels[j] == levels[i]:
            j += 1
        run = <uint32_t>((j - i) << 1)
        size += 2
        while run >= 0x80:
            run >>= 7
            size += 1
        i = j
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* buf = PyBytes_AS_STRING(out)
    _put_u32(buf, <uint32_t>(size - 4))
    i = 0
    while i < n:
        j = i + 1
        while j < n and levels[j] == levels[i]:
            j += 1
        at = _uleb(buf, at, <uint32_t>((j - i) << 1))
        buf[at] = <char>levels[i]
        at += 1
        i = j
    return out


# Thrift's compact protocol (parquet.thrift's structs), for the few structs a file's pages and
# column chunks need per file: each written into one buffer instead of a Python call per field.

cdef inline Py_ssize_t _int(char* out, Py_ssize_t at, long long value) noexcept:
    """A compact-protocol integer field's value: zigzag, then ULEB128."""
    return _uleb(out, at, (<unsigned long long>value << 1) ^ <unsigned long long>(value >> 63))


cdef inline Py_ssize_t _field(char* out, Py_ssize_t at, int delta, int kind, long long value) noexcept:
    out[at] = <char>((delta << 4) | kind)
    return _int(out, at + 1, value)


def thrift_int(long long value):
    """A compact-protocol integer (i16, i32, i64) as it follows its field header."""
    cdef char buf[10]
    return PyBytes_FromStringAndSize(buf, _int(buf, 0, value))


def uleb128(unsigned long long value):
    """``value`` in ULEB128 (seven bits a byte, lowest first): Thrift's lengths and list sizes,
    and the headers of Parquet's DELTA_BINARY_PACKED and RLE runs."""
    cdef char buf[10]
    return PyBytes_FromStringAndSize(buf, _uleb(buf, 0, value))


def page_header(long long uncompressed, long long compressed, long long values, int encoding):
    """A PageHeader of a data page (v1) whose levels are RLE-encoded."""
    cdef char buf[64]
    cdef Py_ssize_t at = 0
    at = _field(buf, at, 1, 5, 0)  # type: DATA_PAGE
    at = _field(buf, at, 1, 5, uncompressed)
    at = _field(buf, at, 1, 5, compressed)
    buf[at] = <char>((2 << 4) | 12)  # 5: data_page_header
    at += 1
    at = _field(buf, at, 1, 5, values)
    at = _field(buf, at, 1, 5, encoding)
    at = _field(buf, at, 1, 5, 3)  # definition levels: RLE
    at = _field(buf, at, 1, 5, 3)  # repetition levels: RLE
    buf[at] = 0
    buf[at + 1] = 0
    return PyBytes_FromStringAndSize(buf, at + 2)


def column_chunk(bytes meta_head, long long values, long long uncompressed, long long compressed, long long at_byte,
                 bytes statistics=None):
    """A ColumnChunk of one page starting at ``at_byte``: its file_offset, then its
    ColumnMetaData -- ``meta_head`` (fields 1-4: type, encodings, path, codec, as
    compact-protocol bytes), the value count, sizes, data page offset and ``statistics`` (a
    Statistics struct's bytes) when given."""
    cdef Py_ssize_t head = len(meta_head), stats = 0 if statistics is None else len(statistics)
    out = PyBytes_FromStringAndSize(NULL, head + stats + 64)
    cdef char* buf = PyBytes_AS_STRING(out)
    cdef Py_ssize_t at = 0
    at = _field(buf, at, 2, 6, at_byte)  # 2: file_offset
    buf[at] = <char>((1 << 4) | 12)  # 3: meta_data
    at += 1
    memcpy(buf + at, PyBytes_AS_STRING(meta_head), head)
    at += head
    at = _field(buf, at, 1, 6, values)  # 5: num_values
    at = _field(buf, at, 1, 6, uncompressed)  # 6: total_uncompressed_size
    at = _field(buf, at, 1, 6, compressed)  # 7: total_compressed_size
    at = _field(buf, at, 2, 6, at_byte)  # 9: data_page_offset
    if statistics is not None:
        buf[at] = <char>((3 << 4) | 12)  # 12: statistics
        at += 1
        memcpy(buf + at, PyBytes_AS_STRING(statistics), stats)
        at += stats
    buf[at] = 0  # end of ColumnMetaData
    buf[at + 1] = 0  # end of ColumnChunk
    return out[: at + 2]
