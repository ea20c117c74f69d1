"""Kafka clients as members of lakelog's consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

Each Kafka member is held in the agent by a lakelog consumer of the same group
(:class:`ProxyMember`): lakelog's coordinator (leases off the Delta log, the
group's generation and assignment in ``__consumer_offsets``) decides who owns
what, so Kafka clients and lakelog's own consumers can share a group. The
agent answers every Kafka member as a follower: the assignment comes from
SyncGroup, computed by lakelog's assignor named by the protocol the client
chose (range, roundrobin or sticky; eager protocols).

One owner per partition at a time: when lakelog's group wants a partition
back from a member, Heartbeat answers REBALANCE_IN_PROGRESS and the proxy
keeps owning it until the Kafka client, having revoked (and committed), joins
again; only that JoinGroup completes the revocation in the group. A member
whose client stops heartbeating leaves the group after its session timeout
(the proxy's max.poll.interval.ms), as Kafka's coordinator removes it.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid

from kio.index import load_entity_schema
from kio.serial import entity_reader
from kio.static.constants import EntityType

from lakelog.engine.consume.group_client import GroupClient
from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

EAGER_PROTOCOLS = ("range", "roundrobin", "sticky")
# How often a JoinGroup looks at the group again while waiting for its assignment to settle.
JOIN_POLL_S = 0.05


class UnknownMemberError(LookupError):
    """The member id is not (or no longer) a member of the group here: UNKNOWN_MEMBER_ID."""


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (int16 version, then its fields)."""
    version = struct.unpack_from(">h", metadata, 0)[0]
    schema = load_entity_schema("consumer_protocol_subscription", min(version, 3), EntityType.data)
    subscription, _ = entity_reader(schema)(metadata, 2)
    return list(subscription.topics)


def choose_protocol(offered: list[str]) -> str | None:
    """The first of the client's protocols lakelog runs as the client expects (eager), if any."""
    return next((name for name in offered if name in EAGER_PROTOCOLS), None)


class ProxyMember:
    """A Kafka client's membership, held by a lakelog consumer of the group in the agent."""

    def __init__(
        self,
        store: Store,
        group_id: str,
        client_id: str,
        topics: list[str],
        protocol: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        instance_id: str | None,
    ) -> None:
        self.protocol = protocol
        self.lock = threading.Lock()
        # A JoinGroup waits at most this long for the member's assignment to settle.
        self.rebalance_timeout_s = min(rebalance_timeout_ms, 10_000) / 1000
        static = {"group_instance_id": instance_id} if instance_id else {}
        self.consumer = store.consumer(
            group_id,
            client_id=client_id or f"kafka-{uuid.uuid4().hex[:8]}",
            enable_auto_commit=False,
            # The client's own Metadata requests create topics (when it allows it); Kafka's
            # broker never creates one for a JoinGroup.
            allow_auto_create_topics=False,
            partition_assignment_strategy=protocol,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(100, min(3000, session_timeout_ms // 3)),
            # A Kafka client heartbeats from a thread of its own (it enforces max.poll.interval.ms
            # itself): silent for its session timeout, it is gone, and so is its proxy.
            max_poll_interval_ms=session_timeout_ms,
            **static,
        )
        self.consumer.subscribe(topics)
        assert self.consumer.group_client is not None  # it has a group.id
        self.group: GroupClient = self.consumer.group_client

    @property
    def member_id(self) -> str:
        member = self.group.member_id
        if member is None:
            raise UnknownMemberError("the member left the group")
        return member

    @property
    def generation(self) -> int:
        return self.group.generation

    def assignment(self) -> set[TopicPartition]:
        return self.consumer.assignment()

    @property
    def gone(self) -> bool:
        """Whether the joined member is no longer one (its client went silent, it was closed, or
        the group removed it): its client must join again with a new member id."""
        return self.group.member_id is None

    def join(self, timeout_s: float | None = None) -> None:
        """Run lakelog's group protocol for this member (revoking what the group wants back:
        the client has revoked it before joining again) until its assignment is what the
        group says, or ``timeout_s`` passed."""
        deadline = time.monotonic() + (self.rebalance_timeout_s if timeout_s is None else timeout_s)
        with self.lock:
            while True:
                self.group.polled()
                self.group.rejoin()  # look again even if the table did not move
                self.group.run_protocol()
                if not self._pending() or time.monotonic() >= deadline:
                    return
                time.sleep(JOIN_POLL_S)

    def heartbeat(self) -> bool:
        """Keep the member alive; whether the client must join again (the group changed)."""
        with self.lock:
            self.group.polled()
            if self.group.member_id is None:
                raise UnknownMemberError("the member left the group")
            return self._pending()

    def _pending(self) -> bool:
        member_id = self.group.member_id
        if member_id is None:
            return True
        state = self.group.state()
        if state is None or member_id not in state.members:
            return True
        if state.to_revoke(member_id):
            return True
        return state.generation != self.group.generation or set(state.assigned(member_id)) != self.assignment()

    def leave(self) -> None:
        with self.lock:
            self.consumer.close(autocommit=False)
