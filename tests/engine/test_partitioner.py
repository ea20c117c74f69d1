from __future__ import annotations

from unittest import mock

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.engine.produce import partitioner
from lakelog.engine.produce.partitioner import (
    KeylessPartitioner,
    murmur2,
    murmur2_array,
    partition_for_key,
    partitions_for_keys,
)

# Kafka's own vectors: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java (testMurmur2).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_matches_kafka_java_client():
    for key, expected in KAFKA_VECTORS.items():
        assert murmur2(key) == expected, key


def test_partition_is_positive_hash_modulo_count():
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16
    assert partition_for_key(b"foobar", 50) == 16
    assert partition_for_key(b"foobar", 1) == 0


def test_keyless_records_stick_to_a_partition_until_the_batch_switches():
    partitioner = KeylessPartitioner()
    first = {partitioner.partition("t", 4) for _ in range(10)}
    assert len(first) == 1
    seen = set(first)
    for _ in range(8):
        partitioner.next_batch()
        seen.add(partitioner.partition("t", 4))
    assert seen == {0, 1, 2, 3}


def test_keyless_runs_switch_after_a_number_of_records_or_bytes():
    by_count = KeylessPartitioner(switch_records=3)
    assert len({by_count.partition("t", 4) for _ in range(3)}) == 1
    assert len({by_count.partition("t", 4) for _ in range(12)}) == 4
    by_size = KeylessPartitioner(switch_bytes=100)
    first = by_size.partition("t", 4, 60)
    assert by_size.partition("t", 4, 60) == first
    assert by_size.partition("t", 4, 60) != first


def test_keyless_partition_is_recomputed_when_the_topic_shrinks_in_view():
    partitioner = KeylessPartitioner()
    for _ in range(3):
        partitioner.next_batch()
        partitioner.partition("t", 8)
    assert 0 <= partitioner.partition("t", 2) < 2


@settings(max_examples=300)
@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60),
    cut=st.tuples(st.integers(0, 60), st.integers(0, 60)),
    large=st.booleans(),
)
def test_vectorized_murmur2_matches_the_scalar_one(keys, cut, large):
    array = pa.array(keys, pa.large_binary() if large else pa.binary())
    start, length = min(cut[0], len(keys)), cut[1]
    sliced = array.slice(start, length)  # a slice starts inside the offsets buffer
    expected = [murmur2(k or b"") for k in keys[start : start + length]]
    hashes = murmur2_array(sliced)
    assert hashes.dtype == np.int32
    assert hashes.tolist() == expected


def test_vectorized_murmur2_matches_kafka_java_client():
    keys = list(KAFKA_VECTORS)
    assert murmur2_array(pa.array(keys, pa.binary())).tolist() == list(KAFKA_VECTORS.values())
    chunked = pa.chunked_array([pa.array(keys[:2], pa.binary()), pa.array(keys[2:], pa.binary())])
    assert murmur2_array(chunked).tolist() == list(KAFKA_VECTORS.values())


def test_vectorized_partitions_take_one_count_or_one_per_key():
    keys = pa.array([b"foobar", b"foobar", b"abc"], pa.binary())
    assert partitions_for_keys(keys, 50).tolist() == [16, 16, partition_for_key(b"abc", 50)]
    assert partitions_for_keys(keys, np.array([50, 1, 7])).tolist() == [16, 0, partition_for_key(b"abc", 7)]


@settings(max_examples=200)
@given(
    sizes=st.lists(st.integers(0, 50), min_size=1, max_size=40),
    switch_records=st.integers(1, 8),
    switch_bytes=st.integers(1, 120),
    warm=st.integers(0, 5),
    partitions=st.integers(1, 4),
)
def test_a_sticky_run_places_records_as_one_call_per_record(sizes, switch_records, switch_bytes, warm, partitions):
    one_by_one = KeylessPartitioner(switch_records, switch_bytes)
    in_runs = KeylessPartitioner(switch_records, switch_bytes)
    for _ in range(warm):  # the run may already be under way, or due to switch
        one_by_one.partition("t", partitions, 7)
        in_runs.partition("t", partitions, 7)
    expected = [one_by_one.partition("t", partitions, size) for size in sizes]
    placed: list[int] = []
    while len(placed) < len(sizes):
        partition, count = in_runs.sticky_run("t", partitions, np.array(sizes[len(placed) :]))
        assert count >= 1
        placed += [partition] * count
    assert placed == expected
    # Both partitioners are left in the same state.
    assert in_runs.partition("t", partitions, 1) == one_by_one.partition("t", partitions, 1)


def test_long_keys_are_hashed_in_bounded_slices():
    keys = [bytes([i % 251]) * (i % 97) for i in range(500)]
    with mock.patch.object(partitioner, "_MATRIX_BYTES", 64):  # slices of a few rows
        assert murmur2_array(pa.array(keys, pa.binary())).tolist() == [murmur2(k) for k in keys]
