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
            current = self._current.get(topic)
            if (
                current is None
                or current[0] >= partitions
                or current[1] >= self._switch_records
                or current[2] >= self._switch_bytes
            ):
                current = [next(self._counter) % partitions, 0, 0]
                self._current[topic] = current
            current[1] += 1
            current[2] += size
            return current[0]

    def next_batch(self) -> None:
        """A batch was sealed: the next keyless record starts a new sticky run."""
        with self._lock:
            self._current.clear()
