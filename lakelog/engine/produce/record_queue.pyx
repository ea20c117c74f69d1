# cython: language_level=3
"""The producer's per-record path, compiled (Cython): ``send`` queues one record.

``send`` is the one call a producer makes per record, so its cost is the producer's: here it
reads the producer's state, the open batch's fields and a record's future as C fields, not
as Python attributes, and stamps records from the C clock (uncontended, 1.1 us a record in
Python, 0.5 us here, the benchmark's own loop included). What it does per record is in
:mod:`engine.produce.producer`'s docstring; the sender thread and everything per batch are there.
import-linter reads no ``.pyx``: this module imports only ``engine.errors`` and ``engine.records``,
below ``engine.produce``.
"""

import time

from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from lakelog.engine.errors import DeliveryTimeoutError, ProducerClosedError, UnknownTopicOrPartitionError
from lakelog.engine.records import record_size, to_bytes, to_headers, to_timestamp_ms

_yield_gil = time.sleep  # sleep(0) gives up the GIL; a waiting thread takes it
# send() yields the GIL to a committing sender once every this many records of a batch.
YIELD_EVERY = 1024
cdef Py_ssize_t _yield_every = YIELD_EVERY
# Fields of one queued record in QueuedRecords.fields, in order.
FIELDS = ("topic", "partition", "key", "value", "timestamp_ms", "size")
cdef Py_ssize_t _WIDTH = len(FIELDS)


cdef class QueuedRecords:
    """What ``send`` appends to: a batch's records as one flat list of their fields, their
    headers by index, and their bytes (see :class:`batches.RecordBatch`)."""

    cdef public list fields
    cdef public dict headers_at
    cdef public long long bytes
    cdef public double created

    def __init__(self):
        self.created = time.monotonic()
        self.fields = []
        self.headers_at = {}
        self.bytes = 0

    def __len__(self):
        return len(self.fields) // _WIDTH


cdef class RecordFuture:
    """The eventual :class:`RecordMetadata` of one sent record."""

    cdef object _batch
    cdef Py_ssize_t _index
    cdef object _error

    def __init__(self, batch=None, Py_ssize_t index=-1, error=None):
        self._batch = batch
        self._index = index
        self._error = error

    def get(self, timeout=None):
        """Block until the record is committed; raise its error if it failed.

        ``timeout`` in seconds; DeliveryTimeoutError when it passes first
        (the record may still be committed later).
        """
        error = self._wait(timeout)
        if error is not None:
            raise error
        return self._batch.metadata(self._index)

    def _wait(self, timeout):
        if self._error is not None:
            return self._error
        if not self._batch.wait(timeout):
            raise DeliveryTimeoutError(f"record not acknowledged within {timeout} s")
        return self._batch.error_of(self._index)

    def done(self):
        return self._error is not None or (self._batch is not None and self._batch.done)

    def succeeded(self):
        return self.done() and self.exception() is None

    def failed(self):
        return self.done() and self.exception() is not None

    def exception(self):
        """The record's error once it is done (None while pending or after success)."""
        if self._error is not None:
            return self._error
        if self._batch is None or not self._batch.done:
            return None
        return self._batch.error_of(self._index)

    def add_callback(self, fn):
        """Call ``fn(metadata)`` when the record is committed (at once if it already is)."""
        if self._error is None and self._batch is not None:
            self._batch.on_done(self._index, fn, None)
        return self

    def add_errback(self, fn):
        """Call ``fn(error)`` if the record fails (at once if it already did)."""
        if self._error is not None:
            fn(self._error)
        elif self._batch is not None:
            self._batch.on_done(self._index, None, fn)
        return self


cdef RecordFuture _future_of(object batch, Py_ssize_t index):
    # Without __init__'s argument parsing: a future per record is most of what send() allocates.
    cdef RecordFuture future = RecordFuture.__new__(RecordFuture)
    future._batch = batch
    future._index = index
    return future


cdef inline long long _now_ms():
    # The wall clock in whole ms, as Kafka's clients stamp CreateTime (time.time() and a
    # float multiply cost more, and left a float to truncate per batch).
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef object _partition_argument(object partition):
    """``send``'s ``partition`` that is not exactly an int: an int subclass as its int value
    (bool refused, as a partition number it is a mistake); else UnknownTopicOrPartitionError."""
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise UnknownTopicOrPartitionError(f"partition must be an int, got {partition!r}")
    return int(partition)


cdef class SendPath:
    """The producer state ``send`` reads and writes, as C fields its Python code shares:
    the lock and condition, the open batch (None: none), the batch committing (None: none),
    the cached topics, the bytes queued, and the limits that seal a batch or block ``send``."""

    cdef public bint _closing
    cdef object _lock_object
    cdef object _acquire
    cdef object _release
    cdef public object _cond
    cdef public QueuedRecords _open
    cdef public object _in_flight
    cdef public dict _topics
    cdef public long long _buffered_bytes
    cdef public long long _buffer_memory
    cdef public long long _batch_size
    cdef public Py_ssize_t _batch_last_index

    @property
    def _lock(self):
        """The producer's lock (its condition's): what send() holds while it queues a record."""
        return self._lock_object

    @_lock.setter
    def _lock(self, lock):
        # Its bound methods kept with it: looking them up per record cost send() more than the lock.
        self._lock_object, self._acquire, self._release = lock, lock.acquire, lock.release

    def send(self, topic, value=None, key=None, partition=None, headers=None, timestamp=None):
        """Queue a record; the future completes when its commit lands.

        Raises ProducerClosedError after close(), InvalidRecordError for
        arguments of the wrong type (and a timestamp outside what the table
        holds), UnknownTopicOrPartitionError for a partition that is not an
        int. A topic that does not exist is created first when the store's
        ``auto.create.topics.enable`` is true (Kafka's broker setting:
        ``num.partitions`` and the ``topic.*`` settings); otherwise it fails the
        returned future with UnknownTopicOrPartitionError, as do unknown
        partitions, records over ``max.message.bytes`` and a topic that cannot
        be created (InvalidTopicError). A record without a partition gets its
        key's partition (Kafka's murmur2) or a sticky keyless one when its batch
        leaves the queue, from the producer's metadata then; its future fails
        alone with UnknownTopicOrPartitionError if its topic was deleted
        meanwhile. Within ``delivery.timeout.ms`` of this call the future
        completes or fails: a record still queued then fails with
        DeliveryTimeoutError and is never committed; one whose commit is under
        way learns that commit's outcome (DeliveryTimeoutError when its retries
        ran out, CommitStateUnknownError when it may have landed).
        """
        cdef long long size
        cdef Py_ssize_t index
        cdef QueuedRecords batch
        if self._closing:
            raise ProducerClosedError("cannot send: the producer is closed")
        if partition is not None and type(partition) is not int:
            partition = _partition_argument(partition)
        if value is not None and type(value) is not bytes:
            value = to_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = to_bytes(key, "key")
        size = (0 if value is None else len(<bytes>value)) + (0 if key is None else len(<bytes>key))
        if headers is not None:
            headers = to_headers(headers)
            size = record_size(key, value, headers)
        timestamp_ms = _now_ms() if timestamp is None else to_timestamp_ms(timestamp)
        meta = self._topics.get(topic)
        if (
            meta is None
            or size > meta.max_message_bytes
            or (partition is not None and not 0 <= partition < meta.partitions)
        ):
            refused = self._refusal(topic, partition, size)
            if refused is not None:
                return RecordFuture(error=refused)
        self._acquire()
        try:
            if self._buffered_bytes + size > self._buffer_memory:  # else it fits: no wait to set up
                full = self._wait_for_buffer(size)
                if full is not None:
                    return RecordFuture(error=full)
            if self._open is None:
                self._open = self._new_batch()
                self._cond.notify_all()  # the sender starts the linger clock
            batch = self._open
            index = len(batch.fields) // _WIDTH
            batch.fields.extend((topic, partition, key, value, timestamp_ms, size))
            if headers is not None:
                batch.headers_at[index] = headers
            batch.bytes += size
            self._buffered_bytes += size
            if batch.bytes >= self._batch_size or index >= self._batch_last_index:
                self._seal()
        finally:
            self._release()
        if index % _yield_every == 0 and self._in_flight is not None:
            # The sender is committing a batch: let it take the GIL now rather than after the
            # interpreter's switch interval (5 ms), which it waits again after each of its
            # many GIL-free calls (Parquet encoding, writes, fsyncs) while a loop of send()
            # never gives the GIL up on its own. 200,000 records in a loop: 445k -> 519k rec/s
            # (measured on the Python send; compiled, every 256, 1,024 or 4,096 records did the
            # same: 647k, 660k, 643k).
            _yield_gil(0)
        return _future_of(batch, index)
