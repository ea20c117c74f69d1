# cython: language_level=3, boundscheck=False, wraparound=False
"""The records of an uncompressed v2 record batch read straight into columns (Cython).

A produce request's records are read once per record by the agent; reading them through
aiokafka's ``DefaultRecordBatch`` makes a Python object per record and then a Python list per
field, which the agent then packs into Arrow columns again. Here the record section of a batch
is walked once in C and its keys and values land in Arrow binary layouts (offsets, bytes,
validity) and its timestamps in an int64 array, with no object per record. Only the layout the
agent meets most is read so: records without headers. Anything else -- a record with headers,
a section that does not parse to exactly the batch's record count -- gives None, and the caller
reads the batch the general way (which also names what is wrong with a broken one).
import-linter reads no ``.pyx``: this module imports only numpy and pyarrow.
"""

import numpy as np
import pyarrow as pa

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy


cdef inline bint _varint(const uint8_t* data, Py_ssize_t end, Py_ssize_t* pos, int64_t* out) noexcept:
    """A zigzag varint (Kafka's record fields) at ``pos[0]``, moving ``pos`` past it; False
    when it runs past ``end`` or over ten bytes."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if pos[0] >= end or shift > 63:
            return False
        b = data[pos[0]]
        pos[0] += 1
        value |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            break
        shift += 7
    out[0] = <int64_t>(value >> 1) ^ -(<int64_t>(value & 1))
    return True


cdef inline bint _bytes_field(
    const uint8_t* buf, Py_ssize_t end, Py_ssize_t* pos, int64_t* at, int64_t* length, int64_t* total
) noexcept:
    """A record's key or value at ``pos[0]`` (a length varint, -1 for null, then the bytes):
    where its bytes start and how many there are, added to ``total``; False when it runs
    past ``end``."""
    if not _varint(buf, end, pos, length) or length[0] < -1 or length[0] > end - pos[0]:
        return False
    at[0] = pos[0]
    if length[0] > 0:
        pos[0] += length[0]
        total[0] += length[0]
    return True


def read_columns(const uint8_t[::1] data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count, int64_t base_timestamp):
    """The ``count`` records of ``data[start:end]`` (a v2 batch's record section, uncompressed)
    as ``(keys, values, timestamps)``: two ``pa.binary()`` arrays and an int64 NumPy array of
    their CreateTimes in ms (``base_timestamp`` plus each record's delta). None when a record
    has headers or the section is not exactly ``count`` well-formed records."""
    if count < 0 or start < 0 or end > data.shape[0] or start > end:
        return None
    cdef const uint8_t* buf = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t pos = start, record_end, i
    cdef int64_t length, ts_delta, offset_delta, header_count
    cdef int64_t key_total = 0, value_total = 0
    # First pass: check the layout and size the buffers.
    key_at = np.empty(count, dtype=np.int64)
    value_at = np.empty(count, dtype=np.int64)
    stamps = np.empty(count, dtype=np.int64)
    key_lens = np.empty(count, dtype=np.int64)
    value_lens = np.empty(count, dtype=np.int64)
    cdef int64_t[::1] k_at = key_at, v_at = value_at, ts = stamps, k_len = key_lens, v_len = value_lens
    for i in range(count):
        if not _varint(buf, end, &pos, &length) or length < 0 or length > end - pos:
            return None
        record_end = pos + length
        pos += 1  # attributes (unused in v2 records)
        if not _varint(buf, record_end, &pos, &ts_delta) or not _varint(buf, record_end, &pos, &offset_delta):
            return None
        if offset_delta != i or not _bytes_field(buf, record_end, &pos, &k_at[i], &k_len[i], &key_total):
            return None
        if not _bytes_field(buf, record_end, &pos, &v_at[i], &v_len[i], &value_total):
            return None
        if not _varint(buf, record_end, &pos, &header_count) or header_count != 0 or pos != record_end:
            return None
        ts[i] = base_timestamp + ts_delta
    if pos != end or key_total > 0x7FFFFFFF or value_total > 0x7FFFFFFF:
        return None
    return _binary(buf, k_at, k_len, key_total, count), _binary(buf, v_at, v_len, value_total, count), stamps


cdef object _binary(const uint8_t* buf, int64_t[::1] at, int64_t[::1] lens, int64_t total, Py_ssize_t count):
    """A ``pa.binary()`` array of the ``count`` slices ``buf[at[i]:at[i] + lens[i]]`` (a length
    of -1 is a null)."""
    offsets = np.empty(count + 1, dtype=np.int32)
    cdef int32_t[::1] off = offsets
    cdef Py_ssize_t i, nulls = 0
    cdef int64_t filled = 0
    cdef uint8_t[::1] flags
    out = bytearray(total)
    cdef char* dst = out
    off[0] = 0
    for i in range(count):
        if lens[i] > 0:
            memcpy(dst + filled, <const char*>buf + at[i], lens[i])
            filled += lens[i]
        elif lens[i] < 0:
            nulls += 1
        off[i + 1] = <int32_t>filled
    if nulls == count:
        return pa.nulls(count, pa.binary())
    validity = None
    if nulls:
        valid = np.empty(count, dtype=np.uint8)
        flags = valid
        for i in range(count):
            flags[i] = lens[i] >= 0
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(out)], null_count=nulls
    )
