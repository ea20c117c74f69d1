from __future__ import annotations

from lakelog.engine.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    FatalError,
    InvalidConfigError,
    LakelogError,
    RecordTooLargeError,
    RetriableError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    error_from_text,
    marked,
)


def test_the_three_outcomes_are_distinct():
    assert issubclass(CommitConflictError, RetriableError)
    assert not issubclass(CommitStateUnknownError, RetriableError | FatalError)
    assert issubclass(RecordTooLargeError, FatalError)
    codes = {RetriableError.exit_code, CommitStateUnknownError.exit_code, FatalError.exit_code}
    assert len(codes) == 3
    assert TopicExistsError.exit_code != UnknownTopicOrPartitionError.exit_code
    assert InvalidConfigError.exit_code == 2


def test_marked_messages_come_back_as_their_class():
    text = "Job aborted: [USER_RAISED_EXCEPTION] " + marked(RecordTooLargeError, "a record of 9 bytes") + "\n\tat x"
    error = error_from_text(text)
    assert isinstance(error, RecordTooLargeError)
    assert str(error) == "a record of 9 bytes"
    assert error_from_text("plain failure") is None
    assert isinstance(error_from_text(marked(LakelogError, "x")), LakelogError)
