"""Table features the commit core implements; everything else is refused before writing."""

from __future__ import annotations

import json

import pytest

from lakelog.engine.commit.actions import Metadata, Protocol
from lakelog.engine.commit.features import check_readable, check_writable, unsupported_features
from lakelog.engine.errors import UnsupportedTableFeatureError

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}]})


def meta(schema: str = SCHEMA, **configuration: str) -> Metadata:
    return Metadata("m", schema, (), configuration)


@pytest.mark.parametrize(
    ("protocol", "missing"),
    [
        (Protocol(1, 2), []),
        (Protocol(1, 7, None, ("appendOnly", "invariants")), []),
        (Protocol(3, 7, (), ("appendOnly",)), []),
        (Protocol(1, 3), ["checkConstraints"]),
        (Protocol(1, 4), ["changeDataFeed", "checkConstraints", "generatedColumns"]),
        (Protocol(2, 5), ["changeDataFeed", "checkConstraints", "columnMapping", "generatedColumns"]),
        (Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), ["deletionVectors"]),
        (Protocol(1, 7, None, ("inCommitTimestamp", "rowTracking")), ["inCommitTimestamp", "rowTracking"]),
    ],
)
def test_unsupported_features_are_named(protocol, missing):
    assert unsupported_features(protocol) == missing


def test_writes_are_refused_for_unsupported_features_invariants_and_removes_from_append_only_tables():
    check_writable(Protocol(1, 2), meta())
    with pytest.raises(UnsupportedTableFeatureError, match="deletionVectors"):
        check_writable(Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), meta())
    with_invariant = SCHEMA.replace('"metadata": {}', '"metadata": {"delta.invariants": "{\\"expression\\": 1}"}')
    with pytest.raises(UnsupportedTableFeatureError, match="invariant"):
        check_writable(Protocol(1, 2), meta(with_invariant))
    append_only = meta(**{"delta.appendOnly": "true"})
    check_writable(Protocol(1, 2), append_only)  # appending is fine
    with pytest.raises(UnsupportedTableFeatureError, match="append-only"):
        check_writable(Protocol(1, 2), append_only, removes=True)


def test_reads_are_refused_where_parquet_files_alone_would_read_wrong():
    check_readable(Protocol(1, 7, None, ("checkConstraints",)))  # a writer feature: readers unaffected
    with pytest.raises(UnsupportedTableFeatureError, match="deletionVectors"):
        check_readable(Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)))
    with pytest.raises(UnsupportedTableFeatureError, match="columnMapping"):
        check_readable(Protocol(2, 5))


@pytest.mark.spark
def test_a_table_upgraded_by_spark_to_features_lakelog_lacks_is_refused_never_written(spark, tmp_path):
    from lakelog.store import Store

    store = Store.open(tmp_path / "store", spark=spark)
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        producer.send("t", "before").get()
    spark.sql(f"ALTER TABLE delta.`{store.uri}` ADD CONSTRAINT positive CHECK (`offset` >= 0)")
    version = store.log.latest_version()
    assert store.log.latest().protocol.min_writer_version >= 3  # checkConstraints
    with store.producer(linger_ms=0) as producer:
        future = producer.send("t", "refused")
        producer.flush()
    assert isinstance(future.exception(), UnsupportedTableFeatureError)
    assert "checkConstraints" in str(future.exception())
    assert store.log.latest_version() == version and store.end_offsets("t") == {0: 1}  # readers are unaffected
    spark.sql(f"ALTER TABLE delta.`{store.uri}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    with pytest.raises(UnsupportedTableFeatureError, match="deletionVectors"):
        Store.open(store.uri).end_offsets("t")
