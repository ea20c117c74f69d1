"""A placed batch's file written straight from its columns (PlacedBatch.write_unsynced, the agent's
produce groups) is the file DataFileWriter.write makes of the rows build() gives: the same bytes,
statistics, add action and renumbering position, its records numbered the same. Batches it does
not write (several partitions, headers, LogAppendTime, a store that is not local) are left to
the rows. No Spark."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakelog.engine.commit.data_files import DataFileWriter
from lakelog.engine.produce.placement import PlacedBatch, RecordProducers, join_placed, place_partition_records
from lakelog.engine.topics import TopicMetadata, TopicPartition
from tests.states import state_with
from tests.written_files import written_both_ways

T = TopicMetadata("t", "id-t", 2, {})
STAMPED = TopicMetadata("s", "id-s", 1, {"message.timestamp.type": "LogAppendTime"})
VIEW = state_with([T, STAMPED])


def _values(n: int) -> pa.Array:
    # ProducerPerformance's payloads (random upper-case letters), the same for the same n.
    letters = np.random.default_rng(n)
    return pa.array([bytes(letters.integers(65, 91, 100, dtype=np.uint8)) for _ in range(n)], pa.binary())


def _placed(n: int, *, keys: pa.Array | None = None, values: pa.Array | None = None, partition: int = 0, headers=None):
    stamps = np.arange(n, dtype=np.int64) * 3 + 1_700_000_000_123
    return place_partition_records(
        VIEW,
        "t",
        partition,
        keys if keys is not None else pa.nulls(n, pa.binary()),
        values if values is not None else _values(n),
        headers,
        stamps,
    )


def _producers(n: int) -> RecordProducers:
    ids = np.where(np.arange(n) < n // 2, 4711, -1).astype(np.int64)  # an idempotent request, then a plain one
    return RecordProducers(ids, np.zeros(n, dtype=np.int32), np.arange(n, dtype=np.int32) % 300)


CASES = {
    "producer-perf": lambda: PlacedBatch(join_placed([_placed(148) for _ in range(5)]), None, producer_id=7),
    "keys, some null": lambda: PlacedBatch(
        _placed(300, keys=pa.array([None if i % 4 == 0 else f"k{i % 9}".encode() for i in range(300)])),
        None,
        base_sequence=41,
    ),
    "records of several producers": lambda: PlacedBatch(_placed(600), None, producers=_producers(600)),
    "values sliced out of a larger array": lambda: PlacedBatch(_placed(200, values=_values(500).slice(123, 200)), None),
    "one record, an empty value": lambda: PlacedBatch(_placed(1, values=pa.array([b""], pa.binary())), None),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
@pytest.mark.parametrize("first", [0, 1000, 2**40])
def test_the_file_written_from_the_columns_is_the_file_of_the_rows(tmp_path, case, first):
    tp = TopicPartition("t", 0)
    ends = {tp: first}
    files = DataFileWriter(str(tmp_path))
    direct, by_rows = CASES[case](), CASES[case]()
    got = written_both_ways(direct, by_rows, ends, VIEW.topics, files)
    assert direct.offsets is not None and np.array_equal(direct.offsets, by_rows.offsets)
    assert direct.log_append_time_ms == by_rows.log_append_time_ms == {}
    renumbered = files.renumber(got, first + 5)  # where renumbering finds the first offset
    assert renumbered.stats.min_offset == first + 5


def test_batches_it_does_not_write_are_left_to_the_rows(tmp_path):
    files = DataFileWriter(str(tmp_path))
    ends = {TopicPartition("t", 0): 0, TopicPartition("t", 1): 0}
    two_partitions = PlacedBatch(join_placed([_placed(3), _placed(3, partition=1)]), None)
    with_headers = PlacedBatch(_placed(3, headers=[[("h", b"1")], None, None]), None)
    stamped = PlacedBatch(
        place_partition_records(VIEW, "s", 0, pa.nulls(2, pa.binary()), _values(2), None, np.array([1, 2])), None
    )
    for batch in (two_partitions, with_headers, stamped):
        assert batch.write_unsynced(ends, VIEW.topics, files) is None
        assert batch.offsets is None  # nothing numbered
    large = PlacedBatch(_placed(9, values=pa.array([b"x" * (1 << 20)] * 9)), None)  # 9 MB: the rows stream
    assert large.write_unsynced(ends, VIEW.topics, files) is None and large.offsets is None
    remote = DataFileWriter(str(tmp_path))
    remote._local = False  # an object store: pyarrow's writer through fsspec, from the rows
    plain = PlacedBatch(_placed(3), None)
    assert plain.write_unsynced(ends, VIEW.topics, remote) is None and plain.offsets is None
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_file_that_cannot_be_written_leaves_nothing_and_numbers_nothing(tmp_path):
    blocker = tmp_path / "store"
    blocker.write_text("not a directory")
    batch = PlacedBatch(_placed(5), None)
    with pytest.raises(OSError):
        batch.write_unsynced({TopicPartition("t", 0): 0}, VIEW.topics, DataFileWriter(str(blocker)))
    assert batch.offsets is None
