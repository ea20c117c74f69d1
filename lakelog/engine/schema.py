"""Columns of the log table and of the DataFrames lakelog hands out.

The log table keeps Kafka's record plus producer audit fields. ``offset``
and ``timestamp`` come right after the partition columns and are the only
columns Delta collects min/max statistics for
(``delta.dataSkippingStatsColumns``): seeks by offset or time prune files by
those statistics, and the writer derives each partition's end offset from
them.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from lakelog.engine.errors import InvalidRecordError

LOG_COLUMNS: tuple[tuple[str, str], ...] = (
    ("topic", "STRING"),
    ("partition", "INT"),
    ("offset", "BIGINT"),
    ("timestamp", "TIMESTAMP"),
    ("timestamp_type", "INT"),
    ("key", "BINARY"),
    ("value", "BINARY"),
    ("headers", "ARRAY<STRUCT<key: STRING, value: BINARY>>"),
    ("producer_id", "BIGINT"),
    ("producer_epoch", "INT"),
    ("sequence", "INT"),
)
PARTITION_COLUMNS = ("topic", "partition")
STATS_COLUMNS = ("offset", "timestamp")

LOG_TABLE_DDL = ", ".join(f"`{name}` {kind}" for name, kind in LOG_COLUMNS)


def _field(name: str, kind: object) -> dict[str, object]:
    return {"name": name, "type": kind, "nullable": True, "metadata": {}}


_DELTA_TYPES = {"STRING": "string", "INT": "integer", "BIGINT": "long", "TIMESTAMP": "timestamp", "BINARY": "binary"}
_HEADERS_DELTA = {
    "type": "array",
    "elementType": {"type": "struct", "fields": [_field("key", "string"), _field("value", "binary")]},
    "containsNull": True,
}

# The log table's schema as Delta's ``metaData.schemaString`` holds it (what Spark writes for LOG_TABLE_DDL).
LOG_SCHEMA_JSON: dict[str, object] = {
    "type": "struct",
    "fields": [_field(name, _DELTA_TYPES.get(kind, _HEADERS_DELTA)) for name, kind in LOG_COLUMNS],
}

HEADERS_ARROW = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

LOG_ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestamp_type", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_ARROW),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("sequence", pa.int32()),
    ]
)

# Spark's Kafka source schema, in its order, with headers last (includeHeaders).
KAFKA_SOURCE_SELECT = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type AS timestampType",
    "headers",
)

# Columns the Kafka sink accepts, and the Spark types each may have.
SINK_COLUMN_TYPES: dict[str, tuple[str, ...]] = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
    "timestamp": ("timestamp", "bigint"),
}


def check_sink_columns(types: Mapping[str, str]) -> None:
    """Raise InvalidRecordError unless ``types`` (column -> Spark type string) are Kafka sink columns."""
    unknown = sorted(set(types) - set(SINK_COLUMN_TYPES))
    if unknown:
        raise InvalidRecordError(
            f"unexpected column(s) {unknown}; a topic DataFrame has the Kafka sink's columns: "
            + ", ".join(SINK_COLUMN_TYPES)
        )
    if "value" not in types:
        raise InvalidRecordError("the DataFrame needs a 'value' column (binary or string)")
    for name, kind in types.items():
        if kind not in SINK_COLUMN_TYPES[name]:
            raise InvalidRecordError(
                f"column {name!r} has type {kind}; expected " + " or ".join(SINK_COLUMN_TYPES[name])
            )
