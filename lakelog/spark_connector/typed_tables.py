"""Typed tables: a topic of the registry's Avro, JSON or Protobuf values, kept as a Delta table of its own.

The table has the value schema's fields as columns, then ``partition``, ``offset`` and
``timestamp`` of each record. It is filled by a Structured Streaming query: ``format("lakelog")``
with ``valueFormat`` the subject's format (:mod:`lakelog.schemas.spark_columns`; Spark's
``from_avro``, ``from_json`` or lakelog-jvm.jar's ``lakelog_from_protobuf``) into
Delta's streaming sink, so it is

* exactly-once: Delta's sink commits each micro-batch with the query's id and batch id as an
  application transaction (``txn`` action; DeltaSink.addBatch skips a batch whose id the table
  already holds, PROTOCOL.md "Transaction Identifiers"), and the source replays a batch's
  offsets from the checkpoint after a crash; a restarted job neither loses nor repeats a record;
* incremental: each run reads from where the checkpoint left off (``availableNow``: what is in
  the topic now, then stop; continuous: every ``trigger_interval``);
* evolving: a column a compatible schema version adds is added to the table
  (``mergeSchema``); records written before it show its default or null.

The schemas are read when a query starts. A record written with a schema version registered
after that fails the query naming its schema id; a continuous :func:`run` then starts the query
again (which reads the new version) as long as the registry has grown since the last start.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakelog.engine.errors import InvalidConfigError
from lakelog.schemas.registry import read_state
from lakelog.schemas.spark_columns import Decoding, subject_format
from lakelog.spark_connector.session import SCRATCH_DIR

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

RECORD_COLUMNS = ("partition", "offset", "timestamp")
# The message of the typed read's raise_error for an id the query did not know (spark_columns).
UNKNOWN_ID = "names schema id"


@dataclass(frozen=True)
class TypedTable:
    """Topic ``topic`` of the store at ``store_uri`` kept as the Delta table at ``table``."""

    store_uri: str
    topic: str
    table: str
    checkpoint: str
    subject: str | None = None
    message: str | None = None  # Protobuf: the message read (default: the schema's first)


def typed_table(
    store_uri: str,
    topic: str,
    table: str,
    checkpoint: str | None = None,
    subject: str | None = None,
    message: str | None = None,
) -> TypedTable:
    """The :class:`TypedTable`, its checkpoint defaulting to the store's scratch area
    (``_lakelog/tables/<topic>-<hash of the table's location>``, which Delta readers and VACUUM
    leave alone), one per (topic, table)."""
    if not topic.strip() or not table.strip():
        raise InvalidConfigError("a typed table needs a topic and a table location")
    if checkpoint is None:
        digest = hashlib.sha1(table.rstrip("/").encode()).hexdigest()[:12]
        checkpoint = f"{store_uri.rstrip('/')}/{SCRATCH_DIR}/tables/{topic}-{digest}/checkpoint"
    return TypedTable(store_uri, topic, table, checkpoint, subject, message)


def typed_frame(spark: SparkSession, spec: TypedTable, *, streaming: bool = True) -> DataFrame:
    """The topic's records as the table's rows: the value's fields, then ``partition``,
    ``offset``, ``timestamp``, decoded in the format of the subject's latest schema (Avro, JSON
    Schema or Protobuf). Raises InvalidConfigError when the subject has no schema, a message is
    named for a subject not in Protobuf, or a field is named like one of those."""
    # Read here, so that an error reaches the caller as itself rather than through Spark's worker.
    fmt = subject_format(
        read_state(spec.store_uri), Decoding("value", spec.topic, spec.subject or f"{spec.topic}-value")
    )
    reader = spark.readStream if streaming else spark.read
    reader = reader.format("lakelog").option("path", spec.store_uri).option("subscribe", spec.topic)
    reader = reader.option("startingOffsets", "earliest").option("valueFormat", fmt)
    if spec.subject:
        reader = reader.option("valueSubject", spec.subject)
    if spec.message:
        if fmt != "protobuf":
            raise InvalidConfigError(
                f"topic {spec.topic!r}: a message ({spec.message!r}) is named for Protobuf subjects; "
                f"this one's schemas are {fmt}"
            )
        reader = reader.option("valueMessage", spec.message)
    frame = reader.load()
    fields = frame.schema["value"].dataType.fieldNames()
    clash = sorted(set(fields) & set(RECORD_COLUMNS))
    if clash:
        raise InvalidConfigError(
            f"topic {spec.topic!r}: the value schema has fields named {', '.join(clash)}, which a typed table "
            f"keeps for the record's {', '.join(RECORD_COLUMNS)}"
        )
    return frame.select("value.*", *RECORD_COLUMNS)


def start(
    spark: SparkSession, spec: TypedTable, *, continuous: bool = False, trigger_interval: str = "10 seconds"
) -> StreamingQuery:
    """Start the query that appends the topic's new records to the table (``availableNow`` unless
    ``continuous``)."""
    writer = (
        typed_frame(spark, spec)
        .writeStream.format("delta")
        .outputMode("append")
        .option("checkpointLocation", spec.checkpoint)
        .option("mergeSchema", "true")
        .queryName(f"lakelog typed table {spec.topic}")
    )
    writer = writer.trigger(processingTime=trigger_interval) if continuous else writer.trigger(availableNow=True)
    return writer.start(spec.table)


def run(
    spark: SparkSession,
    spec: TypedTable,
    *,
    continuous: bool = False,
    trigger_interval: str = "10 seconds",
    timeout_s: float | None = None,
) -> None:
    """Bring the table up to date (``availableNow``) and return, or with ``continuous`` keep it
    up to date until ``timeout_s`` (None: until stopped), starting the query again when a
    record names a schema version registered after it started. Raises what the query raises
    (an unknown schema id the registry does not know either: the typed read's named error)."""
    import time

    from pyspark.errors import StreamingQueryException

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        known = read_state(spec.store_uri).max_id
        query = start(spark, spec, continuous=continuous, trigger_interval=trigger_interval)
        try:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            finished = query.awaitTermination(remaining) if remaining is not None else query.awaitTermination()
            if finished is False:
                query.stop()
            return
        except StreamingQueryException as error:
            if UNKNOWN_ID not in str(error) or read_state(spec.store_uri).max_id <= known:
                raise
            log.info("typed table of %r: a schema version registered since the query started; restarting", spec.topic)
        finally:
            if query.isActive:
                query.stop()
