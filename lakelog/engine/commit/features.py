"""Which Delta table features the commit core implements; tables needing others are refused.

Delta protocol, "Table Features": a writer must implement every writer
feature the table's protocol names (for writer versions 2-6, the features
those versions imply). lakelog writes plain Parquet files with statistics,
``add``/``remove``/``txn``/``metaData`` actions and nothing else, so it
implements ``appendOnly`` (refusing removes while ``delta.appendOnly`` is
true) and ``invariants`` (refusing writes while any column has one: it does
not evaluate them). Deletion vectors, column mapping, change data feed,
check constraints, generated and identity columns, row tracking, in-commit
timestamps and the rest would each need work lakelog does not do; writing
such a table anyway could corrupt it, so the core raises
UnsupportedTableFeatureError before writing anything.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from lakelog.engine.commit.actions import Metadata, Protocol
from lakelog.engine.errors import UnsupportedTableFeatureError

WRITER_FEATURES = frozenset({"appendOnly", "invariants"})
READER_FEATURES: frozenset[str] = frozenset()

# What legacy writer versions imply (Delta protocol, "Table Features", legacy versions).
_LEGACY_WRITER = {
    3: {"checkConstraints"},
    4: {"checkConstraints", "changeDataFeed", "generatedColumns"},
    5: {"checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping"},
    6: {"checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping", "identityColumns"},
}


def unsupported_features(protocol: Protocol) -> list[str]:
    """The reader and writer features of ``protocol`` lakelog does not implement."""
    missing: set[str] = set()
    if protocol.min_reader_version == 2:
        missing.add("columnMapping")
    elif protocol.min_reader_version >= 3:
        missing |= set(protocol.reader_features or ()) - READER_FEATURES
    if protocol.min_writer_version in _LEGACY_WRITER:
        missing |= _LEGACY_WRITER[protocol.min_writer_version]
    elif protocol.min_writer_version >= 7:
        missing |= set(protocol.writer_features or ()) - WRITER_FEATURES
    return sorted(missing)


def check_readable(protocol: Protocol) -> None:
    """Raise UnsupportedTableFeatureError if lakelog's readers (which read Parquet files as
    they are) would read the table wrongly: deletion vectors, column mapping, ..."""
    missing: set[str] = set()
    if protocol.min_reader_version == 2:
        missing.add("columnMapping")
    elif protocol.min_reader_version >= 3:
        missing |= set(protocol.reader_features or ()) - READER_FEATURES
    if missing:
        raise UnsupportedTableFeatureError(
            f"the table needs Delta reader feature(s) {', '.join(sorted(missing))} (protocol reader "
            f"{protocol.min_reader_version}), which lakelog does not implement; it refuses to read the table"
        )


def _has_invariants(schema: Any) -> bool:
    if isinstance(schema, dict):
        if "delta.invariants" in (schema.get("metadata") or {}):
            return True
        return any(_has_invariants(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_invariants(v) for v in schema)
    return False


@functools.lru_cache(maxsize=64)
def _schema_has_invariants(schema_string: str) -> bool:
    # Asked before every commit of a table whose schema rarely changes: walking it cost a
    # tenth of a small commit's time.
    try:
        schema = json.loads(schema_string)
    except ValueError:
        return False
    return _has_invariants(schema)


def check_writable(protocol: Protocol, metadata: Metadata, *, removes: bool = False) -> None:
    """Raise UnsupportedTableFeatureError unless lakelog may commit to this table
    (``removes``: the commit removes files)."""
    missing = unsupported_features(protocol)
    if missing:
        raise UnsupportedTableFeatureError(
            f"the table needs Delta feature(s) {', '.join(missing)} (protocol reader "
            f"{protocol.min_reader_version}, writer {protocol.min_writer_version}), which lakelog does not "
            "implement; it refuses to write the table"
        )
    if _schema_has_invariants(metadata.schema_string):
        raise UnsupportedTableFeatureError("a column of the table has a Delta invariant, which lakelog does not check")
    if removes and str(metadata.configuration.get("delta.appendOnly", "false")).lower() == "true":
        raise UnsupportedTableFeatureError(
            "the table is append-only (delta.appendOnly=true): lakelog cannot remove files from it"
        )
