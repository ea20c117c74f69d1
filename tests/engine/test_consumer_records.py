"""``poll``'s records built column by column from the log table (no Spark): the same values a
record-by-record conversion gives, timestamps as int milliseconds across the whole range the
log table holds, headers only where a record has them."""

from __future__ import annotations

import pyarrow as pa

from lakelog.engine.consume.consumer import ConsumerRecord, records_of
from lakelog.engine.records import MAX_TIMESTAMP_MS
from lakelog.engine.schema import LOG_ARROW_SCHEMA


def log_rows(timestamps_ms: list[int], headers: list) -> pa.Table:
    n = len(timestamps_ms)
    return pa.Table.from_pydict(
        {
            "topic": ["t"] * n,
            "partition": [3] * n,
            "offset": list(range(10, 10 + n)),
            "timestamp": pa.array([ms * 1000 for ms in timestamps_ms], pa.int64()).cast(
                LOG_ARROW_SCHEMA.field("timestamp").type
            ),
            "timestamp_type": [i % 2 for i in range(n)],
            "key": [None if i % 3 == 0 else f"k{i}".encode() for i in range(n)],
            "value": [None if i % 4 == 0 else f"v{i}".encode() for i in range(n)],
            "headers": headers,
            "producer_id": [None] * n,
            "producer_epoch": [None] * n,
            "sequence": [None] * n,
        },
        schema=LOG_ARROW_SCHEMA,
    )


def one_by_one(table: pa.Table) -> list[tuple]:
    """The record-by-record conversion poll did before: a datetime per row, turned into ms."""
    return [
        (
            row["topic"],
            row["partition"],
            row["offset"],
            int(row["timestamp"].timestamp() * 1000),
            row["timestamp_type"],
            row["key"],
            row["value"],
            None if row["headers"] is None else [(h["key"], h["value"]) for h in row["headers"]],
        )
        for row in table.to_pylist()
    ]


def test_records_carry_int_milliseconds_over_the_whole_range_and_headers_where_sent():
    stamps = [0, 1, 999, 1_700_000_000_123, MAX_TIMESTAMP_MS]
    headers = [None, [], [{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None, [{"key": "c", "value": b""}]]
    table = log_rows(stamps, headers)
    records = records_of(table)
    assert [r.timestamp for r in records] == stamps
    assert all(type(r) is ConsumerRecord and type(r.timestamp) is int for r in records)
    assert [r.headers for r in records] == [None, [], [("a", b"1"), ("b", None)], None, [("c", b"")]]
    assert [tuple(r) for r in records] == one_by_one(table)
    assert records[2]._asdict()["offset"] == 12 and records[2].key == b"k2" and records[0].key is None


def test_records_without_headers_and_an_empty_poll():
    table = log_rows([5, 6, 7], [None, None, None])
    assert [tuple(r) for r in records_of(table)] == one_by_one(table)
    assert records_of(table.slice(0, 0)) == []


def test_a_store_round_trip_keeps_what_was_sent(plain_store):
    plain_store.create_topic("t", partitions=1)
    sent = [(b"k", b"a", 0, None), (None, b"b", MAX_TIMESTAMP_MS, [("h", b"x")]), (b"c", None, 1_234, None)]
    with plain_store.producer(linger_ms=0) as producer:
        for key, value, ms, headers in sent:
            producer.send("t", value, key=key, timestamp=ms, headers=headers).get()
    with plain_store.consumer(auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([("t", 0)])
        got = consumer.poll(timeout_ms=5000)
    assert [(r.key, r.value, r.timestamp, r.headers) for r in got] == sent
    assert [r.offset for r in got] == [0, 1, 2]
