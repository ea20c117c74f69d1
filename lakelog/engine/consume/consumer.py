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
  (:mod:`engine.groups.state`): a partition has at most one owner at a time
  -- a member gets it only after its previous owner's
  ``on_partitions_revoked`` ran and its position was committed, or after
  that owner was removed -- and ``poll`` never returns records of a
  partition the member does not own;
* a member that stops renewing its lease for ``session.timeout.ms`` is
  removed by another member; one that does not poll for
  ``max.poll.interval.ms`` leaves the group itself; a member that finds
  itself removed calls ``on_partitions_lost`` and reads none of them again.

Heartbeats renew a lease object outside the Delta log
(:mod:`engine.groups.leases`) from a background thread; only joins, syncs,
leaves and offset commits are Delta commits. Rebalance callbacks run in the
thread that calls ``poll``, as in Kafka. While the member's group is forming or
rebalancing, a waiting ``poll`` looks at the log every few milliseconds rather
than every ``fetch.max.wait.ms``: Kafka's JoinGroup and SyncGroup answer as
soon as the rebalance completes, and so does lakelog's.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pyarrow as pa

from lakelog.engine.commit import Committer, RetryPolicy, TableState
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.config import INT_MAX, ConfigKey, key_table, resolve_config
from lakelog.engine.errors import (
    CommitFailedError,
    DataLossError,
    FencedInstanceIdError,
    IllegalStateError,
    InvalidConfigError,
    LakelogError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.groups.assignors import parse_strategy
from lakelog.engine.groups.coordinator import GroupLog, change_group, commit_offsets, partition_counts
from lakelog.engine.groups.leases import LeaseStore, Liveness
from lakelog.engine.groups.offsets_topic import OffsetAndMetadata, check_group_id, check_offset, current_offsets
from lakelog.engine.groups.state import GroupState, Member, expire, join, join_all, leave, overdue, sync
from lakelog.engine.offsets import PartitionBounds, TopicPartition
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.topics import resolve_topic_names

if TYPE_CHECKING:
    from lakelog.store import Store

log = logging.getLogger(__name__)

# How often a waiting poll looks at the log while the member's group forms or rebalances
# (a look at a log with no new commit is one failed open).
REBALANCE_LOOK_S = 0.005
# Longest a joining member leaves its join to a member that announced itself earlier.
JOIN_FOLLOW_S = 0.25


def _strategy_error(value: Any) -> str | None:
    try:
        parse_strategy(value)
    except InvalidConfigError as exc:
        return str(exc)
    return None


CONSUMER_CONFIG_KEYS = key_table(
    [
        ConfigKey("client.id", "string", "", "Name recorded with the member and its commits."),
        ConfigKey("group.id", "string", "", "The consumer group; needed for subscribe() and commit()."),
        ConfigKey(
            "auto.offset.reset",
            "enum",
            "latest",
            "Where to start without a usable committed offset: earliest, latest, or none (raise).",
            choices=("earliest", "latest", "none"),
        ),
        ConfigKey(
            "allow.auto.create.topics",
            "bool",
            True,
            "Whether subscribe(), assign() and partitions_for_topic() create a topic that does not exist "
            "(num.partitions, the "
            "topic.* settings); only when the store's auto.create.topics.enable is true too, as Kafka's "
            "broker decides. A pattern never creates one.",
        ),
        ConfigKey("enable.auto.commit", "bool", True, "Commit positions every auto.commit.interval.ms from poll()."),
        ConfigKey("auto.commit.interval.ms", "long", 5000, "Interval of automatic commits.", minimum=0),
        ConfigKey("max.poll.records", "int", 500, "Most records one poll() returns.", minimum=1, maximum=INT_MAX),
        ConfigKey(
            "session.timeout.ms", "long", 45_000, "Heartbeat silence after which a member is removed.", minimum=1
        ),
        ConfigKey(
            "heartbeat.interval.ms",
            "long",
            3000,
            "Interval of lease renewals (outside the Delta log) and of checks for silent members.",
            minimum=1,
        ),
        ConfigKey(
            "group.instance.id",
            "string",
            "",
            "Static membership (KIP-345): a member restarted with the same id within session.timeout.ms "
            "gets its partitions back without a rebalance.",
        ),
        ConfigKey(
            "max.poll.interval.ms", "long", 300_000, "Longest gap between polls before the member leaves.", minimum=1
        ),
        ConfigKey(
            "fetch.min.records",
            "int",
            10_000,
            "Records read ahead per partition fetch (whole row groups; lakelog's fetch.min.bytes).",
            minimum=1,
        ),
        ConfigKey("fetch.max.wait.ms", "long", 100, "Pause between looks for new data while poll() waits.", minimum=0),
        ConfigKey(
            "isolation.level",
            "enum",
            "read_committed",
            "Only read_committed: open and aborted transactions are never in the table.",
            choices=("read_committed",),
        ),
        ConfigKey(
            "partition.assignment.strategy",
            "string",
            "range",
            "range, roundrobin, sticky or cooperative-sticky (or Kafka's class names); cooperative-sticky "
            "revokes only the partitions that move.",
            check=_strategy_error,
        ),
        ConfigKey(
            "retries",
            "int",
            INT_MAX,
            "Retries of an offset commit or group change that lost its version to another (bounded by "
            "default.api.timeout.ms).",
            minimum=0,
        ),
        ConfigKey(
            "default.api.timeout.ms",
            "long",
            60_000,
            "How long commit() and the group's joins and syncs may take, retries included (Kafka's commitSync bound).",
            minimum=1,
        ),
    ]
)


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int  # ms
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What a transaction needs to commit offsets for a group member (Kafka's KIP-447)."""

    group_id: str
    generation: int = -1
    member_id: str | None = None


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

    def __init__(self, store: Store, config: Mapping[str, Any]) -> None:
        self._config = resolve_config(CONSUMER_CONFIG_KEYS, config, what="consumer config")
        cfg = self._config
        if cfg["heartbeat.interval.ms"] >= cfg["session.timeout.ms"]:
            raise InvalidConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self._store = store
        self.group_id: str | None = check_group_id(cfg["group.id"]) if cfg["group.id"] else None
        self.client_id = cfg["client.id"] or f"consumer-{uuid.uuid4().hex[:8]}"
        self._records = PartitionReader(store.uri)
        self._writer: Committer | None = None
        self._group_log: GroupLog | None = None
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
        # The table version the group protocol last looked at: the group changes only by commits.
        self._protocol_version = -1
        # Whether that look found the group forming or rebalancing (a waiting poll looks often).
        self._rebalancing = False
        # Membership, shared with the heartbeat thread.
        self._lock = threading.Lock()
        self._member_id: str | None = None
        self._instance_id: str | None = cfg["group.instance.id"] or None
        self._generation = -1
        self._leases: LeaseStore | None = None
        self._lease_renewed = time.monotonic()
        self._heartbeat_error: BaseException | None = None
        self._last_poll = time.monotonic()
        self._stop = threading.Event()
        self._heartbeats: threading.Thread | None = None
        self._closed = False

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
        self._protocol_version = -1
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
        topics = self._store._latest_topics()
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
        meta = self._store._latest_topics().get(topic)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return list(range(meta.partitions))

    def _auto_create(self, names: list[str]) -> None:
        """Create the missing topics of ``names`` if this consumer and the store allow it."""
        if self._config["allow.auto.create.topics"]:
            self._store._auto_create_topics(names)

    def unsubscribe(self) -> None:
        """Drop the subscription or manual assignment (leaving the group)."""
        self._leave_group()
        self._subscription = None
        self._protocol_version = -1
        self._manual = False
        self._set_assignment(set())

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def subscription(self) -> list[str] | re.Pattern[str] | None:
        return self._subscription

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The member's group, generation and member id, for ``send_offsets_to_transaction``."""
        if self.group_id is None:
            raise InvalidConfigError("group_metadata() needs a group.id")
        with self._lock:
            return ConsumerGroupMetadata(self.group_id, self._generation, self._member_id)

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
            self._init_positions(self._store.log.latest())
        return int(self._positions[tp])  # type: ignore[arg-type]

    def seek(self, partition: Any, offset: int) -> None:
        """Make the next poll of ``partition`` start at ``offset``."""
        tp = self._assigned(partition)
        self._positions[tp] = check_offset(offset, f"seek offset for {tp}")
        self._buffers.pop(tp, None)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        bounds = self._bounds(self._store.log.latest())
        for tp in self._targets(partitions):
            self.seek(tp, bounds.get(tp, PartitionBounds(0, 0)).start)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        bounds = self._bounds(self._store.log.latest())
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
        return {tp: self._store._partition_bounds(state, tp) for tp in self._positions}

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
        table = self.poll_arrow(timeout_ms, max_records)
        if not table.num_rows:
            return []
        cols = {name: table.column(name).to_pylist() for name in table.column_names}
        return [
            ConsumerRecord(
                cols["topic"][i],
                cols["partition"][i],
                cols["offset"][i],
                int(cols["timestamp"][i].timestamp() * 1000),
                cols["timestamp_type"][i],
                cols["key"][i],
                cols["value"][i],
                None if cols["headers"][i] is None else [(h["key"], h["value"]) for h in cols["headers"][i]],
            )
            for i in range(table.num_rows)
        ]

    def poll_arrow(self, timeout_ms: int = 0, max_records: int | None = None) -> pa.Table:
        """Like ``poll``, as one Arrow table (the log table's columns) for bulk work."""
        self._check_open()
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise InvalidConfigError(f"timeout_ms must be a non-negative int, got {timeout_ms!r}")
        limit = max_records or self._config["max.poll.records"]
        deadline = time.monotonic() + timeout_ms / 1000
        self._last_poll = time.monotonic()
        while True:
            self._run_group_protocol()
            self._maybe_auto_commit()
            table = self._take(limit)
            if table.num_rows or time.monotonic() >= deadline:
                return table
            pause = self._config["fetch.max.wait.ms"] / 1000
            if self._rebalancing and self._subscription is not None:
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
                    snapshot = self._store.log.latest()
                    self._init_positions(snapshot)
                try:
                    buffer = self._read(snapshot, tp)
                except DataLossError:
                    # Maintenance may have rewritten the files and VACUUM deleted them since
                    # this state was read: the records are in the newer files, if anywhere.
                    snapshot = self._store.log.latest()
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
        CommitFailedError when this member is not in the group's current
        generation (nothing is committed), CommitConflictError when retries
        ran out.
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
        with self._lock:
            generation, member_id = self._generation, self._member_id
        if self._subscription is not None and member_id is None:
            raise CommitFailedError("this consumer has not joined its group yet (poll first); nothing was committed")
        commit_offsets(self._group_writer(), self._log(), chosen, generation, member_id, self._policy)

    def committed(self, partitions: Iterable[Any]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's last committed offset per partition (None where there is none)."""
        if self.group_id is None:
            raise InvalidConfigError("committed() needs a group.id")
        tps = [_as_tp(p) for p in partitions]
        found = self._committed_offsets(tps)
        return {tp: found.get(tp) for tp in tps}

    def _committed_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        if not self._store._has_offsets_topic():
            return {}
        ids = {name: t.topic_id for name, t in self._store.log.latest().topics.items()}
        offsets = current_offsets(self._log().latest().offsets, ids)
        return {tp: offsets[tp] for tp in tps if tp in offsets}

    def _maybe_auto_commit(self) -> None:
        if not (self._config["enable.auto.commit"] and self.group_id) or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self._config["auto.commit.interval.ms"] / 1000
        self._auto_commit()

    def _auto_commit(self) -> None:
        try:
            if any(pos is not None for pos in self._positions.values()):
                self.commit()
        except LakelogError as exc:  # as Kafka: an auto-commit failure is logged, the records come again
            log.warning("auto-commit of group %s failed: %s", self.group_id, exc)

    # -- the group protocol -----------------------------------------------------

    def _group_writer(self) -> Committer:
        if self._writer is None:
            self._store._ensure_offsets_topic()
            self._writer = self._store._new_writer(self.client_id)
        return self._writer

    def _log(self) -> GroupLog:
        if self._group_log is None:
            assert self.group_id is not None
            partitions = self._store._ensure_offsets_topic()
            self._group_log = GroupLog(self._store.reader, self._records, self.group_id, partitions)
        return self._group_log

    def _lease_store(self) -> LeaseStore:
        if self._leases is None:
            assert self.group_id is not None
            self._leases = LeaseStore(self._store.uri, self.group_id)
        return self._leases

    def _subscribed_topics(self, view_topics: Mapping[str, Any]) -> tuple[str, ...]:
        spec = self._subscription
        if isinstance(spec, re.Pattern):
            return tuple(resolve_topic_names(spec, view_topics))
        return tuple(t for t in spec or () if t in view_topics)

    def _member(self, view_topics: Mapping[str, Any]) -> Member:
        return Member(
            self._member_id or "",
            self.client_id,
            self._subscribed_topics(view_topics),
            self._config["session.timeout.ms"],
            self._config["max.poll.interval.ms"],
            self._instance_id,
        )

    def _change(self, operation: str, change: Any) -> GroupState:
        return change_group(self._group_writer(), self._log(), operation, change, self._policy)

    def _run_group_protocol(self) -> None:
        """One round of Kafka's consumer coordinator, in the polling thread: join, revoke and
        sync, take a new assignment. Callbacks run here."""
        if self._heartbeat_error is not None:
            error, self._heartbeat_error = self._heartbeat_error, None
            raise error
        if self._subscription is None:
            return
        if self._member_id is None:
            self._join()
        view = self._store.log.latest()
        if view.version == self._protocol_version and not self._lease_lapsed():
            return  # no commit since the last complete round: the group is as it was
        group = self._log().latest(view, offsets=False).state or GroupState(self._log().group_id)
        member_id = self._member_id
        assert member_id is not None
        me = group.members.get(member_id)
        if me is None or self._lease_lapsed():
            self._lose_membership(group)
            self._rebalancing = True  # it joins again at the next look
            return
        wanted = self._member(view.topics)
        counts = {t: n for t, n in partition_counts(view).items() if t in wanted.topics}
        if wanted.topics != me.topics or counts != {t: n for t, n in group.partition_counts.items() if t in counts}:
            # A changed subscription (a pattern matched a new topic) or a grown topic rebalances.
            group = self._change(
                "join_group", lambda st, now, v: join(st, self._member(v.topics), now, partition_counts(v))
            )
        to_revoke = set(group.to_revoke(member_id))
        if to_revoke:
            self._revoke(to_revoke & set(self._positions), lost=False)
            group = self._change("sync_group", lambda st, now, v: sync(st, member_id, to_revoke))
        assigned = set(group.assigned(member_id))
        owned = set(self._positions)
        if group.generation != self._generation or assigned != owned:
            if owned - assigned:
                # Taken without a revocation of ours (we were removed and joined again): lost.
                self._revoke(owned - assigned, lost=True)
            added = assigned - set(self._positions)
            with self._lock:
                self._generation = group.generation
            self._set_assignment(set(self._positions) | added)
            if added and self._listener is not None:
                self._listener.on_partitions_assigned(added)
            if added or owned != assigned:
                log.info("%s: generation %d, assigned %s", member_id, group.generation, sorted(assigned))
        self._rebalancing = group.rebalancing
        self._protocol_version = view.version

    def _join(self) -> None:
        with self._lock:
            self._member_id = f"{self.client_id}-{uuid.uuid4()}"
            self._generation = -1
        member_id = self._member_id
        leases = self._lease_store()
        leases.renew(member_id, self._instance_id)
        self._lease_renewed = time.monotonic()
        assignor = self._config["partition.assignment.strategy"]
        leases.announce(self._member(self._store.log.latest().topics))

        def change(state: GroupState, now_ms: int, view: TableState) -> GroupState:
            # Members announced as joining come in with this join: one rebalance for all.
            others = [m for m in leases.announced(now_ms) if m.member_id != member_id]
            return join_all(state, [self._member(view.topics), *others], now_ms, partition_counts(view), assignor)

        try:
            self._follow_earlier_join(leases, member_id)
            self._change("join_group", change)  # commits nothing if that join admitted us
        finally:
            leases.withdraw(member_id)
        self._start_heartbeats()

    def _follow_earlier_join(self, leases: LeaseStore, member_id: str) -> None:
        """Members starting together: leave the join to the one announced first, whose join
        admits every member announced by the time it is planned (one rebalance for all); the
        others' joins would only lose the version to it and be planned again, costing every
        member time while the group forms. Returns once the group holds this member, once
        that member's join landed without it (announced too late: it joins itself), or after
        JOIN_FOLLOW_S (that member may have died before joining)."""
        first = leases.first_announced(int(time.time() * 1000))
        if first is None or first == member_id:
            return
        deadline = time.monotonic() + JOIN_FOLLOW_S
        while time.monotonic() < deadline:
            state = self._log().latest(offsets=False).state
            if state is not None and (member_id in state.members or first in state.members):
                return
            time.sleep(REBALANCE_LOOK_S)

    def _lease_lapsed(self) -> bool:
        """Whether this member must assume the others removed it: its lease was not renewed for
        its session timeout, less one heartbeat of margin (they wait the whole timeout)."""
        cfg = self._config
        limit = (cfg["session.timeout.ms"] - cfg["heartbeat.interval.ms"]) / 1000
        return time.monotonic() - self._lease_renewed > limit

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
                    log.warning("%s: committing revoked partitions failed: %s", self._member_id, exc)
        if self._listener is not None:
            callback = getattr(self._listener, "on_partitions_lost", None) if lost else None
            (callback or self._listener.on_partitions_revoked)(set(partitions))
        self._set_assignment(set(self._positions) - partitions)

    def _lose_membership(self, group: GroupState) -> None:
        """We are not (or may no longer be) a member: our partitions are lost; join again."""
        member_id = self._member_id
        self._revoke(set(self._positions), lost=True)
        self._stop_heartbeats()
        with self._lock:
            self._member_id = None
            self._generation = -1
        if self._instance_id is not None:
            holder = group.member_for_instance(self._instance_id)
            if holder is not None and holder.member_id != member_id:
                self._closed = True
                raise FencedInstanceIdError(
                    f"group.instance.id {self._instance_id!r} joined group {self.group_id!r} under member id "
                    f"{holder.member_id}; this instance ({member_id}) is fenced and closed"
                )
        log.warning(
            "%s: no longer a member of group %s; its partitions are lost, joining again", member_id, self.group_id
        )

    def _start_heartbeats(self) -> None:
        if self._heartbeats is not None and self._heartbeats.is_alive():
            return
        self._stop.clear()
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, name=f"{self.client_id}-hb", daemon=True)
        self._heartbeats.start()

    def _stop_heartbeats(self) -> None:
        self._stop.set()
        if self._heartbeats is not None and self._heartbeats is not threading.current_thread():
            self._heartbeats.join()
        self._heartbeats = None

    def _heartbeat_loop(self) -> None:
        """Renew the lease; remove members whose leases went silent or who owe a revocation past
        their rebalance timeout (Kafka's coordinator does both). No Delta commit unless someone
        is removed."""
        cfg = self._config
        interval = cfg["heartbeat.interval.ms"] / 1000
        liveness = Liveness(time.monotonic())
        while not self._stop.wait(interval):
            if time.monotonic() - self._last_poll > cfg["max.poll.interval.ms"] / 1000:
                log.warning("%s: no poll within max.poll.interval.ms, leaving the group", self._member_id)
                self._leave_group(stop_thread=False)
                return
            member_id = self._member_id
            if member_id is None:
                return
            try:
                self._lease_store().renew(member_id, self._instance_id)
                self._lease_renewed = time.monotonic()
                self._expire_silent(liveness, member_id)
            except LakelogError as exc:
                log.warning("%s: heartbeat failed: %s", member_id, exc)
            except OSError as exc:
                log.warning("%s: renewing the lease failed: %s", member_id, exc)
            except Exception as exc:  # the store is gone (closing); the poll thread learns of it
                self._heartbeat_error = exc
                return

    def _expire_silent(self, liveness: Liveness, member_id: str) -> None:
        group = self._log().latest(offsets=False).state
        if group is None or member_id not in group.members:
            return
        others = {m: v.session_timeout_ms for m, v in group.members.items() if m != member_id}
        now = time.monotonic()
        liveness.observe(self._lease_store().read(), others, now)
        gone = set(liveness.silent(others, now)) | set(overdue(group, int(time.time() * 1000)))
        gone.discard(member_id)
        if gone:
            log.info("%s: removing silent member(s) %s from group %s", member_id, sorted(gone), self.group_id)
            self._change("expire_members", lambda st, now_ms, v: expire(st, gone, now_ms, partition_counts(v)))

    def _leave_group(self, stop_thread: bool = True) -> None:
        """Revoke (in the polling thread only), leave the group, drop the lease. A static member
        does not leave: its partitions wait for it for session.timeout.ms (KIP-345)."""
        if stop_thread:
            self._stop_heartbeats()
        with self._lock:
            member_id, self._member_id = self._member_id, None
            self._generation = -1
        if member_id is None or self.group_id is None:
            return
        if self._instance_id is not None:
            return

        def change(state: GroupState, now_ms: int, view: Any) -> GroupState:
            return leave(state, member_id, now_ms, partition_counts(view))

        try:
            self._change("leave_group", change)
            self._lease_store().remove(member_id)
        except LakelogError as exc:  # the others will time the member out
            log.warning("%s: leaving group %s failed: %s", member_id, self.group_id, exc)

    # -- closing ----------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Commit positions (if auto-commit is on), revoke (the listener runs), leave the group,
        stop. Idempotent."""
        if self._closed:
            return
        if autocommit and self._config["enable.auto.commit"] and self.group_id and self._positions:
            self._auto_commit()
        if self._subscription is not None and self._positions and self._listener is not None:
            self._listener.on_partitions_revoked(set(self._positions))
        self._leave_group()
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
        state = self._store.log.latest()
        for tp in tps:
            topic = state.topics.get(tp.topic)
            if topic is None or not 0 <= tp.partition < topic.partitions:
                raise UnknownTopicOrPartitionError(f"partition {tp} does not exist")
        bounds = {tp: self._store._partition_bounds(state, tp) for tp in tps}
        return {tp: bounds[tp].end if end else bounds[tp].start for tp in tps}


def _empty() -> pa.Table:
    return LOG_ARROW_SCHEMA.empty_table()
