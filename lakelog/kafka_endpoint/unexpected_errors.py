"""Which error codes a response carries, and one warning per client, API and code the agent
did not expect to answer (issue 31's "log what the frameworks meet"): a client that fails on
an answer often says why only in its own log (Streams' and Connect's INCONSISTENT_GROUP_PROTOCOL
was found that way), so the agent's log names each (client id, API, error code) the first time,
with the message the response carried. Codes that are the protocol working as designed
(:data:`ROUTINE`: a consumer asked past the log's end, a member told to rejoin, a producer fenced,
a topic created twice) are not logged. At most ``limit`` triples are remembered, as
:class:`kafka_endpoint.server.UnsupportedRequests` remembers its pairs.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from kio.schema.add_offsets_to_txn.v0.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v0.request import AddPartitionsToTxnRequest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.create_topics.v2.request import CreateTopicsRequest
from kio.schema.delete_records.v0.request import DeleteRecordsRequest
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v0.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchRequest
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest
from kio.schema.heartbeat.v0.request import HeartbeatRequest
from kio.schema.join_group.v0.request import JoinGroupRequest
from kio.schema.leave_group.v0.request import LeaveGroupRequest
from kio.schema.metadata.v1.request import MetadataRequest
from kio.schema.offset_commit.v2.request import OffsetCommitRequest
from kio.schema.offset_fetch.v1.request import OffsetFetchRequest
from kio.schema.offset_for_leader_epoch.v2.request import OffsetForLeaderEpochRequest
from kio.schema.produce.v3.request import ProduceRequest
from kio.schema.sync_group.v0.request import SyncGroupRequest
from kio.schema.txn_offset_commit.v0.request import TxnOffsetCommitRequest

from lakelog.kafka_endpoint.messages import api_key, api_name

log = logging.getLogger("lakelog.kafka_endpoint.server")

# What the group coordinator answers while a group rebalances or a member is replaced: the
# client rejoins (AbstractCoordinator handles each).
_GROUP_FLOW = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.rebalance_in_progress,
        ErrorCode.unknown_member_id,
        ErrorCode.illegal_generation,
        ErrorCode.member_id_required,
    }
)
# KIP-848: a member behind the group's epochs, or dropped from it, rejoins with epoch 0
# (ConsumerMembershipManager); an offset request of a stale epoch is retried with the new one.
_MEMBER_EPOCHS = frozenset({ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch, ErrorCode.stale_member_epoch})
# A newer instance of a transactional id fenced this one (the zombie fencing transactions exist for).
_FENCING = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch})

# Per API key, the error codes answered in the normal course of the protocol: not logged.
ROUTINE: Mapping[int, frozenset[ErrorCode]] = {
    api_key(ApiVersionsRequest): frozenset({ErrorCode.unsupported_version}),  # version negotiation
    api_key(MetadataRequest): frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available}),
    api_key(ProduceRequest): _FENCING,
    api_key(FetchRequest): frozenset({ErrorCode.offset_out_of_range}),  # auto.offset.reset's cue
    api_key(OffsetForLeaderEpochRequest): frozenset({ErrorCode.unknown_leader_epoch, ErrorCode.fenced_leader_epoch}),
    api_key(FindCoordinatorRequest): frozenset({ErrorCode.coordinator_not_available}),
    api_key(JoinGroupRequest): _GROUP_FLOW,
    api_key(SyncGroupRequest): _GROUP_FLOW,
    api_key(HeartbeatRequest): _GROUP_FLOW,
    api_key(LeaveGroupRequest): _GROUP_FLOW,
    api_key(OffsetCommitRequest): _GROUP_FLOW | _MEMBER_EPOCHS,
    api_key(OffsetFetchRequest): frozenset({ErrorCode.not_coordinator, ErrorCode.unstable_offset_commit})
    | _MEMBER_EPOCHS,
    api_key(ConsumerGroupHeartbeatRequest): _MEMBER_EPOCHS,
    api_key(TxnOffsetCommitRequest): _GROUP_FLOW | _FENCING,
    api_key(AddPartitionsToTxnRequest): _FENCING,
    api_key(AddOffsetsToTxnRequest): _FENCING,
    api_key(EndTxnRequest): _FENCING,
    api_key(DescribeTransactionsRequest): frozenset({ErrorCode.transactional_id_not_found}),
    # Streams and Connect create their topics on every start; tools delete what may be gone.
    api_key(CreateTopicsRequest): frozenset({ErrorCode.topic_already_exists}),
    api_key(DeleteTopicsRequest): frozenset({ErrorCode.unknown_topic_or_partition}),
    # kafka-delete-records and Streams' purge ask for what the log may no longer hold.
    api_key(DeleteRecordsRequest): frozenset({ErrorCode.offset_out_of_range}),
}


def response_errors(body: Any) -> Iterator[tuple[ErrorCode, str | None]]:
    """Every error code other than NONE in a kio response ``body`` (top level and nested
    entities), each with the ``error_message`` beside it, if any."""
    if not _is_entity(body):
        return
    code = getattr(body, "error_code", None)
    if isinstance(code, ErrorCode) and code is not ErrorCode.none:
        yield code, getattr(body, "error_message", None)
    for name in _field_names(type(body)):
        value = getattr(body, name)
        if type(value) is tuple:
            if value and _is_entity(value[0]):
                for item in value:
                    yield from response_errors(item)
        elif _is_entity(value):
            yield from response_errors(value)


_PRODUCE = api_key(ProduceRequest)


def _produced_without_errors(body: Any) -> bool:
    """Whether a Produce response ``body`` holds no error code but NONE (its partitions' are
    its only ones)."""
    try:
        return all(p.error_code is ErrorCode.none for t in body.responses for p in t.partition_responses)
    except AttributeError:  # not a Produce response's shape: walked as any other
        return False


def _is_entity(value: Any) -> bool:
    # dataclasses.is_dataclass(), without its checks for a class: every answer is walked.
    return hasattr(type(value), "__dataclass_fields__")


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


class UnexpectedErrors:
    """Logs one warning per (client id, API, error code) a response carried that
    :data:`ROUTINE` does not list for its API; at most ``limit`` triples are remembered."""

    def __init__(self, limit: int = 10_000, routine: Mapping[int, frozenset[ErrorCode]] = ROUTINE) -> None:
        self._limit = limit
        self._routine = routine
        self._seen: set[tuple[str | None, int, ErrorCode]] = set()
        self._lock = threading.Lock()

    def note(self, client_id: str | None, api: int, version: int, body: Any, peer: object) -> int:
        """Log what ``body`` (the response to ``client_id``'s request of API ``api``) carries
        that was not logged before; how many lines it logged."""
        if api == _PRODUCE and _produced_without_errors(body):
            return 0  # the agent's most frequent answer, walked field by field it cost ~5 us
        routine = self._routine.get(api, frozenset())
        logged = 0
        for code, message in response_errors(body):
            if code in routine:
                continue
            with self._lock:
                if (client_id, api, code) in self._seen or len(self._seen) >= self._limit:
                    continue
                self._seen.add((client_id, api, code))
            log.warning(
                "answered %s (%d) to client %r at %s: %s (key %d) v%d%s",
                code.name.upper(),
                code.value,
                client_id,
                peer,
                api_name(api, version),
                api,
                version,
                f": {message}" if message else "",
            )
            logged += 1
        return logged
