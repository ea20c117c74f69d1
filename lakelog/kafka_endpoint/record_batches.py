"""Kafka record batches (magic v2) to and from Arrow columns, with aiokafka's record codec.

``kio`` models the protocol's messages but not the records inside them (and
its record reader drops a record timestamp's milliseconds), so the
``records`` bytes of Produce and Fetch go through aiokafka's
``DefaultRecordBatch`` / ``DefaultRecordBatchBuilder``: Cython, CRC-32C
written, gzip, snappy, lz4 and zstd (cramjam). kafka-python's
pure-Python codec decoded ~9 us per record, a fifth of the agent's produce
throughput; aiokafka's takes ~0.3 us. Produced batches the agent meets most (uncompressed,
records without headers) are read by :mod:`kafka_endpoint.record_columns` instead, in C
straight into Arrow columns (a 16 KB batch of 150 records: 9 us, no object per record);
aiokafka still frames every batch and reads its magic and the rest. Every produced batch's
CRC-32C is checked here with ``crc32c``, the GIL held (:func:`decode_batches`).
"""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import pyarrow as pa
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from lakelog.engine.arrow_columns import array
from lakelog.kafka_endpoint.record_columns import read_columns

_BASE_OFFSET = struct.Struct(">q")
# A v2 batch's partitionLeaderEpoch: after its base offset and length, before the CRC'd part.
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_AT = 12
# The leader epoch of every partition: the agent is the one leader each partition ever had, as a
# Kafka partition that never changed leader stays at epoch 0. Metadata, ListOffsets,
# OffsetForLeaderEpoch and the batches Fetch returns all say it, so a client's log truncation
# check (KIP-320) never finds a divergence that is not there.
LEADER_EPOCH = 0


class InvalidRecordBatchError(ValueError):
    """The records of a produce request are not valid v2 batches (Kafka's CORRUPT_MESSAGE)."""


class ProducedBatch:
    """One record batch of a produce request: its producer fields and its records, as Arrow
    columns (``key_column``, ``value_column``: ``pa.binary()``; ``timestamp_column``: int64 ms)
    or as Python lists (``keys``, ``values``, ``headers``, ``timestamps``), whichever it was
    made from: lists are derived from columns once, on first use (then kept instead of them),
    columns from lists at each use. ``bare`` says that no record has headers."""

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        transactional: bool,
        keys: list[bytes | None] | pa.Array,
        values: list[bytes | None] | pa.Array,
        headers: list[list[tuple[str, bytes | None]] | None] | None,
        timestamps: list[int] | np.ndarray,
    ) -> None:
        """``headers`` None: no record has headers."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.transactional = transactional
        self._keys, self._values, self._timestamps = keys, values, timestamps
        self._headers = headers
        self.bare = headers is None or headers.count(None) == len(headers)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def keys(self) -> list[bytes | None]:
        if isinstance(self._keys, pa.Array):
            self._keys = self._keys.to_pylist()
        return self._keys

    @property
    def values(self) -> list[bytes | None]:
        if isinstance(self._values, pa.Array):
            self._values = self._values.to_pylist()
        return self._values

    @property
    def headers(self) -> list[list[tuple[str, bytes | None]] | None]:
        if self._headers is None:
            self._headers = [None] * len(self)
        return self._headers

    @property
    def timestamps(self) -> list[int]:
        if isinstance(self._timestamps, np.ndarray):
            self._timestamps = self._timestamps.tolist()
        return self._timestamps

    @property
    def key_column(self) -> pa.Array:
        return array(self._keys, pa.binary())

    @property
    def value_column(self) -> pa.Array:
        return array(self._values, pa.binary())

    @property
    def timestamp_column(self) -> np.ndarray:
        if isinstance(self._timestamps, np.ndarray):
            return self._timestamps
        return np.fromiter(self._timestamps, dtype=np.int64, count=len(self._timestamps))


# A v2 batch's header fields (Kafka's DefaultRecordBatch): where each starts, after the base
# offset and length; the records follow the header.
_BATCH_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_CRC_AT = 17  # the CRC-32C of everything from the attributes on
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21
_BASE_TIMESTAMP = struct.Struct(">q")
_BASE_TIMESTAMP_AT = 27
_RECORD_COUNT = struct.Struct(">i")
_RECORD_COUNT_AT = 57
_RECORDS_AT = 61
# Attributes: the compression codec's bits and LogAppendTime's.
_COMPRESSION = 0x07
_LOG_APPEND_TIME = 0x08


def decode_batches(data: bytes | None) -> list[ProducedBatch]:
    """The batches of a produce request's ``records``. Raises InvalidRecordBatchError for a
    magic other than 2, a CRC mismatch, a control batch, or bytes that are not batches."""
    if not data:
        return []
    try:
        data = bytes(data)
        view = memoryview(data)
        records = MemoryRecords(data)
        batches = []
        at = 0  # where the batch MemoryRecords hands out next starts in ``data``
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            size = 12 + _BATCH_LENGTH.unpack_from(data, at + 8)[0]
            if batch.magic != 2:
                raise InvalidRecordBatchError(f"record batch magic {batch.magic}: only v2 batches are accepted")
            # The CRC checked here with the GIL held: aiokafka's check gives it up for the few
            # microseconds a 16 KB batch takes, and the event loop then waits for it behind the
            # agent's other threads, up to the switch interval (measured beside a thread running
            # Python: 11 us -> 272 us a batch). crc32c uses the CPU's CRC-32C instruction.
            if (
                crc32c.crc32c(view[at + _ATTRIBUTES_AT : at + size], gil_release_mode=0)
                != _CRC.unpack_from(data, at + _CRC_AT)[0]
            ):
                raise InvalidRecordBatchError("record batch CRC-32C mismatch")
            if batch.is_control_batch:
                raise InvalidRecordBatchError("a client may not produce control batches")
            columns = None
            if not _ATTRIBUTES.unpack_from(data, at + _ATTRIBUTES_AT)[0] & (_COMPRESSION | _LOG_APPEND_TIME):
                columns = read_columns(
                    data,
                    at + _RECORDS_AT,
                    at + size,
                    _RECORD_COUNT.unpack_from(data, at + _RECORD_COUNT_AT)[0],
                    _BASE_TIMESTAMP.unpack_from(data, at + _BASE_TIMESTAMP_AT)[0],
                )
            at += size
            fields = (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional)
            if columns is not None:  # uncompressed, no headers: read in C, no object per record
                batches.append(ProducedBatch(*fields, columns[0], columns[1], None, columns[2]))
                continue
            # A column at a time over the decoded records: a third less than one pass appending
            # to four lists (measured on 125-record batches, the Java producer's 16 KB).
            rows = list(batch)
            each = [r.headers for r in rows]
            headers = [[(k, v) for k, v in h] if h else None for h in each] if any(each) else None
            batches.append(
                ProducedBatch(
                    *fields,
                    [r.key for r in rows],
                    [r.value for r in rows],
                    headers,
                    [int(r.timestamp) for r in rows],
                )
            )
        return batches
    except InvalidRecordBatchError:
        raise
    except Exception as exc:  # aiokafka raises CorruptRecordException, struct.error, codec errors
        raise InvalidRecordBatchError(f"records cannot be read: {type(exc).__name__}: {exc}") from exc


def encode_batch(rows: pa.Table) -> bytes:
    """One v2 batch (uncompressed, CreateTime) of log rows in offset order: each record keeps
    its offset (gaps of a compacted partition stay gaps) and its timestamp in ms."""
    if not rows.num_rows:
        return b""
    offsets = rows.column("offset").to_pylist()
    stamps = rows.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    keys = rows.column("key").to_pylist()
    values = rows.column("value").to_pylist()
    headers = rows.column("headers").to_pylist()
    base = offsets[0]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**31 - 1,
    )
    for offset, stamp, key, value, hs in zip(offsets, stamps, keys, values, headers, strict=True):
        builder.append(offset - base, stamp, key, value, [(h["key"], h["value"]) for h in hs or ()])
    data = builder.build()
    _BASE_OFFSET.pack_into(data, 0, base)  # the builder numbers from 0; the CRC does not cover it
    _LEADER_EPOCH.pack_into(data, _LEADER_EPOCH_AT, LEADER_EPOCH)  # nor this (it starts at attributes)
    return bytes(data)
