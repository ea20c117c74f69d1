"""Log compaction against a simple model of Kafka's guarantees (hypothesis).

Files are real Parquet files written and rewritten by the code maintenance
runs (:func:`compaction.rewrite.run_compact`); only the Delta commit is left
out (tested in test_maintenance.py).
"""

from __future__ import annotations

import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lakelog.compaction.files import LiveFile
from lakelog.compaction.rewrite import CompactTask, run_compact
from lakelog.engine.commit.data_files import DataFileWriter
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.schema import LOG_ARROW_SCHEMA
from lakelog.engine.topics import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_000_000
RETENTION = 1000

keys = st.one_of(st.sampled_from([b"a", b"b", b"c", b"d", b""]), st.none())
values = st.one_of(st.binary(min_size=1, max_size=3), st.none())
record = st.tuples(keys, values, st.booleans())  # key, value (None: tombstone), header present
log_files = st.lists(
    st.tuples(st.lists(record, min_size=1, max_size=6), st.sampled_from([NOW - 5000, NOW - 10, NOW])),
    min_size=1,
    max_size=6,
)


def write_files(root: str, spec) -> list[tuple[LiveFile, list[dict]]]:
    writer = DataFileWriter(root)
    out, offset = [], 0
    for rows, written in spec:
        records = [
            {
                "topic": "t",
                "partition": 0,
                "offset": offset + i,
                "timestamp": 1_000 * (offset + i),
                "timestamp_type": 0,
                "key": k,
                "value": v,
                "headers": [{"key": "h", "value": b"1"}] if h else None,
                "producer_id": 7,
                "producer_epoch": 0,
                "sequence": offset + i,
            }
            for i, (k, v, h) in enumerate(rows)
        ]
        stored = [{**r, "timestamp": r["timestamp"] * 1000} for r in records]  # ms -> the column's µs
        table = pa.Table.from_pylist(stored, schema=LOG_ARROW_SCHEMA)
        (data_file,) = writer.write(table, modification_time_ms=written)
        s = data_file.stats
        out.append((LiveFile(s.path, TP, 100, len(rows), s.min_offset, s.max_offset, NOW, written), records))
        offset += len(rows)
    return out


def replay(records: list[dict]) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for r in records:
        if r["key"] is None:
            continue
        if r["value"] is None:
            state.pop(r["key"], None)
        else:
            state[r["key"]] = r["value"]
    return state


def as_rows(table: pa.Table) -> list[dict]:
    rows = table.to_pylist()
    for r in rows:
        r["timestamp"] = int(r["timestamp"].timestamp() * 1000)
    return rows


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(spec=log_files, cleanable=st.integers(0, 5), splits=st.lists(st.booleans(), min_size=6, max_size=6))
# An expired tombstone whose key still has an older value as some file's first record.
@example(
    spec=[
        ([(b"a", b"1", False), (b"b", b"1", False)], NOW - 5000),
        ([(b"b", b"2", False), (b"a", None, False)], NOW - 5000),
        ([(b"c", b"1", False)], NOW),
    ],
    cleanable=2,
    splits=[True] * 6,
)
def test_compaction_keeps_kafkas_guarantees(spec, cleanable, splits):
    cleanable_count = min(cleanable, len(spec) - 1)  # the newest file is always active
    with tempfile.TemporaryDirectory() as root:
        written = write_files(root, spec)
        bins: list[list[int]] = []  # file indexes of the cleanable prefix, grouped
        for i in range(cleanable_count):
            if not bins or splits[i]:
                bins.append([])
            bins[-1].append(i)
        task_bins = tuple(tuple(written[i][0] for i in b) for b in bins)
        result = run_compact(CompactTask(root, TP, task_bins, NOW, RETENTION))
        assert len(result.added) == len(result.bins)
        new_file = {b[0].path: added for b, added in zip(result.bins, result.added, strict=True)}
        reader = PartitionReader(root)
        original = [r for _, rows in written for r in rows]
        compacted, removed_total = [], 0
        groups = [*bins, *([i] for i in range(cleanable_count, len(written)))]
        for group in groups:
            rows = [r for i in group for r in written[i][1]]
            first = written[group[0]][0]
            if first.path in new_file:
                new = new_file[first.path]
                kept = as_rows(reader.read_file(new.stats.path))
                assert new.stats.min_offset == first.min_offset, "a bin keeps its first record"
                assert new.add.data_change
                newest = max(written[i][0].modification_time_ms for i in group)
                assert new.add.modification_time == newest, "a rewrite keeps its sources' written time"
                removed_total += len(rows) - len(kept)
            else:
                kept = [{k: v for k, v in r.items() if k not in ("topic", "partition")} for r in rows]
            compacted += kept
        assert removed_total == result.records_removed

    by_offset = {r["offset"]: r for r in original}
    offsets = [r["offset"] for r in compacted]
    assert offsets == sorted(set(offsets)), "order never changes"
    for r in compacted:  # offsets and contents never change
        expected = {k: v for k, v in by_offset[r["offset"]].items() if k not in ("topic", "partition")}
        assert r == expected
    # A reader from the start ends with the same state: latest value of every key, no resurrection.
    assert replay(compacted) == replay(original)

    region = [r for _, rows in written[:cleanable_count] for r in rows]
    latest = {}
    for r in region:
        if r["key"] is not None:
            latest[r["key"]] = r["offset"]
    firsts = {written[b[0]][1][0]["offset"] for b in bins}
    written_at = {r["offset"]: w for (_, w), (_, rows) in zip(spec, written, strict=True) for r in rows}
    kept = set(offsets)
    for r in region:
        o = r["offset"]
        if r["key"] is None or o in firsts:
            assert o in kept
        elif latest[r["key"]] != o:
            assert o not in kept, "a superseded record in the cleanable prefix is removed"
        elif r["value"] is not None or written_at[o] + RETENTION > NOW:
            assert o in kept, "the latest value, and a tombstone within delete.retention.ms, stay"
    outside = [r["offset"] for _, rows in written[cleanable_count:] for r in rows]
    assert kept.issuperset(outside)
