"""The commit core: the one way lakelog writes the log table's Delta log.

* :mod:`engine.commit.actions` -- typed Delta actions, the one encoder/decoder of commit files;
* :mod:`engine.commit.log_files` -- the ``_delta_log`` directory: commit files (put-if-absent),
  checksums, the checkpoint hint, listings and the faults they show; nothing else reads or
  writes them;
* :mod:`engine.commit.delta_table` -- delta-rs loads that outlast listing races and read past a
  lost checkpoint;
* :mod:`engine.commit.state` / :mod:`engine.commit.follower` -- the table at a version, followed
  commit by commit;
* :mod:`engine.commit.markers` -- the per-partition facts kept as Delta app transactions (end
  and start offsets, lost and aborted ranges, reservation slots);
* :mod:`engine.commit.conflicts` -- what a commit does when another took its version (pure);
* :mod:`engine.commit.reservations` -- offsets claimed before a long write's files exist (the
  last stable offset readers wait at), planned and judged purely;
* :mod:`engine.commit.data_files` / :mod:`engine.commit.partition_reader` -- the log table's
  Parquet data files: written with their offsets and statistics, read back a partition's
  offset range at a time (the committer reads partitions whose files lack statistics;
  consumers, ``lakelog serve`` and the Spark source read records with it);
* :mod:`engine.commit.committer` -- the loop (plan, write files, put, rebase or re-plan,
  settle a lost response, post-commit hooks), reserved appends (reserve, write, fill or
  abort) and table creation;
* :mod:`engine.commit.checkpoints` -- checkpoints written on a background thread, checked
  against the commits: the newest version asked for, paced; :mod:`engine.commit.checkpoint_extension`
  makes one from the previous checkpoint and the commits since when they only add files and
  set transactions, delta-rs writes the others;
* :mod:`engine.commit.checksum`, :mod:`engine.commit.features`, :mod:`engine.commit.info`,
  :mod:`engine.commit.retry` -- checksums, supported table features, commitInfo, retry policy.

delta-rs (``deltalake``) reconstructs snapshots from checkpoints, writes
checkpoints, lists what VACUUM may delete and cleans up expired log files;
every commit (VACUUM's START and END included) is lakelog's
because offsets are inside the data files: a conflict that moves a
partition's end offset needs new files, not a retry of the same actions
(see the README's "Guarantees" section and the commit-core notes).
"""

from __future__ import annotations

from lakelog.engine.commit.checkpoints import wait_for_checkpoints
from lakelog.engine.commit.committer import (
    AppendBatch,
    AppendResult,
    AppTransaction,
    Committer,
    DataWriteError,
    MaintenanceChange,
    TopicChange,
    check_attempt,
    create_table,
)
from lakelog.engine.commit.follower import TableLog, is_delta_table, normalize_uri
from lakelog.engine.commit.retry import RetryPolicy, retries_exhausted
from lakelog.engine.commit.state import TableState

__all__ = [
    "AppTransaction",
    "AppendBatch",
    "AppendResult",
    "Committer",
    "DataWriteError",
    "MaintenanceChange",
    "RetryPolicy",
    "TableLog",
    "TableState",
    "TopicChange",
    "check_attempt",
    "create_table",
    "is_delta_table",
    "normalize_uri",
    "retries_exhausted",
    "wait_for_checkpoints",
]
