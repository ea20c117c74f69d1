"""Produce answers encoded without kio's generic writer are byte for byte what kio writes."""

from __future__ import annotations

import datetime as dt
import io
import logging
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from lakelog.kafka_endpoint.messages import build, encode_response, response_class
from lakelog.kafka_endpoint.produce import succeeded_response
from lakelog.kafka_endpoint.produce_encoding import produce_response_body
from lakelog.kafka_endpoint.unexpected_errors import UnexpectedErrors

PRODUCE = 0


def _kio_frame(version: int, correlation_id: int, body) -> bytes:
    """What kio writes: the response header and body, size first."""
    schema = response_class(PRODUCE, version)
    out = io.BytesIO()
    entity_writer(schema.__header_schema__)(out, build(schema.__header_schema__, correlation_id=correlation_id))
    entity_writer(schema)(out, body)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


partitions = st.lists(
    st.fixed_dictionaries(
        {
            "index": st.integers(0, 2**31 - 1),
            "error_code": st.sampled_from(
                [ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.corrupt_message]
            ),
            "base_offset": st.integers(-1, 2**63 - 1),
            "log_start_offset": st.integers(-1, 2**40),
        }
    ),
    max_size=4,
)
topics = st.lists(
    st.fixed_dictionaries({"name": st.text(min_size=1, max_size=140), "partition_responses": partitions}),
    max_size=3,
)


@settings(max_examples=300)
@given(version=st.integers(3, 9), correlation_id=st.integers(-(2**31), 2**31 - 1), responses=topics)
def test_an_answer_is_encoded_as_kio_encodes_it(version, correlation_id, responses):
    body = build(response_class(PRODUCE, version), responses=responses)
    assert produce_response_body(version, body) is not None  # the fast path took it
    assert encode_response(PRODUCE, version, correlation_id, body) == _kio_frame(version, correlation_id, body)


def test_answers_of_another_shape_are_left_to_kio_and_still_encoded_as_it_encodes_them():
    part = {"index": 0, "error_code": ErrorCode.none, "base_offset": 5}
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    shapes = [
        (9, {"responses": [{"name": "t", "partition_responses": [{**part, "log_append_time": when}]}]}),
        (8, {"responses": [{"name": "t", "partition_responses": [{**part, "error_message": "no"}]}]}),
        (
            9,
            {
                "responses": [
                    {
                        "name": "t",
                        "partition_responses": [
                            {**part, "record_errors": [{"batch_index": 1, "batch_index_error_message": "bad"}]}
                        ],
                    }
                ]
            },
        ),
        (5, {"responses": [], "throttle_time": dt.timedelta(milliseconds=30)}),
    ]
    for version, values in shapes:
        body = build(response_class(PRODUCE, version), **values)
        assert produce_response_body(version, body) is None
        assert encode_response(PRODUCE, version, 7, body) == _kio_frame(version, 7, body)


succeeded_topics = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=40),
        st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=200)
@given(version=st.integers(3, 9), answered=succeeded_topics)
def test_an_answer_in_which_every_partition_succeeded_is_what_build_makes_of_it(version, answered):
    responses = [
        {
            "name": name,
            "partition_responses": [
                {"index": i, "error_code": ErrorCode.none, "base_offset": base, "log_start_offset": -1}
                for i, base in parts
            ],
        }
        for name, parts in answered
    ]
    made = succeeded_response(version, answered)
    assert made == build(response_class(PRODUCE, version), responses=responses)
    assert encode_response(PRODUCE, version, 7, made) == _kio_frame(version, 7, made)


def test_a_produce_answer_with_an_unexpected_error_is_still_logged_and_one_without_none_is(caplog):
    noted = UnexpectedErrors()
    fine = succeeded_response(9, [("t", [(0, 5), (1, 7)])])
    failed = build(
        response_class(PRODUCE, 9),
        responses=[
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "error_code": ErrorCode.none, "base_offset": 5},
                    {"index": 1, "error_code": ErrorCode.corrupt_message, "base_offset": -1, "error_message": "crc"},
                ],
            }
        ],
    )
    with caplog.at_level(logging.WARNING, logger="lakelog.kafka_endpoint.server"):
        assert noted.note("p", PRODUCE, 9, fine, "peer") == 0
        assert noted.note("p", PRODUCE, 9, failed, "peer") == 1
    assert [r.getMessage() for r in caplog.records] == [
        "answered CORRUPT_MESSAGE (2) to client 'p' at peer: produce (key 0) v9: crc"
    ]
