"""Typed tables: a topic kept as a Delta table of its fields plus partition, offset, timestamp --
each record once after the job restarts, the table's schema evolving with the registry's, and
delta-rs reading it."""

from __future__ import annotations

import pytest

from tests.schemas.avro_topics import V1, V2, produce_avro, served
from tests.schemas.json_topics import JSON_V1, JSON_V2, produce_json
from tests.schemas.protobuf_topics import PROTO_V1, PROTO_V2, produce_protobuf

pytestmark = pytest.mark.spark


def delta_rs_rows(path) -> list[dict]:
    from deltalake import DeltaTable

    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["offset"])


def test_restarted_job_has_each_record_once_and_evolves_with_the_schema(store, tmp_path):
    table = tmp_path / "orders_table"
    store.create_topic("orders", partitions=2)
    with served(store) as url:
        produce_avro(store, url, "orders", V1, [{"id": i, "item": f"i{i}"} for i in range(6)])
        store.materialize("orders", str(table))
        first = delta_rs_rows(table)
        assert len(first) == 6 and set(first[0]) == {"id", "item", "partition", "offset", "timestamp"}

        store.materialize("orders", str(table))  # nothing new: a restart adds nothing
        assert len(delta_rs_rows(table)) == 6

        produce_avro(store, url, "orders", V2, [{"id": 6, "item": "i6", "note": "n"}, {"id": 7, "item": "i7"}])
        store.materialize("orders", str(table))
    rows = delta_rs_rows(table)
    assert sorted(r["id"] for r in rows) == list(range(8))  # each record once
    assert sorted((r["partition"], r["offset"]) for r in rows) == sorted({(r["partition"], r["offset"]) for r in rows})
    notes = {r["id"]: r["note"] for r in rows}
    assert notes[6] == "n" and notes[7] is None and notes[0] is None  # older records: the default


def test_a_json_schema_topic_is_materialized_and_read_by_delta_rs(store, tmp_path):
    table = tmp_path / "orders_table"
    store.create_topic("orders", partitions=2)
    with served(store) as url:
        produce_json(store, url, "orders", JSON_V1, [{"id": i, "item": f"i{i}"} for i in range(4)])
        store.materialize("orders", str(table))
        produce_json(store, url, "orders", JSON_V2, [{"id": 4, "item": "i4", "note": "n"}])
        store.materialize("orders", str(table))
    rows = sorted(delta_rs_rows(table), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4]  # each record once
    assert set(rows[0]) == {"id", "item", "note", "partition", "offset", "timestamp"}
    assert [r["note"] for r in rows] == [None, None, None, None, "n"]


def test_a_protobuf_topic_is_materialized_and_read_by_delta_rs(store, tmp_path):
    table = tmp_path / "orders_table"
    store.create_topic("orders", partitions=2)
    with served(store) as url:
        produce_protobuf(store, url, "orders", PROTO_V1, [{"id": i, "item": f"i{i}"} for i in range(1, 4)])
        store.materialize("orders", str(table))
        produce_protobuf(store, url, "orders", PROTO_V2, [{"id": 4, "item": "i4", "note": "n"}])
        store.materialize("orders", str(table))
    rows = sorted(delta_rs_rows(table), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [1, 2, 3, 4]  # each record once
    assert set(rows[0]) == {"id", "item", "note", "partition", "offset", "timestamp"}
    assert [r["note"] for r in rows] == [None, None, None, "n"]  # added by the second version


def test_a_field_named_like_a_record_column_is_refused(store, tmp_path):
    from lakelog.engine.errors import InvalidConfigError

    clashing = {"type": "record", "name": "E", "fields": [{"name": "offset", "type": "long"}]}
    store.create_topic("events", partitions=1)
    with served(store) as url:
        produce_avro(store, url, "events", clashing, [{"offset": 1, "id": 0}])
    with pytest.raises(InvalidConfigError, match="fields named offset"):
        store.materialize("events", str(tmp_path / "t"))


def test_cli_tables_run(store, tmp_path, capsys, monkeypatch):
    from tests.cli.helpers import run

    store.create_topic("orders", partitions=1)
    with served(store) as url:
        produce_avro(store, url, "orders", V1, [{"id": i, "item": "x"} for i in range(3)])
    table = tmp_path / "orders_table"
    argv = ["--store", store.uri, "tables", "run", "--topic", "orders", "--table", str(table)]
    code, out, err = run(capsys, monkeypatch, *argv)
    assert code == 0, err
    assert f"Typed table of 'orders' at {table} is up to date." in out
    assert [r["id"] for r in delta_rs_rows(table)] == [0, 1, 2]
    code, _, err = run(capsys, monkeypatch, "--store", store.uri, "tables", "run", "nope", "--table", str(table))
    assert code == 2 and "subject 'nope-value' has no schema" in err


def test_continuous_job_restarts_for_a_version_registered_after_it_started(spark, store, tmp_path, caplog):
    import logging
    import threading
    import time

    from lakelog.spark_connector import typed_tables

    table = tmp_path / "orders_table"
    store.create_topic("orders", partitions=1)
    spec = typed_tables.typed_table(store.uri, "orders", str(table))
    caplog.set_level(logging.INFO, logger=typed_tables.__name__)
    with served(store) as url:
        produce_avro(store, url, "orders", V1, [{"id": 0, "item": "a"}])
        failures: list[BaseException] = []

        def job() -> None:
            try:
                typed_tables.run(spark, spec, continuous=True, trigger_interval="1 second", timeout_s=90)
            except BaseException as error:  # handed to the test's thread
                failures.append(error)

        runner = threading.Thread(target=job)
        runner.start()
        deadline = time.monotonic() + 60
        while not (table / "_delta_log").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        # Registered after the query started: its first batch with this id fails, the job restarts.
        produce_avro(store, url, "orders", V2, [{"id": 1, "item": "b", "note": "n"}])
        while time.monotonic() < deadline and len(delta_rs_rows(table)) < 2:
            time.sleep(1)
        rows = delta_rs_rows(table)
        runner.join(120)
    assert not failures, failures
    assert [(r["id"], r["note"]) for r in rows] == [(0, None), (1, "n")]
    assert "a schema version registered since the query started; restarting" in caplog.text
