"""Produce: Kafka clients' records into the store's topics.

Every write goes through the one commit core: the records of produce
requests arriving together (any connections, any partitions) share one
Delta commit (:mod:`kafka_endpoint.produce_linger`), an idempotent producer's
batches among them, each committed at most once (:mod:`kafka_endpoint.idempotence`); a
transactional producer's records wait for EndTxn
(:mod:`kafka_endpoint.transactions`). The response is sent only after the
Delta commit holding them landed (acks=1 and acks=all mean the same here:
the commit is durable when it lands). Nothing is committed for a refused
partition; Kafka's Produce never creates a topic.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from kio.schema.errors import ErrorCode
from kio.schema.produce.v3.request import ProduceRequest

from lakelog.engine.commit import RetryPolicy
from lakelog.engine.commit.state import TableState
from lakelog.engine.errors import LakelogError
from lakelog.engine.produce.placement import PlacedRecords, place_partition_records
from lakelog.engine.topics import TopicPartition, require_partition
from lakelog.kafka_endpoint import cpu_affinity
from lakelog.kafka_endpoint.error_codes import error_code
from lakelog.kafka_endpoint.idempotence import DuplicateSequenceError, SequenceClaim, app_id
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.produce_linger import Committed, ProduceLinger
from lakelog.kafka_endpoint.record_batches import InvalidRecordBatchError, decode_batches
from lakelog.kafka_endpoint.transactions import TransactionApis
from lakelog.schemas.validation import SchemaValidation
from lakelog.store import Store

log = logging.getLogger(__name__)

PRODUCE = api_key(ProduceRequest)
# Record batches v2 from Produce v3 on.
VERSIONS: dict[int, tuple[int, int]] = {PRODUCE: (3, 9)}

RETRY_POLICY = RetryPolicy(retries=20, backoff_ms=10, backoff_max_ms=200, timeout_ms=30_000)
# Rows read back from a partition's end to find the offsets a duplicate batch got the first time
# (a broker remembers its producers' last five batches; older duplicates are answered as Kafka
# answers them, DUPLICATE_SEQUENCE_NUMBER).
DUPLICATE_WINDOW = 100_000


@dataclass(frozen=True)
class _Done:
    """A partition's records already handed to their transaction (or refused) while the request was read."""

    metadata: Any


@dataclass(frozen=True)
class StartedProduce:
    """A Produce request handed to its commits: ``waits`` are the futures of the commits
    holding its records, ``answer()`` builds its response body (None for acks=0). ``answer``
    blocks until every one of ``waits`` is done, and reads the store back for a batch sent
    twice, so it is called right away only when :meth:`ready` says neither can happen."""

    waits: tuple[Future, ...]
    answer: Callable[[], Any | None]

    def ready(self) -> bool:
        """Every commit ended and none failed: ``answer()`` neither blocks nor reads."""
        return all(f.done() and f.exception() is None for f in self.waits)


def _waits(sent: Any) -> bool:
    return isinstance(sent, Future | _Sequenced)


class ProduceApis:
    """Produce over one store: plain and idempotent batches lingered into shared commits
    (idempotent ones committed at most once), transactional ones handed to their transaction."""

    def __init__(
        self,
        store: Store,
        transactions: TransactionApis,
        linger_ms: float,
        observe: Callable[[float, int, int], None] | None = None,
    ) -> None:
        self.store = store
        self._transactions = transactions
        # On one CPU the group thread yields to the event loop that wakes it.
        pinned = cpu_affinity.on_one_cpu(store.settings.serve)
        self._linger = ProduceLinger(
            store.context.committer("lakelog-serve"),
            RETRY_POLICY,
            linger_ms,
            observe,
            write_thread_start=cpu_affinity.yield_on_wake if pinned else None,
        )
        self._reader = store.context.records
        self._schemas = SchemaValidation(store.context)

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {PRODUCE: self.produce}

    def close(self) -> None:
        self._linger.close()

    def produce(self, request: Request) -> Any | None:
        """The records committed; the answer after every commit holding them landed."""
        return self.start(request).answer()

    def start(self, request: Request) -> StartedProduce:
        """Decode and check the request's records and hand them to the linger (in the order
        requests arrive: a connection's requests commit in its order); returns the commits to
        wait for and what builds the response (None for acks=0). An idempotent producer's
        batches are lingered as plain ones are, their sequences checked in this order."""
        body = request.body
        pending = []
        for topic in body.topic_data:
            for part in topic.partition_data:
                pending.append((topic.name, part.index, self._send(topic.name, part.index, part.records)))
        waits = tuple(sent.future if isinstance(sent, _Sequenced) else sent for _, _, sent in pending if _waits(sent))
        return StartedProduce(waits, lambda: self._response(request, pending))

    def _response(self, request: Request, pending: list[tuple[str, int, Any]]) -> Any | None:
        body = request.body
        results: dict[str, list[dict]] = {}
        for name, index, sent in pending:
            try:
                if isinstance(sent, BaseException):
                    raise sent
                future = sent.metadata if isinstance(sent, _Done) else sent.result()
                base = int(future.offsets[0]) if len(future) else -1
                answer = {"index": index, "error_code": ErrorCode.none, "base_offset": base}
            except DuplicateSequenceError as exc:  # committed before, its offsets no longer known
                answer = {"index": index, "error_code": ErrorCode.duplicate_sequence_number, "base_offset": -1}
                answer["error_message"] = str(exc)
            except Exception as exc:
                if not isinstance(exc, LakelogError | InvalidRecordBatchError):
                    log.exception("produce to %s-%s failed", name, index)
                answer = {"index": index, "error_code": error_code(exc), "base_offset": -1, "error_message": str(exc)}
            # log_append_time stays None (-1 on the wire): records keep their CreateTime.
            answer.update(log_start_offset=-1)
            results.setdefault(name, []).append(answer)
        if body.acks == 0:
            return None
        if all(set(answer) == _SUCCEEDED for parts in results.values() for answer in parts):
            return succeeded_response(
                request.api_version,
                [(n, [(a["index"], a["base_offset"]) for a in parts]) for n, parts in results.items()],
            )
        cls = response_class(PRODUCE, request.api_version)
        responses = [{"name": n, "partition_responses": parts} for n, parts in results.items()]
        return build(cls, responses=responses)

    def _send(self, topic: str, partition: int, records: bytes | None) -> Any:
        try:
            batches = decode_batches(records)
            # The state known, without a look at the log per request, unless it lacks the topic (one
            # created by another agent must be validated from its first record).
            state = self._state_with(topic, partition)
            self._schemas.check(state.topics.get(topic), batches)
            if batches and batches[0].transactional:
                return _Done(self._transactions.send(topic, partition, batches))
            if batches and batches[0].producer_id >= 0:
                return self._send_sequenced(topic, partition, batches, state)
            if not any(len(b) for b in batches):
                raise InvalidRecordBatchError("a produce request without records")
            return self._linger.submit(_placed(state, topic, partition, batches))
        except (LakelogError, InvalidRecordBatchError) as exc:
            return exc

    def _state_with(self, topic: str, partition: int) -> TableState:
        """The state requests are checked and placed against: the one this process knows,
        without a look at the log per request, unless it lacks the partition (a topic created
        or grown by another agent must be seen from its first record). Each commit attempt
        checks the records again against the newest state, so a state that moved on since
        refuses nothing wrongly committed."""
        state = self.store.log.current()
        meta = state.topics.get(topic)
        if meta is None or not 0 <= partition < meta.partitions:
            state = self.store.log.latest()
        return state

    def _send_sequenced(self, topic: str, partition: int, batches: list[Any], state: TableState) -> _Sequenced:
        """An idempotent producer's batches for one partition, handed to the linger to be
        committed at most once (see :mod:`kafka_endpoint.idempotence`); a duplicate gets the
        offsets of its first commit."""
        first = batches[0]
        count = sum(len(b) for b in batches)
        expected = first.base_sequence
        for b in batches:
            if (b.producer_id, b.producer_epoch, b.base_sequence) != (
                first.producer_id,
                first.producer_epoch,
                expected,
            ):
                raise InvalidRecordBatchError("the batches of one partition must continue one producer's sequence")
            expected += len(b)
        meta = require_partition(state.topics, topic, partition)
        placed = _placed(state, topic, partition, batches)
        claim = SequenceClaim(
            app_id(first.producer_id, meta.topic_id, partition),
            first.producer_id,
            first.producer_epoch,
            first.base_sequence,
            count,
        )
        return _Sequenced(self, TopicPartition(topic, partition), claim, self._linger.submit(placed, claim))

    def first_commit_of(self, tp: TopicPartition, producer_id: int, sequence: int) -> int | None:
        """The offset of the record ``producer_id`` sent with ``sequence`` to ``tp``, if it
        is among the partition's last DUPLICATE_WINDOW records."""
        state = self.store.log.latest()
        files = state.files_of(tp)
        bounds = self._reader.bounds(state, tp)
        rows = self._reader.read(files, tp, max(bounds.start, bounds.end - DUPLICATE_WINDOW))
        mine = rows.filter(
            pc.and_(pc.equal(rows.column("producer_id"), producer_id), pc.equal(rows.column("sequence"), sequence))
        )
        return int(mine.column("offset")[0].as_py()) if mine.num_rows else None


# The fields of a partition's answer that succeeded (its error code NONE, no message).
_SUCCEEDED = frozenset({"index", "error_code", "base_offset", "log_start_offset"})


def succeeded_response(version: int, topics: list[tuple[str, list[tuple[int, int]]]]) -> Any:
    """The Produce response of ``version`` in which every partition of ``topics`` -- (name,
    [(index, base offset)]) -- succeeded: what ``build`` makes of the same answers (a test
    compares them), its entities made directly from kio's classes (a third of ``build``'s
    time, which converts every field, on the event loop once per request)."""
    response, topic_cls, partition_cls, defaults = _succeeded_classes(version)
    top, topic_fields, partition_fields = defaults
    return response(
        **{
            **top,
            "responses": tuple(
                topic_cls(
                    **{
                        **topic_fields,
                        "name": name,
                        "partition_responses": tuple(
                            partition_cls(**{**partition_fields, "index": index, "base_offset": base})
                            for index, base in parts
                        ),
                    }
                )
                for name, parts in topics
            ),
        }
    )


@functools.cache
def _succeeded_classes(version: int) -> tuple[type, type, type, tuple[dict, dict, dict]]:
    """A Produce response's kio classes of ``version`` (response, topic, partition) and each
    one's fields as ``build`` fills them for a partition that succeeded."""
    body = build(
        response_class(PRODUCE, version),
        responses=[
            {
                "name": "",
                "partition_responses": [
                    {"index": 0, "error_code": ErrorCode.none, "base_offset": -1, "log_start_offset": -1}
                ],
            }
        ],
    )
    topic = body.responses[0]
    partition = topic.partition_responses[0]

    def fields(entity: Any) -> dict[str, Any]:
        return {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}

    return type(body), type(topic), type(partition), (fields(body), fields(topic), fields(partition))


def _placed(state: TableState, topic: str, partition: int, batches: list[Any]) -> PlacedRecords:
    """The records of a request's batches for one partition, placed (refused here, alone,
    rather than in the group they would join)."""
    if all(b.bare for b in batches):  # the columns as read, no headers to place
        if len(batches) == 1:
            keys, values, stamps = batches[0].key_column, batches[0].value_column, batches[0].timestamp_column
        else:
            keys = pa.concat_arrays([b.key_column for b in batches])
            values = pa.concat_arrays([b.value_column for b in batches])
            stamps = np.concatenate([b.timestamp_column for b in batches])
        return place_partition_records(state, topic, partition, keys, values, None, stamps)
    return place_partition_records(
        state,
        topic,
        partition,
        [k for b in batches for k in b.keys],
        [v for b in batches for v in b.values],
        [h for b in batches for h in b.headers],
        [t for b in batches for t in b.timestamps],
    )


class _Sequenced:
    """An idempotent batch handed to the linger; a duplicate is answered with the offsets
    its first commit got, read back from the partition's rows."""

    def __init__(self, apis: ProduceApis, tp: TopicPartition, claim: SequenceClaim, future: Future) -> None:
        self._apis, self._tp, self._claim, self.future = apis, tp, claim, future

    def result(self) -> Committed:
        try:
            return self.future.result()
        except DuplicateSequenceError:
            claim = self._claim
            start = self._apis.first_commit_of(self._tp, claim.producer_id, claim.base_sequence)
            if start is None:
                raise
            return Committed(np.arange(start, start + claim.count))
