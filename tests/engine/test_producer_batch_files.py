"""A producer batch's file written straight from its columns (ProducerBatch.write_unsynced, what
the committer writes ahead of its turn for Store.producer()) is the file DataFileWriter.write
makes of the rows build() gives: the same bytes, statistics and renumbering position, its records
numbered the same (what complete() reports). Batches it does not write (several partitions,
headers, LogAppendTime, a store that is not local) are left to the rows, nothing numbered. No
Spark."""

from __future__ import annotations

import pytest

from lakelog.engine.commit.data_files import DataFileWriter
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.topics import TopicMetadata, TopicPartition
from tests.states import state_with
from tests.written_files import written_both_ways

T = TopicMetadata("t", "id-t", 2, {"max.message.bytes": "200"})
STAMPED = TopicMetadata("s", "id-s", 1, {"message.timestamp.type": "LogAppendTime"})
VIEW = state_with([T, STAMPED])
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _batch(values, *, keys=None, tps=None, headers=None, next_sequences=None, producer=(7, 3)) -> ProducerBatch:
    records = RecordBatch()
    for i, value in enumerate(values):
        key = None if keys is None else keys[i]
        size = len(value or b"") + len(key or b"")
        records.add((tps or {}).get(i, T0), key, value, (headers or {}).get(i), 1_700_000_000_123 + 3 * i, size, i)
    records.place(next_sequences=next_sequences)
    batch = ProducerBatch(records, producer[0], None, producer[1])
    batch.prepare(VIEW)
    return batch


CASES = {
    "100 records, no keys": lambda: _batch([f"w0-{i}-payload".encode() for i in range(100)]),
    "keys, some null": lambda: _batch(
        [f"v{i}".encode() for i in range(300)], keys=[None if i % 4 == 0 else f"k{i % 9}".encode() for i in range(300)]
    ),
    "a record refused (too large) among them": lambda: _batch([b"x" * (500 if i == 3 else 10) for i in range(20)]),
    "sequences wrapping past 2**31 - 1": lambda: _batch(
        [b"v"] * 5, next_sequences={T0: 2**31 - 2}, producer=(2**40, 32_000)
    ),
    "one record, an empty value": lambda: _batch([b""]),
    "a null value (a tombstone)": lambda: _batch([None, b"v"], keys=[b"k", b"k"]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
@pytest.mark.parametrize("first", [0, 1000, 2**40])
def test_the_file_written_from_the_columns_is_the_file_of_the_rows(tmp_path, case, first):
    ends = {T0: first}
    files = DataFileWriter(str(tmp_path))
    direct, by_rows = CASES[case](), CASES[case]()
    got = written_both_ways(direct, by_rows, ends, VIEW.topics, files)
    direct.complete()
    by_rows.complete()
    count = len(direct.records)
    offsets = [direct.records.offsets[i] for i in range(count)]
    assert offsets == [by_rows.records.offsets[i] for i in range(count)]
    accepted = [o for o in offsets if o >= 0]
    assert accepted == list(range(first, first + got.stats.num_records))  # dense, in send order
    renumbered = files.renumber(got, first + 5)  # where renumbering finds the first offset
    assert renumbered.stats.min_offset == first + 5


def test_number_gives_the_offsets_build_gives_without_the_rows(tmp_path):
    batch = _batch([b"a", b"b", b"c"])
    files = DataFileWriter(str(tmp_path))
    (written,) = batch.write_unsynced({T0: 10}, VIEW.topics, files)
    # Another appender moved the end: the turn renumbers the file and the records.
    assert list(batch.number({T0: 12})) == [12, 13, 14]
    files.renumber(written, 12)
    batch.complete()
    assert [batch.records.offsets[i] for i in range(3)] == [12, 13, 14]
    # build() after write_unsynced still gives the rows, numbered from the ends it is given.
    rows = batch.build({T0: 20}, VIEW.topics, 0)
    assert rows.column("offset").to_pylist() == [20, 21, 22]
    assert rows.column("value").to_pylist() == [b"a", b"b", b"c"]


def test_batches_it_does_not_write_are_left_to_the_rows(tmp_path):
    files = DataFileWriter(str(tmp_path))
    ends = {T0: 0, T1: 0, TopicPartition("s", 0): 0}
    two_partitions = _batch([b"a", b"b"], tps={1: T1})
    with_headers = _batch([b"a", b"b"], headers={0: [("h", b"1")]})
    stamped = _batch([b"a"], tps={0: TopicPartition("s", 0)})
    all_refused = _batch([b"x" * 500])
    for batch in (two_partitions, with_headers, stamped, all_refused):
        assert batch.write_unsynced(ends, VIEW.topics, files) is None
        assert (batch._offsets == -1).all()  # nothing numbered
    remote = DataFileWriter(str(tmp_path))
    remote._local = False  # an object store: pyarrow's writer through fsspec, from the rows
    plain = _batch([b"a"])
    assert plain.write_unsynced(ends, VIEW.topics, remote) is None and (plain._offsets == -1).all()
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_file_that_cannot_be_written_leaves_nothing_and_numbers_nothing(tmp_path):
    blocker = tmp_path / "store"
    blocker.write_text("not a directory")
    batch = _batch([b"a", b"b"])
    with pytest.raises(OSError):
        batch.write_unsynced({T0: 0}, VIEW.topics, DataFileWriter(str(blocker)))
    assert (batch._offsets == -1).all()
