"""Kafka's default partitioner.

Keyed records go to ``(murmur2(key) & 0x7fffffff) % partitions``, bit for bit
what the Java client's ``BuiltInPartitioner.partitionForKey`` computes
(``Utils.murmur2`` + ``Utils.toPositive``), so a key lands in the same
partition whether Kafka or lakelog placed it. Keyless records are spread
round-robin, a batch at a time (the sticky idea of KIP-480: a producer's
consecutive keyless records share a partition until the batch switches).
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pyarrow as pa

from lakelog.engine.arrow_columns import to_numpy

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the signed 32-bit MurmurHash2 of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    blocks = length // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


_SEED_U32 = np.uint32(_SEED)
_M_U32 = np.uint32(_M)
_MATRIX_BYTES = 1 << 24


def murmur2_array(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """:func:`murmur2` of every key of a binary (or large binary) array, as int32.

    Bit for bit the scalar function's result for each key; a null entry gets
    the hash of the empty key (callers mask nulls themselves). Keys of equal
    length are hashed together, so the cost is a few numpy passes per
    distinct key length rather than Python work per key.
    """
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if not (pa.types.is_binary(keys.type) or pa.types.is_large_binary(keys.type)):
        raise TypeError(f"murmur2_array needs binary keys, got {keys.type}")
    n = len(keys)
    result = np.empty(n, dtype=np.uint32)
    if n == 0:
        return result.view(np.int32)
    _, offsets_buffer, data_buffer = keys.buffers()
    offset_type = np.int64 if pa.types.is_large_binary(keys.type) else np.int32
    # The array may be a slice: its offsets start keys.offset entries into the buffer.
    offsets = np.frombuffer(
        offsets_buffer, dtype=offset_type, count=n + 1, offset=keys.offset * np.dtype(offset_type).itemsize
    )
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    if keys.null_count:
        # A null slot's offsets may span bytes (Arrow does not forbid it).
        lengths[to_numpy(keys.is_null())] = 0
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    unique_lengths, groups = np.unique(lengths, return_inverse=True)
    for group, length in enumerate(unique_lengths.tolist()):
        same_length = np.flatnonzero(groups == group)
        # Bounded slices keep the (rows, length) byte matrix small for long keys.
        step = max(1, _MATRIX_BYTES // max(length, 1))
        for first in range(0, len(same_length), step):
            rows = same_length[first : first + step]
            matrix = data[starts[rows, None] + np.arange(length)]
            result[rows] = _murmur2_rows(matrix, length)
    return result.view(np.int32)


def _murmur2_rows(matrix: np.ndarray, length: int) -> np.ndarray:
    """murmur2 of each row of an (n, length) uint8 matrix; uint32 arithmetic wraps as Java's int."""
    h = np.full(len(matrix), _SEED_U32 ^ np.uint32(length & _MASK32), dtype=np.uint32)
    blocks = length // 4
    if blocks:
        # Little-endian 4-byte words, as Utils.murmur2 assembles them.
        words = np.ascontiguousarray(matrix[:, : 4 * blocks]).view("<u4").astype(np.uint32, copy=False)
        for i in range(blocks):
            k = words[:, i] * _M_U32
            k ^= k >> np.uint32(24)
            k *= _M_U32
            h *= _M_U32
            h ^= k
    base = 4 * blocks
    tail = length & 3
    if tail == 3:
        h ^= matrix[:, base + 2].astype(np.uint32) << np.uint32(16)
    if tail >= 2:
        h ^= matrix[:, base + 1].astype(np.uint32) << np.uint32(8)
    if tail >= 1:
        h ^= matrix[:, base].astype(np.uint32)
        h *= _M_U32
    h ^= h >> np.uint32(13)
    h *= _M_U32
    h ^= h >> np.uint32(15)
    return h


def partitions_for_keys(keys: pa.Array | pa.ChunkedArray, partitions: int | np.ndarray) -> np.ndarray:
    """:func:`partition_for_key` of every key (int32); ``partitions`` is one count or one per key."""
    positive = murmur2_array(keys).astype(np.int64) & 0x7FFFFFFF
    return (positive % np.asarray(partitions, dtype=np.int64)).astype(np.int32)


class KeylessPartitioner:
    """Spreads keyless records the sticky way (KIP-480/KIP-794).

    Keyless records of a topic go to one partition until ``switch_records``
    records or ``switch_bytes`` bytes went there, or the producer sealed a
    batch; then the next partition in turn takes over. A commit therefore
    writes keyless records into few files, and partitions fill evenly over
    time. Thread-safe.
    """

    def __init__(self, switch_records: int = 2**31 - 1, switch_bytes: int = 2**31 - 1) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._switch_records = switch_records
        self._switch_bytes = switch_bytes
        self._current: dict[str, list[int]] = {}  # topic -> [partition, records, bytes]

    def partition(self, topic: str, partitions: int, size: int = 0) -> int:
        with self._lock:
            current = self._run(topic, partitions)
            current[1] += 1
            current[2] += size
            return current[0]

    def sticky_run(self, topic: str, partitions: int, sizes: np.ndarray) -> tuple[int, int]:
        """Place consecutive keyless records of ``topic`` exactly as one :meth:`partition`
        call per record would, up to where the run switches.

        ``sizes`` are the records' sizes in send order (not empty). Returns the
        partition of the first record and how many records from the first on
        go there (at least 1); the rest start a new run in a later call, made
        when they come next in send order, so the counter is drawn in the same
        order as record by record. Linear in ``len(sizes)``.
        """
        if not len(sizes):
            raise ValueError("sticky_run needs at least one record")
        with self._lock:
            current = self._run(topic, partitions)
            # Record j >= 1 joins the run iff the run held fewer than the switch
            # thresholds before it (what partition() checks for that record).
            sizes = np.asarray(sizes, dtype=np.int64)
            records_before = current[1] + np.arange(1, len(sizes), dtype=np.int64)
            bytes_before = current[2] + np.cumsum(sizes)[:-1]
            stays = (records_before < self._switch_records) & (bytes_before < self._switch_bytes)
            count = 1 + (len(stays) if stays.all() else int(np.argmin(stays)))
            current[1] += count
            current[2] += int(sizes[:count].sum())
            return current[0], count

    def _run(self, topic: str, partitions: int) -> list[int]:
        """The topic's current run, or a new one on the next partition in turn if
        it must switch. Under the lock."""
        current = self._current.get(topic)
        if (
            current is None
            or current[0] >= partitions
            or current[1] >= self._switch_records
            or current[2] >= self._switch_bytes
        ):
            current = [next(self._counter) % partitions, 0, 0]
            self._current[topic] = current
        return current

    def next_batch(self) -> None:
        """A batch was sealed: the next keyless record starts a new sticky run."""
        with self._lock:
            self._current.clear()
