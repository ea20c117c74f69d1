"""kafka_endpoint.messages.build: responses of any version from plain values, refusing names no
version of the message has (a misspelt field would otherwise vanish from every answer)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v3.request import ProduceRequest

from lakelog.kafka_endpoint.messages import api_key, build, response_class

METADATA, PRODUCE = 3, 0


def test_a_field_of_another_version_is_left_out():
    # MetadataResponse v1 has no cluster_id (v2+): given anyway, it is left out of v1.
    v1 = build(response_class(METADATA, 1), brokers=[], cluster_id="lakelog", controller_id=0, topics=[])
    assert not hasattr(v1, "cluster_id")
    v12 = build(response_class(METADATA, 12), brokers=[], cluster_id="lakelog", controller_id=0, topics=[])
    assert v12.cluster_id == "lakelog"


def test_a_name_no_version_has_is_refused_with_its_name():
    with pytest.raises(ValueError, match="cluster_identifier"):
        build(response_class(METADATA, 12), brokers=[], cluster_identifier="lakelog", topics=[])


def test_a_misspelt_field_of_a_nested_entity_is_refused_with_its_name():
    with pytest.raises(ValueError, match="base_ofset"):
        build(
            response_class(PRODUCE, 9),
            responses=[
                {
                    "name": "t",
                    "partition_responses": [{"index": 0, "error_code": ErrorCode.none, "base_ofset": 3}],
                }
            ],
        )


def test_api_keys_come_from_kio_request_classes():
    assert api_key(ProduceRequest) == PRODUCE


def test_building_an_answer_inspects_its_types_once_per_class_not_per_value(monkeypatch):
    # Every answer of the agent is built through build(); resolving the type of each value
    # again cost an empty Fetch answer more than its reading of the log.
    import typing

    from lakelog.kafka_endpoint.fetch import FETCH

    cls = response_class(FETCH, 12)

    def answer(partitions: int):
        parts = [
            {"partition_index": p, "error_code": 0, "high_watermark": 5, "aborted_transactions": None, "records": b""}
            for p in range(partitions)
        ]
        return build(cls, error_code=0, session_id=0, responses=[{"topic": "t", "partitions": parts}])

    first = answer(1)
    looked = [0]
    for name in ("get_origin", "get_args"):
        original = getattr(typing, name)

        def counted(*args, original=original):
            looked[0] += 1
            return original(*args)

        monkeypatch.setattr(typing, name, counted)
    second = answer(100)
    assert looked[0] == 0
    assert second.responses[0].partitions[99].partition_index == 99
    assert second.responses[0].partitions[0].high_watermark == first.responses[0].partitions[0].high_watermark == 5


def test_an_answer_with_only_its_versions_fields_imports_no_other_version():
    """The other versions' modules are read only to tell a field of another version from a
    misspelt one: importing them all on a new agent's first answer of each kind held its event
    loop ~0.3 s (the first second's produce p99 of ``perf serve``)."""
    import subprocess
    import sys

    program = """
import sys
from kio.schema.errors import ErrorCode
from lakelog.kafka_endpoint.messages import build, response_class
part = {"index": 0, "error_code": ErrorCode.none, "base_offset": 3, "log_start_offset": -1}
build(response_class(0, 9), responses=[{"name": "t", "partition_responses": [part]}])
print(sorted({m.split(".")[3] for m in sys.modules if m.startswith("kio.schema.produce.v")}))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['v9']"
