"""What kafka-transactions asks of a store, without a JVM: every transactional id with its
producer id, epoch and state (also once only a checkpoint holds it), and the producers
recently active on a partition with their epoch, last sequence and timestamp."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakelog.engine.admin.producers import active_producers
from lakelog.engine.commit.checkpoints import write_checkpoint
from lakelog.engine.errors import UnknownTopicOrPartitionError
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store
from lakelog.transactions.producer import producer_id_for
from lakelog.transactions.states import describe_transactional_id, list_transactional_ids

TP = TopicPartition("t", 0)


def _committed(store: Store, transactional_id: str, values: list[bytes]) -> None:
    producer = store.transactional_producer(transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    for value in values:
        producer.send("t", value, partition=0)
    producer.commit_transaction()
    producer.close()


def test_transactional_ids_are_listed_with_their_state_epoch_and_producer_id(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=1)
    _committed(store, "billing", [b"a", b"b"])
    _committed(store, "billing", [b"c"])  # a second instance: epoch 1
    idle = store.transactional_producer("idle")
    idle.init_transactions()
    idle.close()
    listed = {s.transactional_id: s for s in list_transactional_ids(store.context)}
    assert sorted(listed) == ["billing", "idle"]
    assert (listed["billing"].state, listed["billing"].epoch, listed["billing"].committed) == ("CompleteCommit", 1, 1)
    assert (listed["idle"].state, listed["idle"].epoch) == ("Empty", 0)
    assert listed["billing"].producer_id == producer_id_for("billing")
    assert describe_transactional_id(store.context, "billing") == listed["billing"]
    assert describe_transactional_id(store.context, "nobody") is None
    # Only the checkpoint holds them once it is written: still listed, by a process of its own too.
    write_checkpoint(store.uri, store.log.latest().version)
    with store.producer(linger_ms=0) as producer:
        producer.send("t", b"after", partition=0).get()
    again = Store.open(tmp_path / "store")
    assert [s.transactional_id for s in list_transactional_ids(again.context)] == ["billing", "idle"]


def test_the_producer_id_of_a_transactional_id_is_the_same_in_every_process() -> None:
    here = producer_id_for("billing")
    there = subprocess.run(
        [sys.executable, "-c", "from lakelog.transactions.producer import producer_id_for as f; print(f('billing'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert int(there) == here and 0 <= here < 1 << 62
    assert producer_id_for("other") != here


def test_active_producers_of_a_partition(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=2)
    with store.producer(linger_ms=0) as producer:
        for i in range(3):
            producer.send("t", f"p{i}".encode(), partition=0, timestamp=1_000 + i).get()
        idempotent_id = producer.producer_id
    _committed(store, "billing", [b"x", b"y"])
    found = {p.producer_id: p for p in active_producers(store.context, TP)}
    assert set(found) == {idempotent_id, producer_id_for("billing")}
    assert found[idempotent_id].last_offset == 2 and found[idempotent_id].last_timestamp_ms == 1_002
    txn = found[producer_id_for("billing")]
    assert (txn.producer_epoch, txn.last_offset) == (0, 4)
    assert active_producers(store.context, TopicPartition("t", 1)) == []
    # Past producer.id.expiration.ms without a record, a producer is no longer active.
    assert active_producers(store.context, TP, now_ms=int(time.time() * 1000) + 86_400_001) == []
    # Records below the log start are gone: so is a producer that wrote only those.
    store.delete_records({TP: 3})
    assert [p.producer_id for p in active_producers(store.context, TP)] == [producer_id_for("billing")]
    with pytest.raises(UnknownTopicOrPartitionError):
        active_producers(store.context, TopicPartition("t", 2))
