"""A full or read-only store ends a commit with a fatal, named error; other I/O errors stay retriable."""

from __future__ import annotations

import errno

import pytest

from lakelog.engine.commit import Committer, DataWriteError, TableLog
from lakelog.engine.commit.committer import write_failure
from lakelog.engine.errors import FatalError, RetriableError, StoreAccessError, StoreFullError
from lakelog.store import Store
from tests.engine.test_commit_loop import FAST, T0, batch, check_store, data_files


@pytest.mark.parametrize(
    ("code", "expected", "kind"),
    [
        (errno.ENOSPC, StoreFullError, FatalError),
        (errno.EDQUOT, StoreFullError, FatalError),
        (errno.EROFS, StoreAccessError, FatalError),
        (errno.EACCES, StoreAccessError, FatalError),
        (errno.EIO, DataWriteError, RetriableError),
    ],
)
def test_write_failure_keeps_fatal_storage_refusals_apart_from_retriable_ones(code, expected, kind):
    error = write_failure(OSError(code, "refused", "/s/_delta_log/00000000000000000003.json"), "writing commit 3")
    assert type(error) is expected and isinstance(error, kind)
    assert "writing commit 3" in str(error) and "nothing was committed" in str(error)


@pytest.mark.parametrize("where", ["data", "commit"])
def test_a_full_disk_fails_the_append_at_once_and_leaves_nothing(tmp_path, where):
    uri = str(tmp_path / "store")
    Store.open(uri).create_topic("t", partitions=2)
    committer = Committer(TableLog(uri), "w")
    version = committer.log.latest().version
    calls = []

    def full(*args, **kwargs):
        calls.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "data":  # the rows' writer and the one writing a batch's file from its columns
        committer._files.write = full  # type: ignore[method-assign]
        committer._files.write_records = full  # type: ignore[method-assign]
    else:
        committer.log.files.put_commit = full  # type: ignore[method-assign]
    with pytest.raises(StoreFullError, match="No space left on device"):
        committer.append(batch(T0, ["a", "b"]), FAST)
    assert len(calls) == 1  # not retried: a full store does not empty itself between attempts
    assert TableLog(uri).latest().version == version
    assert data_files(uri) == set()  # the data file written before the commit failed was deleted
    assert check_store(uri) == {}
