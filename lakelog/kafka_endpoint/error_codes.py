"""lakelog's errors as Kafka's error codes (``kio.schema.errors.ErrorCode``), for every API area.

An unknown topic or partition, a record over ``max.message.bytes``, invalid
timestamps, a fenced producer...: each of lakelog's errors answers with the
code a Kafka broker gives for it; a store that cannot be read is
KAFKA_STORAGE_ERROR, anything else UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from lakelog.engine.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    GroupSubscribedToTopicError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTopicError,
    InvalidTxnStateError,
    LakelogError,
    OffsetOutOfRangeError,
    ProducerFencedError,
    RebalanceInProgressError,
    RecordTooLargeError,
    RetriableError,
    StaleMemberEpochError,
    TopicExistsError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from lakelog.kafka_endpoint.idempotence import OutOfOrderSequenceError
from lakelog.kafka_endpoint.record_batches import InvalidRecordBatchError
from lakelog.kafka_endpoint.txn_proxy import StaleEpochError, UnknownProducerError

# lakelog's errors as Kafka's codes, most specific first.
ERROR_CODES: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (UnknownTopicOrPartitionError, ErrorCode.unknown_topic_or_partition),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (RecordTooLargeError, ErrorCode.message_too_large),
    (InvalidRecordBatchError, ErrorCode.corrupt_message),
    (InvalidRecordError, ErrorCode.invalid_record),
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (TopicExistsError, ErrorCode.topic_already_exists),
    (InvalidPartitionsError, ErrorCode.invalid_partitions),
    (InvalidConfigError, ErrorCode.invalid_config),
    (GroupNotEmptyError, ErrorCode.non_empty_group),
    (GroupIdNotFoundError, ErrorCode.group_id_not_found),
    (GroupSubscribedToTopicError, ErrorCode.group_subscribed_to_topic),
    (UnknownMemberIdError, ErrorCode.unknown_member_id),
    (StaleMemberEpochError, ErrorCode.stale_member_epoch),
    (UnsupportedVersionError, ErrorCode.unsupported_version),
    (FencedInstanceIdError, ErrorCode.fenced_instance_id),
    (InconsistentGroupProtocolError, ErrorCode.inconsistent_group_protocol),
    (CommitFailedError, ErrorCode.illegal_generation),
    (OutOfOrderSequenceError, ErrorCode.out_of_order_sequence_number),
    (UnknownProducerError, ErrorCode.invalid_producer_id_mapping),
    (StaleEpochError, ErrorCode.invalid_producer_epoch),
    (ProducerFencedError, ErrorCode.producer_fenced),
    (InvalidTxnStateError, ErrorCode.invalid_txn_state),
    (RebalanceInProgressError, ErrorCode.rebalance_in_progress),
    (RetriableError, ErrorCode.request_timed_out),
    (LakelogError, ErrorCode.kafka_storage_error),
)


def error_code(exc: BaseException) -> ErrorCode:
    """Kafka's error code for a lakelog failure (UNKNOWN_SERVER_ERROR for anything else)."""
    return next((code for kind, code in ERROR_CODES if isinstance(exc, kind)), ErrorCode.unknown_server_error)


def outcome(action: Callable[[], Any]) -> dict[str, Any]:
    """Run ``action``: ``error_code`` NONE and no message, or the code and message of what it raised."""
    try:
        action()
    except Exception as exc:
        return {"error_code": error_code(exc), "error_message": str(exc)}
    return {"error_code": ErrorCode.none, "error_message": None}
