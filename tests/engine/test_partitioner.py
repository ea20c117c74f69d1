from __future__ import annotations

from engine.partitioner import KeylessPartitioner, murmur2, partition_for_key

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
