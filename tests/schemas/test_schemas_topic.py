"""The ``_schemas`` records: keys byte-equal to Confluent's and Karapace's, and a topic they wrote folds
into the state they would serve (pure, no store)."""

from __future__ import annotations

import json

from lakelog.schemas.schemas_topic import (
    Reference,
    RegistryState,
    SchemaVersion,
    config_record,
    mode_record,
    schema_record,
)


def test_keys_are_confluents_bytes() -> None:
    key, value = schema_record(SchemaVersion("s", 2, 7, '"string"'))
    assert key == b'{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}'
    # AVRO is Confluent's default and is left out of the value, as Confluent does.
    assert json.loads(value) == {"subject": "s", "version": 2, "id": 7, "schema": '"string"', "deleted": False}
    assert config_record(None, "FULL") == (
        b'{"keytype":"CONFIG","subject":null,"magic":0}',
        b'{"compatibilityLevel":"FULL"}',
    )
    assert mode_record("s", None) == (b'{"keytype":"MODE","subject":"s","magic":0}', None)


def test_a_topic_written_by_karapace_folds_into_what_it_serves() -> None:
    def schema(subject: str, version: int, schema_id: int, **more: object) -> tuple[bytes, bytes]:
        key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
        value = {"subject": subject, "version": version, "id": schema_id, "schema": '"int"', "deleted": False, **more}
        return json.dumps(key).encode(), json.dumps(value).encode()

    records = [
        (b'{"keytype":"NOOP","magic":0}', None),
        (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FORWARD"}'),
        schema("a", 1, 1),
        schema("a", 2, 2),
        schema("b", 1, 3, schemaType="PROTOBUF", references=[{"name": "x.proto", "subject": "x", "version": 1}]),
        (b'{"keytype":"CONFIG","subject":"a","magic":0}', b'{"compatibilityLevel":"NONE"}'),
        (b'{"keytype":"DELETE_SUBJECT","subject":"a","magic":0}', b'{"subject":"a","version":2}'),
        (b'{"keytype":"SCHEMA","subject":"a","version":1,"magic":1}', None),
        (b'{"keytype":"CONFIG","subject":"a","magic":0}', None),
    ]
    state = RegistryState()
    state.fold((offset, key, value) for offset, (key, value) in enumerate(records))
    assert state.next_offset == len(records)
    assert state.configs == {None: "FORWARD"}
    assert state.versions("a") == []
    assert [v.version for v in state.versions("a", deleted=True)] == [2]  # 1 hard-deleted, 2 soft
    assert state.live_subjects() == ["b"]
    assert state.versions("b")[0].schema_type == "PROTOBUF"
    assert state.versions("b")[0].references == (Reference("x.proto", "x", 1),)
    assert state.max_id == 3
    assert [v.subject for v in state.with_id(2)] == ["a"]


def test_a_record_of_another_writer_is_skipped_not_fatal(caplog) -> None:
    state = RegistryState()
    good = schema_record(SchemaVersion("s", 1, 1, '"int"'))
    stray = [
        (b"not json", b"{}"),
        (b'{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}', b"[1, 2]"),
        (b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}', b'{"subject": "s"}'),
        (b"[]", None),
    ]
    state.fold((offset, key, value) for offset, (key, value) in enumerate([*stray, good]))
    assert [v.version for v in state.versions("s")] == [1]
    assert state.next_offset == 5
    assert caplog.text.count("skipping a record") == 4
