"""The consumer: Kafka's poll loop over a lakelog store, with consumer groups.

Records are read straight from the partitions' Parquet files with pyarrow
(:mod:`engine.commit.partition_reader`): no Spark job per poll. Only committed
Delta versions are ever read, so every consumer is ``read_committed``
(aborted or open transactions are never in the table at all).

Guarantees:

* ``poll`` returns each assigned partition's records in offset order, and
  never skips a record between two polls unless ``seek`` moved the position;
* ``commit`` stores "the next offset to read" per partition, as Kafka does,
  in ``__consumer_offsets`` (one Delta commit); a member whose generation is
  stale gets CommitFailedError and nothing is committed;
* with a ``group.id`` and ``subscribe``, members of the group in any
  process share the subscribed partitions, Kafka's way
  (Kafka's classic group protocol, :mod:`engine.groups.classic`, shared with
  Kafka's clients through ``lakelog serve``): the leader assigns, eager members
  revoke everything before they join again and cooperative-sticky ones what
  moves (KIP-429), so a partition changes hands only after its previous owner's
  ``on_partitions_revoked`` ran and its position was committed, or after that
  owner was removed -- and ``poll`` never returns records of a partition the
  member does not own;
* a member that stops renewing its lease for ``session.timeout.ms`` is
  removed by another member; one that does not poll for
  ``max.poll.interval.ms`` leaves the group itself; a member that finds
  itself removed calls ``on_partitions_lost`` and reads none of them again.

The member side of the group protocol is the consumer's
:class:`engine.consume.group_client.GroupClient` (``group_client``): heartbeats renew a
lease object outside the Delta log (:mod:`engine.groups.leases`) from a background
thread; only joins, syncs,
leaves and offset commits are Delta commits. Rebalance callbacks run in the
thread that calls ``poll``, as in Kafka. While the member's group is forming or
rebalancing, a waiting ``poll`` looks at the log every few milliseconds rather
than every ``fetch.max.wait.ms``: Kafka's JoinGroup and SyncGroup answer as
soon as the rebalance completes, and so does lakelog's.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.engine.arrow_columns import empty_table, scalar
from lakelog.engine.client_config import CONSUMER_CONFIG_KEYS
from lakelog.engine.commit import RetryPolicy, TableState
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.config import resolve_config
from lakelog.engine.context import StoreContext
from lakelog.engine.errors import (
    CommitFailedError,
    DataLossError,
    IllegalStateError,
    InvalidConfigError,
    LakelogError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.groups.offsets_topic import OffsetAndMetadata, check_group_id, check_offset, current_offsets
from lakelog.engine.offsets import PartitionBounds
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.topics import TopicPartition

if TYPE_CHECKING:
    from lakelog.engine.consume.group_client import GroupClient

# The group side (group_client, the group coordinator, the protocol's wire format) is imported
# by a consumer that has a group.id, when it needs it: a consumer without one (``lakelog
# consume`` without --group, assign() and seek) starts a tenth of a second sooner without it.

log = logging.getLogger(__name__)


class ConsumerRecord(NamedTuple):
    """One record as ``poll`` returns it: a tuple of these fields, as Kafka's ConsumerRecord has
    them (``timestamp`` in milliseconds since the epoch, an int as Java's ``timestamp()``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # ms
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None


# tuple.__new__ straight from each row's values: a NamedTuple's own __new__ is a Python
# function that costs more than the rest of building the record.
_new_record = partial(tuple.__new__, ConsumerRecord)
# An Arrow scalar, not the int: pyarrow turns a Python int argument into a scalar through
# pa.scalar, which imports pandas (engine.arrow_columns).
_MICROS_PER_MS = scalar(1000, pa.int64())


def records_of(table: pa.Table) -> list[ConsumerRecord]:
    """The rows of a table with the log table's columns as ConsumerRecords, column by column:
    timestamps become int milliseconds in Arrow (never a ``datetime`` per record), and headers
    are turned into (key, value) pairs only where a record has them."""
    if not table.num_rows:
        return []
    headers = table.column("headers")
    if headers.null_count == len(headers):
        header_lists: Iterable[Any] = repeat(None, len(headers))
    else:
        header_lists = [None if h is None else [(p["key"], p["value"]) for p in h] for h in headers.to_pylist()]
    return list(
        map(
            _new_record,
            zip(
                table.column("topic").to_pylist(),
                table.column("partition").to_pylist(),
                table.column("offset").to_pylist(),
                # The column holds microseconds (UTC); Kafka's timestamps are whole milliseconds.
                pc.divide(table.column("timestamp").cast(pa.int64()), _MICROS_PER_MS).to_pylist(),
                table.column("timestamp_type").to_pylist(),
                table.column("key").to_pylist(),
                table.column("value").to_pylist(),
                header_lists,
                strict=True,
            ),
        )
    )


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What a transaction needs to commit offsets for a group member (Kafka's KIP-447)."""

    group_id: str
    generation: int = -1
    member_id: str | None = None
    group_instance_id: str | None = None  # a static member's (KIP-345): fenced by a newer instance


class ConsumerRebalanceListener(Protocol):
    """Kafka's ConsumerRebalanceListener. ``on_partitions_lost`` is optional: without it,
    ``on_partitions_revoked`` is called for lost partitions too (Kafka's default)."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None: ...


def _as_tp(value: Any) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int):
        return TopicPartition(value[0], value[1])
    raise UnknownTopicOrPartitionError(f"expected (topic, partition), got {value!r}")


class Consumer:
    """Reads topics of a store. Not thread-safe (as Kafka's KafkaConsumer); use from one thread."""

    def __init__(self, context: StoreContext, config: Mapping[str, Any]) -> None:
        self._config = resolve_config(CONSUMER_CONFIG_KEYS, config, what="consumer config")
        cfg = self._config
        if cfg["heartbeat.interval.ms"] >= cfg["session.timeout.ms"]:
            raise InvalidConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self._context = context
        self.group_id: str | None = check_group_id(cfg["group.id"]) if cfg["group.id"] else None
        self.client_id = cfg["client.id"] or f"consumer-{uuid.uuid4().hex[:8]}"
        self._records = PartitionReader(context.uri)
        self._policy = RetryPolicy(
            retries=cfg["retries"], backoff_ms=20, backoff_max_ms=500, timeout_ms=cfg["default.api.timeout.ms"]
        )
        # Assignment and positions (consumer thread only).
        self._positions: dict[TopicPartition, int | None] = {}
        self._buffers: dict[TopicPartition, pa.Table] = {}
        self._subscription: list[str] | re.Pattern[str] | None = None
        self._manual = False
        self._listener: ConsumerRebalanceListener | None = None
        self._next_auto_commit = time.monotonic() + cfg["auto.commit.interval.ms"] / 1000
        self._rr = 0
        self._closed = False
        # The member side of the group protocol (a consumer without a group.id has none).
        self.group_client: GroupClient | None = None
        if self.group_id is not None:
            from lakelog.engine.consume.group_client import GroupClient  # a group's only: see the imports

            self.group_client = GroupClient(
                context, self.group_id, self.client_id, cfg, self._policy, self._records, _MemberSide(self)
            )

    # -- assignment -------------------------------------------------------------

    def subscribe(self, topics: Any, listener: ConsumerRebalanceListener | None = None) -> None:
        """Subscribe to topic names or a ``re.Pattern`` (Kafka's subscribe / subscribePattern).

        Partitions are assigned by the group at the next ``poll``. Requires
        ``group.id``; replaces any earlier subscription. A named topic that
        does not exist is created when both ``allow.auto.create.topics`` and the
        store's ``auto.create.topics.enable`` are true (Kafka's consumer asks the
        broker for its metadata, which creates it); otherwise the member gets its
        partitions once it exists. Raises InvalidTopicError for a missing topic
        whose name cannot be created.
        """
        self._check_open()
        if self.group_id is None:
            raise InvalidConfigError("subscribe() needs a group.id; use assign() without one")
        if self._manual:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        if isinstance(topics, str):
            topics = [topics]
        if not isinstance(topics, re.Pattern):
            topics = list(topics)
            if not topics or not all(isinstance(t, str) and t for t in topics):
                raise UnknownTopicOrPartitionError(f"subscribe() needs topic names or a pattern, got {topics!r}")
            self._auto_create(topics)
        self._subscription = topics
        assert self.group_client is not None  # a group.id was checked above
        self.group_client.rejoin()
        self._listener = listener
        # A member whose subscription changed rejoins at its next poll (a rebalance).

    def assign(self, partitions: Iterable[Any]) -> None:
        """Take exactly these partitions, outside any group rebalancing (Kafka's assign).

        A topic that does not exist is created first (``num.partitions``) when both
        ``allow.auto.create.topics`` and the store's ``auto.create.topics.enable`` are
        true. Raises UnknownTopicOrPartitionError for a partition that does not exist
        then, InvalidTopicError for a missing topic whose name cannot be created.
        """
        self._check_open()
        if self._subscription is not None:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        tps = [_as_tp(p) for p in partitions]
        self._auto_create([tp.topic for tp in tps])
        topics = self._context.latest_topics()
        for tp in tps:
            meta = topics.get(tp.topic)
            if meta is None or not 0 <= tp.partition < meta.partitions:
                raise UnknownTopicOrPartitionError(f"partition {tp} does not exist")
        self._manual = True
        self._set_assignment(set(tps))

    def partitions_for_topic(self, topic: str) -> list[int]:
        """The partition ids of ``topic`` (Kafka's ``partitionsFor``), created first when it does
        not exist and both ``allow.auto.create.topics`` and the store's
        ``auto.create.topics.enable`` are true, as Kafka's metadata request creates it. Raises
        UnknownTopicOrPartitionError if it does not exist (and was not created),
        InvalidTopicError for a name that cannot be created."""
        self._check_open()
        self._auto_create([topic])
        meta = self._context.latest_topics().get(topic)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return list(range(meta.partitions))

    def _auto_create(self, names: list[str]) -> None:
        """Create the missing topics of ``names`` if this consumer and the store allow it."""
        if self._config["allow.auto.create.topics"]:
            self._context.auto_create_topics(names)

    def unsubscribe(self) -> None:
        """Drop the subscription or manual assignment (leaving the group)."""
        if self.group_client is not None:
            self.group_client.leave()
            self.group_client.rejoin()
        self._subscription = None
        self._manual = False
        self._set_assignment(set())

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def subscription(self) -> list[str] | re.Pattern[str] | None:
        return self._subscription

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The member's group, generation and member id, for ``send_offsets_to_transaction``."""
        if self.group_id is None or self.group_client is None:
            raise InvalidConfigError("group_metadata() needs a group.id")
        generation, member_id = self.group_client.metadata()
        return ConsumerGroupMetadata(self.group_id, generation, member_id, self._config["group.instance.id"] or None)

    def _set_assignment(self, tps: set[TopicPartition]) -> None:
        for tp in list(self._positions):
            if tp not in tps:
                del self._positions[tp]
                self._buffers.pop(tp, None)
        for tp in tps:
            self._positions.setdefault(tp, None)

    # -- positions --------------------------------------------------------------

    def position(self, partition: Any) -> int:
        """The offset of the next record ``poll`` returns for the partition."""
        tp = self._assigned(partition)
        if self._positions[tp] is None:
            self._init_positions(self._context.log.latest())
        return int(self._positions[tp])  # type: ignore[arg-type]

    def seek(self, partition: Any, offset: int) -> None:
        """Make the next poll of ``partition`` start at ``offset``."""
        tp = self._assigned(partition)
        self._positions[tp] = check_offset(offset, f"seek offset for {tp}")
        self._buffers.pop(tp, None)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        bounds = self._bounds(self._context.log.latest())
        for tp in self._targets(partitions):
            self.seek(tp, bounds.get(tp, PartitionBounds(0, 0)).start)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        bounds = self._bounds(self._context.log.latest())
        for tp in self._targets(partitions):
            self.seek(tp, bounds.get(tp, PartitionBounds(0, 0)).end)

    def _targets(self, partitions: Iterable[Any] | None) -> list[TopicPartition]:
        return sorted(self._positions) if partitions is None else [self._assigned(p) for p in partitions]

    def _assigned(self, partition: Any) -> TopicPartition:
        tp = _as_tp(partition)
        if tp not in self._positions:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return tp

    def _bounds(self, state: TableState) -> dict[TopicPartition, PartitionBounds]:
        return {tp: self._context.records.bounds(state, tp) for tp in self._positions}

    def _init_positions(self, snapshot: TableState) -> None:
        """Positions from committed offsets, else auto.offset.reset; also after data loss."""
        missing = [tp for tp, pos in self._positions.items() if pos is None]
        bounds = self._bounds(snapshot)
        committed = self._committed_offsets(missing) if missing and self.group_id else {}
        policy = self._config["auto.offset.reset"]
        for tp, pos in list(self._positions.items()):
            b = bounds.get(tp, PartitionBounds(0, 0))
            if pos is None and tp in committed:
                pos = committed[tp].offset
            if pos is not None and b.start <= pos <= b.end:
                self._positions[tp] = pos
                continue
            if policy == "none":
                if pos is None:
                    raise NoOffsetForPartitionError(
                        f"no committed offset for {tp} in group {self.group_id!r} and auto.offset.reset=none"
                    )
                raise OffsetOutOfRangeError(
                    f"position {pos} of {tp} is outside its log [{b.start}, {b.end}) and auto.offset.reset=none"
                )
            self._positions[tp] = b.start if policy == "earliest" else b.end
            self._buffers.pop(tp, None)

    # -- polling ----------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records after the current positions, each partition's in offset order.

        Waits up to ``timeout_ms`` for records when none are there. Also runs
        the group protocol (join, rebalance) and auto-commit.
        """
        return records_of(self.poll_arrow(timeout_ms, max_records))

    def poll_arrow(self, timeout_ms: int = 0, max_records: int | None = None) -> pa.Table:
        """Like ``poll``, as one Arrow table (the log table's columns) for bulk work."""
        self._check_open()
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise InvalidConfigError(f"timeout_ms must be a non-negative int, got {timeout_ms!r}")
        limit = max_records or self._config["max.poll.records"]
        deadline = time.monotonic() + timeout_ms / 1000
        if self.group_client is not None:
            self.group_client.polled()
        while True:
            if self.group_client is not None:
                self.group_client.run_protocol()
            self._maybe_auto_commit()
            table = self._take(limit)
            if table.num_rows or time.monotonic() >= deadline:
                return table
            pause = self._config["fetch.max.wait.ms"] / 1000
            if self.group_client is not None and self.group_client.rebalancing and self._subscription is not None:
                from lakelog.engine.consume.group_client import REBALANCE_LOOK_S  # imported with GroupClient

                pause = min(pause, REBALANCE_LOOK_S)
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))

    def _take(self, limit: int) -> pa.Table:
        if not self._positions:
            return _empty()
        snapshot = None
        tps = sorted(self._positions)
        parts = []
        left = limit
        # Round-robin over partitions across polls, so none is starved.
        start = self._rr % len(tps)
        self._rr += 1
        for tp in tps[start:] + tps[:start]:
            if left <= 0:
                break
            buffer = self._buffers.get(tp)
            if buffer is None or buffer.num_rows == 0:
                if snapshot is None:
                    snapshot = self._context.log.latest()
                    self._init_positions(snapshot)
                try:
                    buffer = self._read(snapshot, tp)
                except DataLossError:
                    # Maintenance may have rewritten the files and VACUUM deleted them since
                    # this state was read: the records are in the newer files, if anywhere.
                    snapshot = self._context.log.latest()
                    buffer = self._read(snapshot, tp)
                self._buffers[tp] = buffer
            if not buffer.num_rows:
                continue
            taken = buffer.slice(0, left)
            self._buffers[tp] = buffer.slice(taken.num_rows)
            parts.append(taken)
            left -= taken.num_rows
            self._positions[tp] = int(taken.column("offset")[-1].as_py()) + 1
        return pa.concat_tables(parts) if parts else _empty()

    def _read(self, snapshot: TableState, tp: TopicPartition) -> pa.Table:
        # Up to the last stable offset: records a pending reservation holds back are not read yet.
        return self._records.read(
            snapshot.files_of(tp),
            tp,
            self._positions[tp],
            snapshot.stable_end(tp),
            max_records=self._config["fetch.min.records"],
        )

    # -- committing -------------------------------------------------------------

    def commit(self, offsets: Mapping[Any, Any] | None = None) -> None:
        """Commit offsets for the group (synchronously; Kafka's commitSync).

        ``offsets`` maps (topic, partition) to the next offset to read (an int
        or OffsetAndMetadata); by default the current positions. Raises
        RebalanceInProgressError when the group's generation moved on while this
        member takes part in the rebalance (as Java's commitSync: poll, which
        completes it, then commit again), CommitFailedError when this member is not in the group's current
        generation (UnknownMemberIdError: not in the group at all), and nothing is
        committed then; CommitConflictError when retries ran out.
        """
        self._check_open()
        if self.group_id is None:
            raise InvalidConfigError("commit() needs a group.id")
        if offsets is None:
            chosen = {tp: OffsetAndMetadata(pos) for tp, pos in self._positions.items() if pos is not None}
        else:
            chosen = {}
            for key, value in offsets.items():
                tp = _as_tp(key)
                om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                check_offset(om.offset, f"offset to commit for {tp}")
                chosen[tp] = om
        if not chosen:
            return
        assert self.group_client is not None  # a group.id was checked above
        generation, member_id = self.group_client.commit_metadata()
        if self._subscription is not None and member_id is None:
            raise CommitFailedError("this consumer has not joined its group yet (poll first); nothing was committed")
        group = self.group_client
        from lakelog.engine.groups.coordinator import commit_offsets  # a group's only: see the imports

        try:
            commit_offsets(group.writer(), group.group_log(), chosen, generation, member_id, self._policy)
        except CommitFailedError as exc:
            if self._subscription is None or not group.rebalancing or isinstance(exc, UnknownMemberIdError):
                raise
            # The group moved on to the generation this member is joining (Java's consumer says so).
            raise RebalanceInProgressError(
                f"group {self.group_id!r} is rebalancing and this member takes part: poll() to complete the "
                f"rebalance, then commit again ({exc})"
            ) from exc

    def committed(self, partitions: Iterable[Any]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's last committed offset per partition (None where there is none)."""
        if self.group_id is None:
            raise InvalidConfigError("committed() needs a group.id")
        tps = [_as_tp(p) for p in partitions]
        found = self._committed_offsets(tps)
        return {tp: found.get(tp) for tp in tps}

    def _committed_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        if self.group_client is None or not self._context.has_offsets_topic():
            return {}
        ids = {name: t.topic_id for name, t in self._context.log.latest().topics.items()}
        offsets = current_offsets(self.group_client.group_log().latest().offsets, ids)
        return {tp: offsets[tp] for tp in tps if tp in offsets}

    def _maybe_auto_commit(self) -> None:
        if not (self._config["enable.auto.commit"] and self.group_id) or time.monotonic() < self._next_auto_commit:
            return
        if self._subscription is not None and self.group_client is not None and self.group_client.rebalancing:
            return  # as Java's: not while the member takes part in a rebalance (it commits when it revokes)
        self._next_auto_commit = time.monotonic() + self._config["auto.commit.interval.ms"] / 1000
        self._auto_commit()

    def _auto_commit(self) -> None:
        try:
            if any(pos is not None for pos in self._positions.values()):
                self.commit()
        except LakelogError as exc:  # as Kafka: an auto-commit failure is logged, the records come again
            log.warning("auto-commit of group %s failed: %s", self.group_id, exc)

    # -- the group protocol's calls (engine.consume.group_client) ---------------------------

    def _revoke(self, partitions: set[TopicPartition], *, lost: bool) -> None:
        """Give up ``partitions``: commit their positions (with auto-commit, as Kafka's
        onJoinPrepare does; not for lost ones, which another member may own already), run the
        listener, forget them."""
        if not partitions:
            return
        if not lost and self._config["enable.auto.commit"]:
            positions = {tp: self._positions[tp] for tp in partitions if self._positions.get(tp) is not None}
            if positions:
                try:
                    self.commit({tp: pos for tp, pos in positions.items()})
                except LakelogError as exc:
                    member_id = self.group_client.member_id if self.group_client is not None else None
                    log.warning("%s: committing revoked partitions failed: %s", member_id, exc)
        self._tell_listener(partitions, lost=lost)
        self._set_assignment(set(self._positions) - partitions)

    def _tell_listener(self, partitions: set[TopicPartition], *, lost: bool) -> None:
        """The listener's on_partitions_lost for lost partitions (its on_partitions_revoked when it
        has none, as Java's default method), else on_partitions_revoked."""
        if self._listener is not None:
            callback = getattr(self._listener, "on_partitions_lost", None) if lost else None
            (callback or self._listener.on_partitions_revoked)(set(partitions))

    # -- closing ----------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Commit positions (if auto-commit is on), revoke (the listener runs), leave the group,
        stop. Idempotent. As Java's consumer (ConsumerCoordinator.onLeavePrepare), a member closing
        in the middle of a rebalance (it sent a JoinGroup whose generation it has not synced) loses
        its partitions instead (the listener's on_partitions_lost): its offset commits may be refused."""
        if self._closed:
            return
        if autocommit and self._config["enable.auto.commit"] and self.group_id and self._positions:
            self._auto_commit()
        if self._subscription is not None and self._positions:
            lost = self.group_client is not None and self.group_client.mid_rebalance
            self._tell_listener(set(self._positions), lost=lost)
        if self.group_client is not None:
            self.group_client.leave()
        self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")

    # -- offsets of the log -------------------------------------------------------

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """End offsets as read_committed sees them (Kafka's endOffsets): the log end offset, or the
        last stable offset while a write's reservation is pending; from the latest Delta version."""
        return self._log_offsets(partitions, end=True)

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return self._log_offsets(partitions, end=False)

    def _log_offsets(self, partitions: Iterable[Any], *, end: bool) -> dict[TopicPartition, int]:
        tps = [_as_tp(p) for p in partitions]
        state = self._context.log.latest()
        for tp in tps:
            topic = state.topics.get(tp.topic)
            if topic is None or not 0 <= tp.partition < topic.partitions:
                raise UnknownTopicOrPartitionError(f"partition {tp} does not exist")
        bounds = {tp: self._context.records.bounds(state, tp) for tp in tps}
        return {tp: bounds[tp].end if end else bounds[tp].start for tp in tps}


def _empty() -> pa.Table:
    return empty_table(LOG_ARROW_SCHEMA)


class _MemberSide:
    """The consumer as its group client sees it (:class:`engine.consume.group_client.GroupMember`)."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def subscription(self) -> list[str] | re.Pattern[str] | None:
        return self._consumer._subscription

    def assignment(self) -> set[TopicPartition]:
        return set(self._consumer._positions)

    def revoke(self, partitions: set[TopicPartition], *, lost: bool) -> None:
        self._consumer._revoke(partitions, lost=lost)

    def assign(self, partitions: set[TopicPartition]) -> None:
        consumer = self._consumer
        consumer._set_assignment(set(consumer._positions) | partitions)
        if partitions and consumer._listener is not None:
            consumer._listener.on_partitions_assigned(partitions)

    def fenced(self) -> None:
        self._consumer._closed = True
