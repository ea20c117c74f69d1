"""Producing: where a record is placed and how it reaches a commit.

* :mod:`engine.produce.producer` -- Kafka's ``send`` / ``send_batch`` / ``flush`` / ``close``;
  a sender thread seals a batch when ``linger.ms`` passed or it is full and commits it whole
  through the commit core (idempotent by a Delta app transaction per batch);
* :mod:`engine.produce.record_queue` -- ``send``'s per-record path, compiled (Cython): the
  open batch's fields, a record's future;
* :mod:`engine.produce.batches` -- the accumulator: a batch of records and their futures, a
  producer batch as one append to the commit core, the per-record checks;
* :mod:`engine.produce.placement` -- placing records in partitions exactly as Kafka's default
  partitioner does, column-wise for a batch (``send``'s queued records when the sender takes
  them, ``send_batch``, the Spark sink, ``lakelog serve``) and one record at a time
  (transactions);
* :mod:`engine.produce.partitioner` -- murmur2 of the key, sticky keyless partitioning.

A transactional producer is in :mod:`lakelog.transactions`; it uses these.
"""

from __future__ import annotations

from lakelog.engine.produce.batches import BatchFuture
from lakelog.engine.produce.producer import Producer
from lakelog.engine.produce.record_queue import RecordFuture

__all__ = ["BatchFuture", "Producer", "RecordFuture"]
