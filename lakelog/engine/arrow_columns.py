"""Arrow arrays and tables built from Python values without importing pandas.

pyarrow builds an array from a Python sequence or a NumPy array only after asking whether
it is a pandas object, and that question imports pandas (pyarrow's ``_is_array_like`` and
``_PandasAPIShim``; apache/arrow#34994): ``pa.array``, ``pa.scalar``, ``pa.table`` of an
object that is not a dict/list, and compute functions given Python scalars all cost a
pandas import (0.3 s on a quiet machine, seconds on a loaded one) the first time a
process uses them. The client paths (opening a store, ``send``, ``poll``, the CLI's verbs)
build their arrays here instead: fixed-width columns from NumPy buffers, variable-width ones
through arro3 (deltalake's Arrow library), handed to pyarrow over the Arrow C data
interface, which never looks for pandas.
"""

from __future__ import annotations

from array import array as std_array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

# Arrow types whose values are one fixed-width buffer: their NumPy dtype and the stdlib
# ``array`` typecode that packs a Python sequence of them (checking each value's type and range).
_FIXED_WIDTH = {
    pa.int8(): (np.int8, "b"),
    pa.int16(): (np.int16, "h"),
    pa.int32(): (np.int32, "i"),
    pa.int64(): (np.int64, "q"),
    pa.uint8(): (np.uint8, "B"),
    pa.uint16(): (np.uint16, "H"),
    pa.uint32(): (np.uint32, "I"),
    pa.uint64(): (np.uint64, "Q"),
    pa.float32(): (np.float32, "f"),
    pa.float64(): (np.float64, "d"),
}


def array(values: Sequence[Any] | np.ndarray | pa.Array, type: pa.DataType) -> pa.Array:
    """``values`` as a pyarrow array of ``type``: the values ``pa.array(values, type)`` would
    hold. Timestamps are given as integers in the type's unit; None is a null (in a Python
    sequence). Raises TypeError for a value of the wrong kind, OverflowError for one out of
    the type's range (a NumPy array is checked as a whole), ValueError for a NumPy array
    that is not flat."""
    if isinstance(values, pa.Array):
        return values if values.type == type else values.cast(type)
    storage = pa.int64() if pa.types.is_timestamp(type) else type
    fixed = _FIXED_WIDTH.get(storage)
    if fixed is not None and isinstance(values, np.ndarray):
        data = np.ascontiguousarray(values, dtype=fixed[0])
        if data.ndim != 1:
            raise ValueError(f"an Arrow array takes a flat sequence, not one of shape {data.shape}")
        if values.dtype != data.dtype and not np.array_equal(data, values):
            raise OverflowError(f"{values.dtype} values do not all fit {type}")
        return pa.Array.from_buffers(type, len(data), [None, pa.py_buffer(data)])
    if type == pa.bool_() and isinstance(values, np.ndarray) and values.dtype == np.bool_:
        bits = np.packbits(values.ravel(), bitorder="little")
        return pa.Array.from_buffers(type, values.size, [None, pa.py_buffer(bits)])
    # One pass to count the nulls (a producer batch's columns run to 100,000s of values).
    nulls = values.count(None) if isinstance(values, list | tuple) else None
    if nulls is not None and nulls == len(values):
        # All null (a producer batch's keys or headers, most often): nothing to convert.
        return pa.nulls(len(values), type)
    no_nulls = nulls == 0 if nulls is not None else None not in values
    if fixed is not None and no_nulls:
        packed = std_array(fixed[1], values)
        return pa.Array.from_buffers(type, len(packed), [None, pa.py_buffer(packed)])
    if type == pa.binary() and no_nulls:
        return _binary(values)
    if _is_key_value_list(type):
        return key_value_lists([None if row is None else [_pair(e) for e in row] for row in values], type)
    from arro3.core import Array, DataType

    try:
        built = pa.array(Array(list(values), DataType.from_arrow(storage)))
    except NotImplementedError:
        # A type arro3 cannot build from Python values: pyarrow's own constructor (which
        # imports pandas) rather than no answer.
        return pa.array(values, type)
    return built if storage == type else built.view(type)


def _is_key_value_list(type: pa.DataType) -> bool:
    if not pa.types.is_list(type) or not pa.types.is_struct(type.value_type):
        return False
    return [f.name for f in type.value_type] == ["key", "value"]


def _pair(entry: Any) -> tuple[Any, Any]:
    # A struct value as pa.array takes it: a mapping of its fields, or a (key, value) tuple; a null
    # entry has a null key, as flattening a null struct gives.
    if entry is None:
        return None, None
    if isinstance(entry, Mapping):
        return entry.get("key"), entry.get("value")
    key, value = entry  # TypeError/ValueError for anything but a pair
    return key, value


def _binary(values: Sequence[bytes]) -> pa.Array:
    # Offsets and one data buffer, as Arrow lays out a binary column: faster than arro3's
    # per-value builder and than pa.array itself for the producer's batches.
    data = b"".join(values)  # TypeError for a value that is not bytes-like
    _check_offsets(len(data), pa.binary())
    ends = offsets(map(len, values), len(values))
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(ends), pa.py_buffer(data)])


def repeated_string(value: str, count: int) -> pa.Array:
    """A string array holding ``value`` ``count`` times, written straight into Arrow's offsets
    and data buffers (a produce group's topic column: no Python string per row, no kernel
    call). Raises OverflowError past one array's 2 GiB of data."""
    data = value.encode()
    _check_offsets(len(data) * count, pa.string())
    offsets = np.arange(count + 1, dtype=np.int32) * np.int32(len(data))
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data * count)])


def _check_offsets(size: int, type: pa.DataType) -> None:
    # Binary and string arrays address their data with int32 offsets.
    if size > np.iinfo(np.int32).max:
        raise OverflowError(f"{size} bytes do not fit one Arrow {type} array (at most 2 GiB)")


def key_value_lists(rows: Sequence[Sequence[tuple[Any, Any]] | None], type: pa.DataType) -> pa.Array:
    """Rows of (key, value) pairs (None: a null row) as an array of ``type``, a
    ``list<struct<key, value>>`` such as Kafka headers. Raises as :func:`array` does."""
    entry = type.value_type
    pairs = [pair for row in rows if row is not None for pair in row]
    keys = array([k for k, _ in pairs], entry.field("key").type)
    values = array([v for _, v in pairs], entry.field("value").type)
    ends = offsets((0 if r is None else len(r) for r in rows), len(rows))
    entries = pa.StructArray.from_arrays([keys, values], fields=[entry.field("key"), entry.field("value")])
    return pa.ListArray.from_arrays(array(ends, pa.int32()), entries, type=type, mask=null_mask(rows))


def offsets(lengths: Iterable[int], count: int) -> np.ndarray:
    """The int32 offsets of a binary, string, list or map array whose ``count`` rows hold
    ``lengths`` values (0 for a null row): 0, then their running sums (Arrow's layout)."""
    ends = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(np.fromiter(lengths, dtype=np.int32, count=count), out=ends[1:])
    return ends


def null_mask(values: Sequence[Any]) -> pa.Array:
    """A boolean array, true where ``values`` holds None (the ``mask`` Arrow's nested array
    constructors take)."""
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(nulls, bitorder="little"))])


def scalar(value: Any, type: pa.DataType) -> pa.Scalar:
    """``value`` as a pyarrow scalar of ``type`` (what ``pa.scalar(value, type)`` gives)."""
    return array([value], type)[0]


def to_numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of an integer, float, timestamp (as integers) or boolean array with no nulls
    as a NumPy array (read-only where it shares pyarrow's memory), what ``values.to_numpy()``
    gives: pyarrow's own conversion goes through its pandas converter, which imports pandas.
    Raises ValueError for an array with nulls or of another type."""
    if isinstance(values, pa.ChunkedArray):
        # combine_chunks() of no chunks builds its empty array through pa.array.
        values = (
            values.chunk(0) if values.num_chunks == 1 else pa.concat_arrays(values.chunks or [pa.nulls(0, values.type)])
        )
    if values.null_count:
        raise ValueError(f"{values.null_count} nulls in an array that must have none")
    n, start = len(values), values.offset
    data = values.buffers()[1]
    if pa.types.is_boolean(values.type):
        if n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little", count=start + n)
        return bits[start:].astype(bool)
    storage = pa.int64() if pa.types.is_timestamp(values.type) else values.type
    fixed = _FIXED_WIDTH.get(storage)
    if fixed is None:
        raise ValueError(f"an array of {values.type} has no NumPy form here")
    dtype = fixed[0]
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=n, offset=start * np.dtype(dtype).itemsize)


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` with no rows, one empty chunk per column (``schema.empty_table()``,
    which builds its columns through ``pa.array``)."""
    return pa.Table.from_arrays([pa.nulls(0, field.type) for field in schema], schema=schema)


def table_from_stream(data: Any) -> pa.Table:
    """A pyarrow table of any object that exports an Arrow C stream (``__arrow_c_stream__``:
    arro3 and delta-rs results, DuckDB/Polars frames), read whole."""
    return pa.RecordBatchReader.from_stream(data).read_all()
