"""Placing records column-wise (the sink, send_batch) exactly as the producer places them one by one."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.engine.commit import TableState
from lakelog.engine.errors import (
    InvalidRecordError,
    InvalidTopicError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from lakelog.engine.produce.batches import ProducerBatch, RecordBatch
from lakelog.engine.produce.partitioner import KeylessPartitioner
from lakelog.engine.produce.placement import RECORD_SCHEMA, PlacedBatch, PlacedRecords, outgoing_record, place_records
from lakelog.engine.topics import TopicMetadata, TopicPartition
from tests.states import state_with

NOW_S = 1_700_000_000.123
A = TopicMetadata("a", "id-a", 3, {"max.message.bytes": 40})
B = TopicMetadata("b", "id-b", 2, {"message.timestamp.type": "LogAppendTime"})
VIEW = state_with([A, B])
# Views a commit may meet after the records were placed: a topic shrank, got a
# smaller max.message.bytes, or was deleted.
LATER_VIEWS = [
    VIEW,
    state_with([TopicMetadata("a", "id-a", 2, {"max.message.bytes": 40}), B], 2),
    state_with([TopicMetadata("a", "id-a", 3, {"max.message.bytes": 12}), B], 2),
    state_with([A], 2),
]


def reference_place(
    view: TableState, tables: list[pa.Table], new_keyless: Callable[[], KeylessPartitioner] = KeylessPartitioner
) -> RecordBatch:
    """The sink's placement before it was vectorized: one producer conversion per record."""
    batch = RecordBatch()
    keyless = new_keyless()
    sequence = 0
    for table in tables:
        columns = [table.column(name).to_pylist() for name in RECORD_SCHEMA.names]
        for topic, partition, key, value, headers, timestamp_ms in zip(*columns, strict=True):
            if topic is None:
                raise InvalidTopicError("a record has a null topic (set option('topic', ...) or fill the column)")
            pairs = None if headers is None else [(h["key"], h["value"]) for h in headers]
            record = outgoing_record(
                topic,
                view.topics.get(topic),
                value,
                key,
                partition,
                pairs,
                timestamp_ms,
                keyless=keyless,
                ignore_keys=False,
            )
            if record.error is not None:
                raise record.error
            batch.add(
                TopicPartition(topic, record.partition),
                record.key,
                record.value,
                record.headers,
                record.timestamp_ms,
                record.size,
                sequence,
            )
            sequence += 1
    batch.place()
    return batch


def reference_prepare(records: RecordBatch, view: TableState) -> dict[TopicPartition, int]:
    """The old SinkBatch.prepare: ProducerBatch's per-record refusals, the first one raised."""
    counts = ProducerBatch(records, -1).prepare(view)
    if records.record_errors:
        raise records.record_errors[min(records.record_errors)]
    return counts


def outcome(run: Callable[[], Any]) -> tuple:
    try:
        return ("placed", run())
    except Exception as exc:  # the outcome compared: which error, with which message
        return ("refused", type(exc), str(exc))


def assert_same_records(placed: PlacedRecords, reference: RecordBatch) -> None:
    assert placed.tps == reference.tps
    assert placed.tp_ids.tolist() == reference.tp_ids.tolist()
    assert placed.keys.to_pylist() == reference.keys
    assert placed.values.to_pylist() == reference.values
    headers = [None if h is None else [(p["key"], p["value"]) for p in h] for h in placed.headers.to_pylist()]
    assert headers == reference.headers
    assert placed.timestamps_ms.tolist() == reference.timestamps.tolist()
    assert placed.sizes.tolist() == reference.sizes.tolist()
    assert reference.sequences.tolist() == list(range(len(reference)))


def compare(
    tables: list[pa.Table], later: TableState, new_keyless: Callable[[], KeylessPartitioner] = KeylessPartitioner
) -> tuple:
    """Place ``tables`` both ways; check they agree on everything, including the
    rows written and what a commit at ``later`` refuses. Returns the outcome."""
    with (
        mock.patch("time.time", return_value=NOW_S),
        mock.patch("lakelog.engine.produce.placement.KeylessPartitioner", new_keyless),
    ):
        new = outcome(lambda: place_records(VIEW, tables))
        old = outcome(lambda: reference_place(VIEW, tables, new_keyless))
    assert new[0] == old[0], (new, old)
    if new[0] == "refused":
        assert new == old
        return new
    placed, reference = new[1], old[1]
    assert_same_records(placed, reference)
    if not len(placed):
        return new
    ends = {tp: 5 * i for i, tp in enumerate(sorted(placed.tps))}
    rows = PlacedBatch(placed, None).build(ends, VIEW.topics, 4242)
    expected = ProducerBatch(reference, -1).build(ends, VIEW.topics, 4242)
    assert rows.equals(expected), (rows.to_pylist(), expected.to_pylist())
    prepared = outcome(lambda: PlacedBatch(placed, None).prepare(later))
    assert prepared == outcome(lambda: reference_prepare(reference, later))
    return new


def tables_of(rows: list[dict], cuts: list[int], pad: int) -> list[pa.Table]:
    """The rows as several tables; with ``pad``, the first is a slice of a larger table."""
    bounds = sorted({0, len(rows), *(c for c in cuts if 0 < c < len(rows))})
    tables = [pa.Table.from_pylist(rows[lo:hi], schema=RECORD_SCHEMA) for lo, hi in itertools.pairwise(bounds)]
    if pad and tables:
        filler = [{"topic": "x", "key": b"pad" * pad, "value": b"pad", "headers": [{"key": "p", "value": None}]}] * pad
        padded = pa.Table.from_pylist(filler + tables[0].to_pylist() + filler, schema=RECORD_SCHEMA)
        tables[0] = padded.slice(pad, tables[0].num_rows)
    return tables


header_keys = st.text(alphabet="hé", max_size=3)  # é: sizes count UTF-8 bytes
small_headers = st.one_of(
    st.none(),
    st.lists(
        st.fixed_dictionaries({"key": header_keys, "value": st.one_of(st.none(), st.binary(max_size=4))}), max_size=2
    ),
)


@st.composite
def valid_rows(draw: st.DrawFn) -> dict:
    """A record the topics accept (at most 38 bytes: A's limit is 40)."""
    topic = draw(st.sampled_from(["a", "b"]))
    return {
        "topic": topic,
        "partition": draw(st.one_of(st.none(), st.none(), st.integers(0, VIEW.topics[topic].partitions - 1))),
        "key": draw(
            st.one_of(st.none(), st.sampled_from([b"", b"k1", b"key-2", b"a-longer-k"[:8]]), st.binary(max_size=8))
        ),
        "value": draw(st.one_of(st.none(), st.binary(max_size=10))),
        "headers": draw(small_headers),
        "timestamp_ms": draw(st.one_of(st.none(), st.integers(0, 2**41))),
    }


any_rows = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["a", "a", "a", "b", "b", "c", None]),
        "partition": st.one_of(st.none(), st.none(), st.integers(-1, 3)),
        "key": st.one_of(st.none(), st.binary(max_size=20)),
        "value": st.one_of(st.none(), st.binary(max_size=25), st.binary(min_size=30, max_size=40)),
        "headers": st.one_of(
            small_headers,
            st.lists(
                st.one_of(
                    st.none(), st.fixed_dictionaries({"key": st.one_of(st.none(), header_keys), "value": st.none()})
                ),
                max_size=2,
            ),
        ),
        "timestamp_ms": st.sampled_from([None, None, None, None, 0, 1_700_000_000_000, 2**41, -1]),
    }
)


@settings(max_examples=300)
@given(
    rows=st.lists(valid_rows(), max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=3),
    pad=st.integers(0, 2),
    later=st.sampled_from(LATER_VIEWS),
)
def test_accepted_records_are_placed_and_written_as_record_by_record(rows, cuts, pad, later):
    result = compare(tables_of(rows, cuts, pad), later)
    assert result[0] == "placed"


@settings(max_examples=400)
@given(
    rows=st.lists(any_rows, max_size=12),
    cuts=st.lists(st.integers(0, 12), max_size=2),
    pad=st.integers(0, 1),
    later=st.sampled_from(LATER_VIEWS),
)
def test_the_first_refused_record_gives_the_record_by_record_error(rows, cuts, pad, later):
    compare(tables_of(rows, cuts, pad), later)


@settings(max_examples=150)
@given(
    rows=st.lists(valid_rows(), max_size=40),
    switch_records=st.integers(1, 4),
    switch_bytes=st.integers(1, 60),
)
def test_keyless_runs_that_switch_draw_the_counter_in_record_order(rows, switch_records, switch_bytes):
    # The sink's partitioner never switches within a call (2**31 thresholds);
    # small ones exercise the run-by-run placement across interleaved topics.
    def small() -> KeylessPartitioner:
        return KeylessPartitioner(switch_records, switch_bytes)

    keyless_rows = [dict(row, partition=None, key=None) if i % 3 else row for i, row in enumerate(rows)]
    compare(tables_of(keyless_rows, [len(rows) // 2], 0), VIEW, small)


def table(*rows: dict) -> pa.Table:
    return pa.Table.from_pylist([{"topic": "a", "value": b"v", **row} for row in rows], schema=RECORD_SCHEMA)


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ([{}, {"topic": None}], InvalidTopicError, "null topic"),
        ([{"topic": "c"}, {"topic": None}], UnknownTopicOrPartitionError, "topic 'c' does not exist"),
        ([{"partition": 3}, {"topic": "c"}], UnknownTopicOrPartitionError, "partition 3 of topic 'a'"),
        ([{"value": b"x" * 41}, {"partition": -1}], RecordTooLargeError, "record of 41 bytes"),
        ([{"headers": [{"key": None, "value": b"x"}]}], InvalidRecordError, "header key must be str"),
        ([{"timestamp_ms": -1, "topic": "c"}], InvalidRecordError, r"timestamp -1: a timestamp must lie in \[0, "),
        ([{}, {"timestamp_ms": -2}], InvalidRecordError, r"timestamp -2: a timestamp must lie in \[0, "),
    ],
)
def test_the_first_refused_record_in_row_order_decides_the_error(rows, error, message):
    with pytest.raises(error, match=message):
        place_records(VIEW, [table(*rows[:1]), table(*rows[1:])])


def test_a_record_at_the_size_limit_is_accepted_and_headers_count_utf8_bytes():
    at_limit = {"key": b"k" * 10, "value": b"v" * 25, "headers": [{"key": "é", "value": b"hi"}, {"key": "x"}]}
    placed = place_records(VIEW, [table(at_limit)])
    assert placed.sizes.tolist() == [10 + 25 + 2 + 2 + 1]
    with pytest.raises(RecordTooLargeError, match="record of 41 bytes"):
        place_records(VIEW, [table(dict(at_limit, value=b"v" * 26))])


def test_keyless_records_of_each_topic_stick_to_one_partition_drawn_in_order_of_first_appearance():
    rows = [{"topic": "b"}, {"topic": "a"}, {"topic": "b"}, {"topic": "a", "key": b"k"}, {"topic": "a"}]
    placed = place_records(VIEW, [table(*rows)])
    partitions = [placed.tps[i].partition for i in placed.tp_ids]
    # The counter gives 0 to b (first keyless record) and 1 to a.
    assert partitions[0] == partitions[2] == 0
    assert partitions[1] == partitions[4] == 1


def test_no_records_place_nothing():
    assert len(place_records(VIEW, [])) == 0
    assert len(place_records(VIEW, [RECORD_SCHEMA.empty_table()])) == 0


def test_null_timestamps_become_now_and_the_sequence_is_the_row_number():
    with mock.patch("time.time", return_value=NOW_S):
        placed = place_records(VIEW, [table({"timestamp_ms": 7}, {}), table({"key": b"k"})])
    assert placed.timestamps_ms.tolist() == [7, int(NOW_S * 1000), int(NOW_S * 1000)]
    rows = PlacedBatch(placed, None).build({}, VIEW.topics, 0)
    assert sorted(rows.column("sequence").to_pylist()) == [0, 1, 2]
    assert set(rows.column("producer_id").to_pylist()) == {-1}


def test_records_placed_one_request_at_a_time_join_as_if_placed_together():
    """A Kafka client's batches name their partitions: each request's records, placed once when
    they were checked, join one placement equal to placing all their tables together."""
    from lakelog.engine.produce.placement import columns_for_batch, join_placed

    tables = [
        columns_for_batch("a", [b"x", b"y"], [b"k", None], 2, None, [1, 2]),
        columns_for_batch("b", [b"z"], None, 1, [[{"key": "h", "value": b"1"}]], [3]),
        columns_for_batch("a", [b"w", b"v", b"u"], None, 0, None, [4, 5, 6]),
        columns_for_batch("a", [b"t"], None, 2, None, [7]),
    ]
    joined = join_placed([place_records(VIEW, [t]) for t in tables])
    together = place_records(VIEW, tables)
    assert joined.tps == together.tps == [TopicPartition("a", 2), TopicPartition("b", 1), TopicPartition("a", 0)]
    assert joined.tp_ids.tolist() == together.tp_ids.tolist() == [0, 0, 1, 2, 2, 2, 0]
    for name in ("keys", "values", "headers"):
        assert getattr(joined, name).to_pylist() == getattr(together, name).to_pylist()
    assert joined.timestamps_ms.tolist() == together.timestamps_ms.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert joined.sizes.tolist() == together.sizes.tolist()
    with pytest.raises(ValueError, match="no placed records"):
        join_placed([])


wire_records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=12),
        # A value that is not bytes (no Kafka client sends one): refused or converted as the table's.
        st.none() | st.binary(max_size=30) | st.text(max_size=3) | st.integers(0, 9),
        st.none() | st.lists(st.tuples(st.sampled_from(["h", "é", "trace-id"]), st.none() | st.binary(max_size=4))),
        st.sampled_from([0, 7, 1_700_000_000_000, -1, 253_402_300_800_000]),
    ),
    max_size=6,
)


@settings(max_examples=300)
@given(records=wire_records, topic=st.sampled_from(["a", "b", "c"]), partition=st.sampled_from([0, 2, 3, -1]))
def test_a_produce_requests_records_are_placed_as_their_table_would_be(records, topic, partition):
    """The agent's placement of a request's records (given partition, Kafka's wire types)
    equals placing :func:`columns_for_batch`'s table of them, refusals included."""
    from lakelog.engine.produce.placement import columns_for_batch, place_partition_records

    keys, values, headers, stamps = (list(column) for column in zip(*records, strict=True)) if records else ([],) * 4
    rows = [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers]
    general = outcome(lambda: place_records(VIEW, [columns_for_batch(topic, values, keys, partition, rows, stamps)]))
    ways = [outcome(lambda: place_partition_records(VIEW, topic, partition, keys, values, headers, stamps))]
    if all(v is None or isinstance(v, bytes) for v in values):
        # As the agent's record reader hands them over: Arrow columns, headers None when none has any.
        columns = (pa.array(keys, pa.binary()), pa.array(values, pa.binary()), np.array(stamps, dtype=np.int64))
        bare = None if all(h is None for h in headers) else headers
        ways.append(outcome(lambda: place_partition_records(VIEW, topic, partition, *columns[:2], bare, columns[2])))
    for fast in ways:
        assert fast[0] == general[0], (fast, general)
        if fast[0] == "refused":
            assert fast == general
            continue
        placed, expected = fast[1], general[1]
        assert placed.tps == expected.tps and placed.tp_ids.tolist() == expected.tp_ids.tolist()
        for name in ("keys", "values", "headers"):
            assert getattr(placed, name).type == getattr(expected, name).type
            assert getattr(placed, name).to_pylist() == getattr(expected, name).to_pylist()
        assert placed.timestamps_ms.tolist() == expected.timestamps_ms.tolist()
        assert placed.sizes.tolist() == expected.sizes.tolist()
