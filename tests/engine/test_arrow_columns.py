"""engine.arrow_columns builds what pyarrow's own constructors build, without pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from lakelog.engine.arrow_columns import array, empty_table, key_value_lists, scalar, table_from_stream, to_numpy
from lakelog.engine.schema import HEADERS_ARROW, LOG_ARROW_SCHEMA

UTC_US = pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        ([1, 2, 3], pa.int32()),
        ([1, None, 3], pa.int64()),
        (range(5, 9), pa.int64()),
        (np.arange(4, dtype=np.int64), pa.int32()),
        (np.array([7, 8], dtype=np.int32), pa.int64()),
        ([1.5, None], pa.float64()),
        ([b"a", b"", bytearray(b"bc")], pa.binary()),
        ([b"a", None], pa.binary()),
        ([], pa.binary()),
        ([None, None, None], pa.binary()),
        ((None,) * 4, pa.int64()),
        ([None, None], UTC_US),
        ([None], HEADERS_ARROW),
        (["x", None, "é"], pa.string()),
        (np.array([True, False, True]), pa.bool_()),
        ([True, None], pa.bool_()),
        ([1_700_000_000_000_000, None], UTC_US),
        (np.array([5, 6]), UTC_US),
    ],
)
def test_arrays_hold_what_pa_array_holds(values, kind):
    built = array(values, kind)
    built.validate(full=True)
    expected = pa.array(list(values) if isinstance(values, range) else values, kind)
    assert built.type == kind
    assert built.equals(expected)


@pytest.mark.parametrize(
    ("values", "kind", "error"),
    [
        ([2**40], pa.int32(), OverflowError),
        (np.array([2**40]), pa.int32(), OverflowError),
        (np.array([1.5]), pa.int64(), OverflowError),
        (["x"], pa.int64(), TypeError),
        ([b"a", 1], pa.binary(), TypeError),
        ([b"a", None, 1], pa.binary(), TypeError),
        (np.zeros((2, 2), dtype=np.int64), pa.int64(), ValueError),
    ],
)
def test_values_that_do_not_fit_are_refused(values, kind, error):
    with pytest.raises(error):
        array(values, kind)


def test_header_lists_and_scalars_and_tables():
    rows = [None, [("a", b"v"), ("b", None)], [], None, [("c", b"")]]
    headers = key_value_lists(rows, HEADERS_ARROW)
    headers.validate(full=True)
    assert headers.equals(
        pa.array([None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows], HEADERS_ARROW)
    )
    assert len(key_value_lists([], HEADERS_ARROW)) == 0
    # As send_batch's headers come: rows of {"key", "value"} mappings or (key, value) tuples.
    dicts = [[{"key": "a", "value": b"v"}], None, [], [("b", None), {"key": "c", "value": b""}]]
    built = array(dicts, HEADERS_ARROW)
    assert built.to_pylist() == [
        [{"key": "a", "value": b"v"}],
        None,
        [],
        [{"key": "b", "value": None}, {"key": "c", "value": b""}],
    ]
    with pytest.raises((TypeError, ValueError)):
        array([[("a", b"v", 3)]], HEADERS_ARROW)
    # A type arro3 cannot build still gets built (by pyarrow).
    assert array([[1, 2], None], pa.list_(pa.int64())).to_pylist() == [[1, 2], None]
    assert scalar(3, pa.int32()).equals(pa.scalar(3, pa.int32()))
    assert scalar("t", pa.string()).as_py() == "t"
    assert empty_table(LOG_ARROW_SCHEMA).equals(LOG_ARROW_SCHEMA.empty_table())
    table = pa.table({"a": [1, 2]})
    assert table_from_stream(table).equals(table)


def test_numpy_views_of_slices_chunks_and_booleans():
    values = array(list(range(10)), pa.int64())
    assert to_numpy(values.slice(3, 3)).tolist() == [3, 4, 5]
    assert to_numpy(values.slice(0, 0)).tolist() == []
    assert to_numpy(pa.chunked_array([values.slice(1, 2), values.slice(5, 2)])).tolist() == [1, 2, 5, 6]
    assert to_numpy(pa.chunked_array([], pa.int32())).dtype == np.int32
    flags = array([True, False, True, True, False, False, False, False, True, True], pa.bool_())
    assert to_numpy(flags.slice(7)).tolist() == [False, True, True]
    assert to_numpy(array([5], UTC_US)).tolist() == [5]
    with pytest.raises(ValueError, match="nulls"):
        to_numpy(array([1, None], pa.int64()))
    with pytest.raises(ValueError, match="string"):
        to_numpy(array(["x"], pa.string()))


def test_nothing_here_imports_pandas():
    script = """
import sys
import numpy as np
import pyarrow as pa
from lakelog.engine.arrow_columns import array, empty_table, key_value_lists, scalar, to_numpy
from lakelog.engine.schema import HEADERS_ARROW, LOG_ARROW_SCHEMA
array([1, None], pa.int64()); array(np.arange(3), pa.int32()); array([b"a", None], pa.binary())
array(["x"], pa.string()); array(np.array([True]), pa.bool_()); array([1], pa.timestamp("us", tz="UTC"))
key_value_lists([[("k", b"v")], None], HEADERS_ARROW); scalar(1, pa.int64()); empty_table(LOG_ARROW_SCHEMA)
to_numpy(pa.chunked_array([], pa.int64())); to_numpy(array([True], pa.bool_()))
assert "pandas" not in sys.modules
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
