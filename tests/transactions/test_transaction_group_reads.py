"""What a transactional producer's commit reads of its consumer group (no JVM): the group's
records since its previous commit, not the group's whole ``__consumer_offsets`` partition
again. Kafka Streams' exactly_once_v2 commits a transaction with offsets every 100 ms, so a
commit that re-read the partition from offset 0 grew slower with every commit."""

from __future__ import annotations

from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.topics import OFFSETS_TOPIC


def test_each_commit_with_offsets_reads_the_group_from_where_the_last_one_stopped(plain_store, monkeypatch):
    plain_store.create_topic("in", partitions=1)
    plain_store.create_topic("out", partitions=1)
    producer = plain_store.transactional_producer("tx")
    producer.init_transactions()
    reads: list[int] = []
    read = PartitionReader.read

    def noted(reader, files, tp, start, *args, **kwargs):
        if tp.topic == OFFSETS_TOPIC:
            reads.append(start)
        return read(reader, files, tp, start, *args, **kwargs)

    monkeypatch.setattr(PartitionReader, "read", noted)
    for i in range(5):
        producer.begin_transaction()
        producer.send("out", f"v{i}", partition=0)
        producer.send_offsets_to_transaction({("in", 0): i + 1}, "streams-app")
        producer.commit_transaction()
    # Each commit's check reads the group's partition once, the records the commits before it
    # added (one offset record each): the first finds none to read, the second reads from 0.
    assert reads == [0, 1, 2, 3]
    monkeypatch.undo()
    with plain_store.consumer("streams-app") as consumer:
        assert consumer.committed([("in", 0)])[("in", 0)].offset == 5
