"""How a data file's columns are encoded: dictionaries only where a file's values repeat,
statistics only where a reader prunes by them; the rows read back as written."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.engine.commit.data_files import DataFileWriter
from lakelog.engine.schema import LOG_ARROW_SCHEMA

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
