"""Fetch, ListOffsets and OffsetForLeaderEpoch: Kafka clients read the store's partitions.

Records are read from the data files with pyarrow
(:class:`engine.commit.partition_reader.PartitionReader`) at the latest Delta version and
re-encoded as one v2 record batch per partition; a Fetch with nothing to return waits up to
its ``max_wait_ms`` for records to land (long polling): woken at once by a commit of this agent
(the shared :class:`engine.commit.TableLog` is told of each), and looking for other processes'
commits with one stat of the next commit file every :data:`NEWEST_POLL_S`; the log's state and
the data files are read again only when a newer version moved one of the asked partitions'
end. Only committed data is ever read, so
read_committed and read_uncommitted see the same and the high watermark is the last stable
offset. ListOffsets answers earliest, latest, a time (files pruned by their timestamp
statistics) and the largest timestamp (KIP-734). Every partition has one leader epoch,
:data:`kafka_endpoint.record_batches.LEADER_EPOCH`, from its first offset on: OffsetForLeaderEpoch
answers a client checking its position for truncation (KIP-320) with that epoch's end, the high
watermark Fetch reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow.compute as pc
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchRequest
from kio.schema.list_offsets.v1.request import ListOffsetsRequest
from kio.schema.offset_for_leader_epoch.v2.request import OffsetForLeaderEpochRequest

from lakelog.engine.arrow_columns import scalar, to_numpy
from lakelog.engine.commit import TableState
from lakelog.engine.records import MAX_TIMESTAMP_MS
from lakelog.engine.topics import TopicPartition
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.record_batches import LEADER_EPOCH, encode_batch
from lakelog.store import Store

FETCH = api_key(FetchRequest)
LIST_OFFSETS = api_key(ListOffsetsRequest)
OFFSET_FOR_LEADER_EPOCH = api_key(OffsetForLeaderEpochRequest)
# Fetch from v4 (record batches v2), stopping before v13 (topic ids); OffsetForLeaderEpoch from
# v2 (the first with current_leader_epoch, which kio has).
VERSIONS: dict[int, tuple[int, int]] = {FETCH: (4, 12), LIST_OFFSETS: (1, 7), OFFSET_FOR_LEADER_EPOCH: (2, 4)}
# Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
UNDEFINED_EPOCH = UNDEFINED_EPOCH_OFFSET = -1

EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# ListOffsets v7+ (KIP-734): the record with the largest timestamp.
MAX_TIMESTAMP = -3
# How often a waiting Fetch looks for a commit of another process (one stat of the next commit
# file; this agent's own commits wake it at once). A Kafka broker answers as soon as a produce
# lands (DelayedFetch.tryComplete); other writers are a file system apart, so their commits
# reach a waiting consumer within this much.
NEWEST_POLL_S = 0.01


class FetchApis:
    """Fetch and ListOffsets over one store."""

    def __init__(self, store: Store, newest_poll_s: float = NEWEST_POLL_S) -> None:
        """``newest_poll_s``: how often a waiting Fetch looks for other processes' commits."""
        self.store = store
        self._reader = store.context.records
        self._newest_poll_s = newest_poll_s

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        """ListOffsets' handler. Fetch waits (long polling) until the agent stops: the endpoint
        calls :meth:`fetch` with its ``stopping``."""
        return {LIST_OFFSETS: self.list_offsets, OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch}

    def fetch(self, request: Request, stopping: Callable[[], bool]) -> Any:
        """Records from each asked offset, re-encoded as one v2 batch per partition; with fewer
        than min_bytes to return, waits up to max_wait_ms for records to land (long polling) and
        answers as soon as they are committed: at once for a commit of this agent, within
        :attr:`newest_poll_s` for another process's. Never answers past max_wait_ms by more
        than the time one read takes, and returns only committed records."""
        body = request.body
        deadline = time.monotonic() + max(0, int(body.max_wait.total_seconds() * 1000)) / 1000
        table_log = self.store.log
        state = table_log.latest()
        responses, total = self._fetch_once(body, state)
        ends = self._ends(body, state)
        while total < max(1, body.min_bytes) and not stopping():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # A commit of this agent wakes the wait; another process's shows as its file.
            if not (
                table_log.wait_past(state.version, min(left, self._newest_poll_s))
                or table_log.has_commit(state.version + 1)
            ):
                continue
            state = table_log.latest()
            now_ends = self._ends(body, state)
            if now_ends != ends:  # only then can the answer differ (a group's offsets commit cannot)
                ends = now_ends
                responses, total = self._fetch_once(body, state)
        cls = response_class(FETCH, request.api_version)
        return build(cls, error_code=ErrorCode.none, session_id=0, responses=responses)

    def _ends(self, body: Any, state: TableState) -> list[tuple[int, int] | None]:
        """The start and end offsets of each asked partition in ``state`` (None: unknown)."""
        out: list[tuple[int, int] | None] = []
        for topic in body.topics:
            meta = state.topics.get(topic.topic)
            for part in topic.partitions:
                if meta is None or not 0 <= part.partition < meta.partitions:
                    out.append(None)
                else:
                    bounds = self._reader.bounds(state, TopicPartition(topic.topic, part.partition))
                    out.append((bounds.start, bounds.end))
        return out

    def _fetch_once(self, body: Any, state: TableState) -> tuple[list[dict], int]:
        budget = body.max_bytes
        responses, total = [], 0
        for topic in body.topics:
            meta = state.topics.get(topic.topic)
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                # An empty record set, never a null one: clients read its size first.
                answer: dict[str, Any] = {
                    "partition_index": part.partition,
                    "aborted_transactions": None,
                    "records": b"",
                }
                if meta is None or not 0 <= part.partition < meta.partitions:
                    answer.update(error_code=ErrorCode.unknown_topic_or_partition, high_watermark=-1)
                    parts.append(answer)
                    continue
                bounds = self._reader.bounds(state, tp)
                answer.update(high_watermark=bounds.end, last_stable_offset=bounds.end, log_start_offset=bounds.start)
                if not bounds.start <= part.fetch_offset <= bounds.end:
                    answer.update(error_code=ErrorCode.offset_out_of_range)
                elif part.fetch_offset == bounds.end or budget <= 0:
                    answer.update(error_code=ErrorCode.none)
                else:
                    limit = min(part.partition_max_bytes, budget)
                    rows = self._reader.read(
                        state.files_of(tp), tp, part.fetch_offset, bounds.end, max_records=_rows_for(limit)
                    )
                    rows = _within_bytes(rows, limit)
                    data = encode_batch(rows)
                    budget -= len(data)
                    total += len(data)
                    answer.update(error_code=ErrorCode.none, records=data)
                parts.append(answer)
            responses.append({"topic": topic.topic, "partitions": parts})
        return responses, total

    def list_offsets(self, request: Request) -> Any:
        state = self.store.log.latest()
        out = []
        for topic in request.body.topics:
            meta = state.topics.get(topic.name)
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                answer: dict[str, Any] = {
                    "partition_index": part.partition_index,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": LEADER_EPOCH,
                }
                if meta is None or not 0 <= part.partition_index < meta.partitions:
                    answer["error_code"] = ErrorCode.unknown_topic_or_partition
                    parts.append(answer)
                    continue
                bounds = self._reader.bounds(state, tp)
                stamp = int(part.timestamp)
                if stamp == EARLIEST_TIMESTAMP:
                    answer["offset"] = bounds.start
                elif stamp == LATEST_TIMESTAMP:
                    answer["offset"] = bounds.end
                elif stamp == MAX_TIMESTAMP:
                    found = self._reader.max_timestamp(state.files_of(tp), tp)
                    if found is not None:
                        answer["offset"], answer["timestamp"] = found
                elif stamp <= MAX_TIMESTAMP_MS:
                    found = self._reader.first_at(state.files_of(tp), tp, stamp)
                    if found is not None:
                        answer["offset"], answer["timestamp"] = found
                # A later time than any record can carry finds none: Kafka answers -1 then too.
                answer["error_code"] = ErrorCode.none
                parts.append(answer)
            out.append({"name": topic.name, "partitions": parts})
        return build(response_class(LIST_OFFSETS, request.api_version), topics=out)

    def offset_for_leader_epoch(self, request: Request) -> Any:
        """Per partition, the end of the asked leader epoch, as Kafka's
        ``LeaderEpochFileCache.endOffsetFor`` answers over a log whose only epoch is
        :data:`LEADER_EPOCH`: that epoch ends at the high watermark Fetch reports; any other
        epoch is unknown (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET). A ``current_leader_epoch``
        newer than it is UNKNOWN_LEADER_EPOCH, an older one FENCED_LEADER_EPOCH (-1: not checked)."""
        state = self.store.log.latest()
        out = []
        for topic in request.body.topics:
            meta = state.topics.get(topic.topic)
            parts = []
            for part in topic.partitions:
                answer: dict[str, Any] = {
                    "partition": part.partition,
                    "error_code": ErrorCode.none,
                    "leader_epoch": UNDEFINED_EPOCH,
                    "end_offset": UNDEFINED_EPOCH_OFFSET,
                }
                current = int(part.current_leader_epoch)
                if meta is None or not 0 <= part.partition < meta.partitions:
                    answer["error_code"] = ErrorCode.unknown_topic_or_partition
                elif current > LEADER_EPOCH:
                    answer["error_code"] = ErrorCode.unknown_leader_epoch
                elif 0 <= current < LEADER_EPOCH:
                    answer["error_code"] = ErrorCode.fenced_leader_epoch
                elif int(part.leader_epoch) == LEADER_EPOCH:
                    bounds = self._reader.bounds(state, TopicPartition(topic.topic, part.partition))
                    answer.update(leader_epoch=LEADER_EPOCH, end_offset=bounds.end)
                parts.append(answer)
            out.append({"topic": topic.topic, "partitions": parts})
        return build(response_class(OFFSET_FOR_LEADER_EPOCH, request.api_version), topics=out)


def _rows_for(max_bytes: int) -> int:
    # Rows to read for a fetch of max_bytes: records of ~100 bytes, at least one.
    return max(1, min(100_000, max_bytes // 64))


def _within_bytes(rows: Any, max_bytes: int) -> Any:
    """The longest prefix of ``rows`` whose keys and values fit ``max_bytes`` (at least one
    row, as Kafka returns a first record larger than the limit so a consumer is never stuck)."""
    if rows.num_rows <= 1:
        return rows
    # Arrow scalars and arrow_columns.to_numpy, not Python values and to_numpy(): pyarrow's own
    # conversions import pandas, seconds on a loaded machine, with every connection waiting.
    key_sizes, value_sizes = pc.binary_length(rows.column("key")), pc.binary_length(rows.column("value"))
    sizes = pc.add(key_sizes.fill_null(scalar(0, key_sizes.type)), value_sizes.fill_null(scalar(0, value_sizes.type)))
    running = to_numpy(pc.cumulative_sum(pc.add(sizes, scalar(20, sizes.type))))
    keep = max(1, int((running <= max_bytes).sum()))
    return rows.slice(0, keep)
