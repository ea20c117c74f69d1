"""A checkpoint made from the one before it and the commits since, instead of by delta-rs.

delta-rs writes a checkpoint by loading the table and then reading the log again in its own
checkpoint writer: ~0.7 ms of CPU for every commit since the previous checkpoint (a ~3,200-file
table; lakelog's check decodes each commit once more, ~0.07 ms). Every commit is read by exactly
one checkpoint however often they come, so pacing them cannot help: in a warm ``lakelog serve``
run under Kafka's ProducerPerformance checkpoints took 13-16% of the agent's CPU, and the agent
without them was faster in eight alternating pairs of eight (median +13%).

When the commits since the previous checkpoint only add files (without deletion vectors) and set
application transactions -- what produce commits do -- the next checkpoint is the previous one's
rows, less the txn rows those commits replace, plus one row per add and per txn, in the previous
checkpoint's own schema (delta-rs' columns, its typed statistics ``stats_parsed`` and parsed
partition values included): the Delta protocol's "complete replay of all actions, up to and
including the checkpointed table version", from the replay the previous checkpoint already holds.
:func:`extend` returns None for anything else -- a remove, metaData, protocol or domain metadata
among the commits, a previous checkpoint holding removes or sidecars, a field of its ``add``
struct this does not fill, a statistic of a type it does not parse -- and delta-rs writes that
checkpoint as before. Pure: values in, a table out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.arrow_columns import array, null_mask, offsets, scalar
from lakelog.engine.commit.actions import AddFile, Commit, CommitInfo, Txn

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The add struct's fields an extension fills (delta-rs 1.x's checkpoint schema); one it does not
# know leaves the checkpoint to delta-rs.
_ADD_FIELDS = frozenset(
    {
        "path",
        "partitionValues",
        "partitionValues_parsed",
        "size",
        "modificationTime",
        "dataChange",
        "stats",
        "stats_parsed",
        "tags",
        "deletionVector",
        "baseRowId",
        "defaultRowCommitVersion",
        "clusteringProvider",
    }
)


class _Unsupported(Exception):
    """A value this module does not turn into a checkpoint's typed column."""


def extend(previous: pa.Table, commits: Sequence[Commit]) -> pa.Table | None:
    """The checkpoint after ``commits`` (the commits following ``previous``'s version, in order)
    built on ``previous`` (a classic checkpoint as read, every column), in its schema; None when
    it cannot be made so (see the module docstring)."""
    schema = previous.schema
    if "add" not in schema.names or "txn" not in schema.names or not _only_adds_and_txns_in(previous):
        return None
    add_type = schema.field("add").type
    if not isinstance(add_type, pa.StructType) or any(f.name not in _ADD_FIELDS for f in add_type):
        return None
    adds: list[dict[str, Any]] = []
    txns: dict[str, dict[str, Any]] = {}
    try:
        for commit in commits:
            for action in commit.actions:
                if isinstance(action, AddFile):
                    adds.append(_add_row(action, add_type))
                elif isinstance(action, Txn):
                    txns[action.app_id] = {
                        "appId": action.app_id,
                        "version": action.version,
                        "lastUpdated": action.last_updated,
                    }
                elif not isinstance(action, CommitInfo):
                    return None
    except _Unsupported:
        return None
    replaced = pc.is_in(pc.struct_field(previous.column("txn"), "appId"), value_set=array(list(txns), pa.string()))
    kept = previous.filter(pc.invert(pc.fill_null(replaced, scalar(False, pa.bool_()))))
    rows = [{"add": add} for add in adds] + [{"txn": txn} for txn in txns.values()]
    added = pa.Table.from_arrays([_column([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema)
    return pa.concat_tables([kept, added])


def _column(values: list[Any], type_: pa.DataType, nullable: bool = True) -> pa.Array:
    """``values`` (Python values as :func:`_typed` gives them, None for a null) as an array of
    ``type_``, built without pyarrow's Python converter (which imports pandas,
    :mod:`engine.arrow_columns`). A null under a null parent of a field that may not be null
    gets a zero value instead: Parquet writers refuse nulls in a non-nullable column, whatever
    the parent (how delta-rs' own checkpoints hold them)."""
    if not nullable:
        values = [_zero(type_) if v is None else v for v in values]
    if isinstance(type_, pa.StructType):
        children = [_column([None if v is None else v.get(f.name) for v in values], f.type, f.nullable) for f in type_]
        return pa.StructArray.from_arrays(children, fields=list(type_), mask=null_mask(values))
    if isinstance(type_, pa.MapType):
        pairs = [pair for v in values if v is not None for pair in v]
        keys = _column([k for k, _ in pairs], type_.key_type, nullable=False)
        items = _column([v for _, v in pairs], type_.item_type, type_.item_field.nullable)
        return pa.MapArray.from_arrays(_offsets_of(values), keys, items, type=type_, mask=null_mask(values))
    if pa.types.is_list(type_):
        flat = _column([e for v in values if v is not None for e in v], type_.value_type, type_.value_field.nullable)
        return pa.ListArray.from_arrays(_offsets_of(values), flat, type=type_, mask=null_mask(values))
    return array(values, type_)


def _offsets_of(values: list[Any]) -> pa.Array:
    return array(offsets((0 if v is None else len(v) for v in values), len(values)), pa.int32())


def _zero(type_: pa.DataType) -> Any:
    if isinstance(type_, pa.StructType):
        return {}
    if isinstance(type_, pa.MapType) or pa.types.is_list(type_):
        return []
    if pa.types.is_boolean(type_):
        return False
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return ""
    return 0


def _only_adds_and_txns_in(previous: pa.Table) -> bool:
    """Whether ``previous`` holds no remove or sidecar rows (those a replay would have to age
    out or resolve; left to delta-rs)."""
    for name in ("remove", "sidecar"):
        if name in previous.column_names and previous.column(name).null_count != previous.num_rows:
            return False
    return True


def _add_row(add: AddFile, add_type: pa.StructType) -> dict[str, Any]:
    if add.deletion_vector is not None or add.extra:
        raise _Unsupported("an add with a deletion vector or fields lakelog does not decode")
    row: dict[str, Any] = {
        "path": add.path,
        "partitionValues": list(add.partition_values.items()),
        "size": add.size,
        "modificationTime": add.modification_time,
        "dataChange": add.data_change,
        "stats": add.stats,
        "tags": None if add.tags is None else list(add.tags.items()),
    }
    names = {f.name for f in add_type}
    if "partitionValues_parsed" in names:
        row["partitionValues_parsed"] = _typed(
            dict(add.partition_values), add_type.field("partitionValues_parsed").type, partition=True
        )
    if "stats_parsed" in names:
        stats = json.loads(add.stats) if add.stats else None
        row["stats_parsed"] = None if stats is None else _typed(stats, add_type.field("stats_parsed").type)
    return row


def _typed(value: Any, type_: pa.DataType, partition: bool = False) -> Any:
    """``value`` (from a stats JSON, or a partition value's text with ``partition``) as a Python
    value of Arrow type ``type_``, as delta-rs types them; raises _Unsupported for a type it does
    not handle."""
    if value is None:
        return None
    if isinstance(type_, pa.StructType):
        if not isinstance(value, Mapping):
            raise _Unsupported(f"{value!r} for a struct")
        return {f.name: _typed(value.get(f.name), f.type, partition) for f in type_}
    if pa.types.is_timestamp(type_):
        if not isinstance(value, str):
            raise _Unsupported(f"{value!r} for a timestamp")
        # Delta's statistics: ISO 8601 with a zone ("...T20:14:36.670Z"); partition values:
        # "2024-01-01 00:00:00" style, which fromisoformat reads too.
        stamp = datetime.fromisoformat(value)
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        micros = (stamp - _EPOCH) // timedelta(microseconds=1)
        return {"s": micros // 1_000_000, "ms": micros // 1_000, "us": micros, "ns": micros * 1_000}[type_.unit]
    if pa.types.is_date32(type_) and isinstance(value, str):
        return (date.fromisoformat(value) - _EPOCH.date()).days
    if pa.types.is_boolean(type_) and isinstance(value, bool):
        return value
    if pa.types.is_boolean(type_) and partition and str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    if pa.types.is_integer(type_) and (partition or (isinstance(value, int) and not isinstance(value, bool))):
        return int(value)
    if pa.types.is_floating(type_) and (partition or isinstance(value, (int, float))):
        return float(value)
    if (pa.types.is_string(type_) or pa.types.is_large_string(type_)) and (partition or isinstance(value, str)):
        return str(value)
    raise _Unsupported(f"{value!r} as {type_}")
