"""lakelog's one exception hierarchy.

Three outcomes are kept apart, as Kafka clients and pyiceberg do:

* :class:`RetriableError` -- the operation failed and nothing was committed;
  doing it again is safe (a commit conflict whose retries ran out, a timeout
  before anything was written).
* :class:`CommitStateUnknownError` -- a commit may or may not have landed; the
  caller must re-read the log before deciding what to do.
* :class:`FatalError` -- retrying cannot help: invalid configuration, unknown
  topic, a record over ``max.message.bytes``, a closed producer.

Every class carries ``exit_code``, which the ``lakelog`` CLI returns, so that
scripts can tell the outcomes apart without parsing messages;
:func:`error_for_exception` is the one mapping from any failure to the error
the CLI reports (an OSError to a :class:`StoreError`, anything unanticipated
to :class:`UnexpectedError`).
"""

from __future__ import annotations

import errno
import os
import re


class LakelogError(Exception):
    """Base class of every error lakelog raises on purpose."""

    exit_code = 1


class RetriableError(LakelogError):
    """Failed without committing anything; the same call may succeed if repeated."""

    exit_code = 3


class CommitConflictError(RetriableError):
    """Concurrent commits kept conflicting with ours until the retry budget ran out.

    Nothing of the attempted commit is visible. ``attempts`` is how many
    commits were tried.
    """

    def __init__(self, message: str, attempts: int = 0) -> None:
        super().__init__(message)
        self.attempts = attempts


class MaintenanceConflictError(CommitConflictError):
    """A concurrent commit removed a file a maintenance step rewrites or deletes (another
    OPTIMIZE, compaction, retention, or a topic deletion). Nothing of the step was
    committed; planning it again from the new snapshot may succeed."""


class DeliveryTimeoutError(RetriableError):
    """A record was not committed within ``delivery.timeout.ms``; it was not written."""


class ReservationLostError(RetriableError):
    """A write's offset reservation was aborted before its records were committed (its
    deadline, ``transaction.timeout.ms`` after its last heartbeat, passed; or a repair
    aborted it). Nothing of the write is visible and its offsets stay unused, as an
    aborted Kafka transaction's; the write can be repeated."""


class LogListingRaceError(RetriableError):
    """Listing the Delta log kept racing concurrent writers (delta-kernel's "found gap" /
    "CRC file version ... is newer than log segment version") until the client's timeout ran
    out. Nothing is wrong with the log and nothing was committed; repeat the call."""


class CommitStateUnknownError(LakelogError):
    """A commit was attempted and its outcome could not be determined.

    The records may or may not be in the log: re-read it (``end_offsets``,
    ``read``) before producing them again.
    """

    exit_code = 4


class CommitNotDurableError(CommitStateUnknownError):
    """A commit file was created and is visible, but the storage failed to sync it to disk
    (fsync of the file's directory failed): it may not survive a power loss. Not
    acknowledged; the storage is failing, as Kafka and PostgreSQL treat a failed fsync."""


class FatalError(LakelogError):
    """Retrying cannot succeed; the request itself is wrong or the client is unusable."""

    exit_code = 1


class InvalidConfigError(FatalError, ValueError):
    """A configuration key is unknown or its value has the wrong type or range."""

    exit_code = 2


class InvalidTopicError(FatalError, ValueError):
    """A topic name breaks Kafka's naming rules or collides with an existing topic."""

    exit_code = 2


class TopicExistsError(FatalError):
    """``create_topic`` was asked for a topic that already exists."""

    exit_code = 5


class UnknownTopicOrPartitionError(FatalError):
    """The topic does not exist, or the partition is outside its partition count."""

    exit_code = 6


class InvalidPartitionsError(FatalError, ValueError):
    """A partition count is not a positive integer, or would shrink a topic."""

    exit_code = 2


class RecordTooLargeError(FatalError):
    """A record is larger than the topic's ``max.message.bytes``: invalid input, as the README's
    exit-code table counts it."""

    exit_code = 2


class InvalidRecordError(FatalError, TypeError):
    """A record's key, value, headers or timestamp has a type lakelog cannot store."""

    exit_code = 2


class InvalidOffsetError(FatalError, ValueError):
    """An offset specification (starting/ending offsets, a seek) is malformed or out of range."""

    exit_code = 2


class StoreError(FatalError):
    """The path does not hold a usable lakelog store, or the Spark session cannot serve it."""


class StoreNotFoundError(StoreError):
    """There is no lakelog store at the path, and the call does not create one."""


class StoreAccessError(StoreError):
    """The storage refused access: permission denied, or a read-only file system."""


class StoreFullError(StoreError):
    """The storage has no space left (or the quota is used up)."""


class CorruptLogError(StoreError):
    """A file of the log table is not what the protocol says it must be: a truncated or
    overwritten commit file, a data file that is not Parquet. Nothing was written; repair
    the store (``lakelog check``) before retrying."""


class UnsupportedTableFeatureError(StoreError):
    """The table's Delta protocol needs a reader or writer feature lakelog does not
    implement (deletion vectors, column mapping, change data feed, ...); lakelog refuses
    to write it rather than write it wrongly."""


class DataLossError(FatalError):
    """Records are gone from the log: a data file the log references is missing (find and
    drop it with ``lakelog check --repair --drop-missing-files``), or records a streaming
    query had not read yet were removed (retention, a deleted or re-created topic; raised
    when ``failOnDataLoss`` is true)."""


class InconsistentWriteError(FatalError):
    """Files written for a commit do not carry exactly the offsets that were planned.

    Raised before committing, so nothing became visible. It would mean a
    bug in offset assignment; it exists so that such a bug can never commit.
    """


class ProducerClosedError(FatalError):
    """``send`` or ``flush`` was called on a producer after ``close``."""


class InvalidTxnStateError(FatalError):
    """A transactional call made in the wrong state (commit without begin, send outside a
    transaction, init twice), or an application transaction version reused."""


class IllegalStateError(FatalError):
    """A client method called when the client's state does not allow it (closed,
    a partition that is not assigned, subscribe after assign)."""


class ProducerFencedError(FatalError):
    """A newer producer with the same ``transactional.id`` called ``init_transactions``.

    This instance can no longer commit; nothing of its open transaction is
    visible. Close it.
    """


class TransactionAbortedError(FatalError):
    """The record's transaction was aborted; it was never visible to any reader."""


class CommitFailedError(FatalError):
    """A consumer offset commit was refused: the member is not (or no longer) in the
    group's current generation, e.g. after a rebalance took its partitions away.

    Nothing was committed. Rejoin (the next ``poll`` does) and process again
    from the committed offsets.
    """


class UnknownMemberIdError(CommitFailedError):
    """The member id (or ``group.instance.id``) is not a member of the group (Kafka's
    UNKNOWN_MEMBER_ID): its session timed out, it left, or it never joined. Nothing was
    committed; join again."""


class StaleMemberEpochError(CommitFailedError):
    """A member of a consumer-type group (KIP-848) committed or fetched offsets with a member
    epoch that is not its current one (Kafka's STALE_MEMBER_EPOCH). Nothing was committed;
    heartbeat for the current epoch and try again."""


class UnsupportedVersionError(FatalError):
    """The request's API version cannot do what was asked (Kafka's UNSUPPORTED_VERSION), e.g.
    an OffsetCommit below v9 from a member of a consumer-type group."""


class InconsistentGroupProtocolError(FatalError):
    """The group's members use another protocol type, or no assignor (protocol) this member
    offers is one every member offers (Kafka's INCONSISTENT_GROUP_PROTOCOL): it cannot join."""


class FencedInstanceIdError(FatalError):
    """Another consumer joined the group with this consumer's ``group.instance.id``: this
    instance was replaced (KIP-345) and must stop. Close it."""


class RebalanceInProgressError(RetriableError):
    """The group is rebalancing and this member still owes its revocation; poll (which
    revokes and syncs) and try again."""


class NoOffsetForPartitionError(FatalError):
    """``auto.offset.reset=none`` and a partition has no usable committed offset."""


class OffsetOutOfRangeError(InvalidOffsetError):
    """A position lies outside the partition's log and ``auto.offset.reset=none``."""


class GroupNotEmptyError(FatalError):
    """A group operation that needs an empty group (reset-offsets, delete) found live members."""

    exit_code = 5


class GroupIdNotFoundError(FatalError):
    """The consumer group has neither members nor committed offsets."""

    exit_code = 6


class GroupSubscribedToTopicError(FatalError):
    """Deleting a group's offsets of a topic its live members are subscribed to (Kafka's
    GROUP_SUBSCRIBED_TO_TOPIC, KIP-496): stop them or let them unsubscribe first."""

    exit_code = 5


class PartiallyCommittedError(FatalError):
    """Some records of one request were committed and the rest were not (the message says
    which were). Sending all of them again would duplicate the committed ones."""

    exit_code = 7


class UnexpectedError(FatalError):
    """A failure lakelog did not anticipate (a bug, or a library it uses failing); the
    message names the original exception's type."""


class ForeignRowsWarning(UserWarning):
    """The log table holds rows that did not come through lakelog's commit path (a plain
    Delta append into it): they are left out of every read and never move an offset."""


# Errors raised inside Spark tasks (``raise_error``) cross the JVM as text;
# this marker lets the driver turn them back into the right class.
_MARKER = "[lakelog:"


def marked(error_class: type[LakelogError], message: str) -> str:
    """Text for Spark's ``raise_error`` that :func:`error_from_text` maps back to ``error_class``."""
    return f"{_MARKER}{error_class.__name__}] {message}"


def error_from_text(text: str) -> LakelogError | None:
    """The LakelogError a :func:`marked` message inside ``text`` names, if any."""
    start = text.find(_MARKER)
    if start < 0:
        return None
    end = text.find("]", start)
    name = text[start + len(_MARKER) : end]
    message = text[end + 1 :].strip().splitlines()[0] if end > 0 else text
    # Spark appends the SQL state of raise_error() to the message it carries.
    message = re.sub(r"\s*SQLSTATE: \w+\s*$", "", message)
    for cls in [LakelogError, *_all_subclasses(LakelogError)]:
        if cls.__name__ == name:
            return cls(message)
    return None


def _all_subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found


_FULL = {errno.ENOSPC, errno.EDQUOT}
_REFUSED = {errno.EROFS, errno.EACCES, errno.EPERM}
# delta-rs (object_store) reports an OS error as text ending in "(os error N)",
# coloured and spread over lines.
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(text: str, limit: int = 500) -> str:
    """``text`` as one line: colour codes and delta-rs' arrows removed, lines joined by ": "."""
    lines = [line.strip().lstrip("\u21b3").strip() for line in _ANSI.sub("", text).splitlines()]
    joined = ": ".join(line for line in lines if line)
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def error_for_os_error(exc: OSError, what: str) -> StoreError:
    """The StoreError for an OSError that ended ``what`` ("maintain", "creating a store at X"):
    StoreFullError for no space (ENOSPC, EDQUOT), StoreAccessError for a read-only file
    system or a permission denied (EROFS, EACCES, EPERM), else StoreError. The message is
    one line naming the file when the error does."""
    code = exc.errno
    if code is None:
        found = _RUST_OS_ERROR.search(str(exc))
        code = int(found.group(1)) if found else None
    if exc.strerror and exc.errno is not None:
        reason = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    else:
        reason = one_line(str(exc)) or (os.strerror(code) if code else type(exc).__name__)
    message = f"{what} failed: {reason}"
    if code in _FULL:
        return StoreFullError(message)
    if code in _REFUSED:
        return StoreAccessError(message)
    return StoreError(message)


def error_for_exception(exc: BaseException, what: str, message: str | None = None) -> LakelogError:
    """The error the CLI reports when ``exc`` ended ``what``: ``exc`` itself if it is a
    LakelogError, the LakelogError a Spark task marked in its text (:func:`marked`), a
    StoreError for an OSError (:func:`error_for_os_error`), else an UnexpectedError
    "<type>: <first line>". ``message`` is the text to use instead of ``str(exc)`` (a
    JVM exception's own message rather than Py4J's call trace)."""
    if isinstance(exc, LakelogError):
        return exc
    text = str(exc) if message is None else message
    carried = error_from_text(text)
    if carried is not None:
        return carried
    if isinstance(exc, OSError):
        return error_for_os_error(exc, what)
    first = next((line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()), "")
    return UnexpectedError(f"{type(exc).__name__}: {first[:500]}" if first else type(exc).__name__)
