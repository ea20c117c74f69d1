"""Delta readers that know nothing of lakelog (delta-rs' SQL engine, polars) read the same
records at the same offsets as a lakelog consumer. Each runs in its own interpreter, as a
user's script would, and must exit cleanly. No JVM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lakelog.engine.topics import TopicPartition
from lakelog.store import Store

READERS = {
    "polars": """
import json, sys
import polars as pl
frame = pl.read_delta(sys.argv[1]).filter(pl.col("topic") == "t").sort("partition", "offset")
rows = [
    [r["partition"], r["offset"], r["key"].hex() if r["key"] else None, r["value"].hex()]
    for r in frame.iter_rows(named=True)
]
print(json.dumps(rows))
""",
    "delta-rs": """
import json, sys
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
table = QueryBuilder().register("log", DeltaTable(sys.argv[1])).execute(
    '''SELECT "partition", "offset", key, value FROM log WHERE topic = 't' ORDER BY 1, 2'''
).read_all()
rows = [
    [r["partition"], r["offset"], r["key"].hex() if r["key"] else None, r["value"].hex()]
    for r in pa.table(table).to_pylist()
]
print(json.dumps(rows))
""",
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_plain_delta_reader_sees_lakelogs_records_and_offsets(tmp_path: Path, reader: str) -> None:
    store = Store.open(tmp_path / "store")
    store.create_topic("t", partitions=2)
    producer = store.producer(**{"client.id": "p"})
    for i in range(30):
        producer.send("t", f"v{i}".encode(), key=f"k{i % 4}".encode() if i % 3 else None)
    producer.flush()
    producer.close()
    consumer = store.consumer(**{"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    seen = []
    for _ in range(20):
        seen += [[r.partition, r.offset, r.key.hex() if r.key else None, r.value.hex()] for r in consumer.poll()]
    consumer.close()
    assert len(seen) == 30
    done = subprocess.run(
        [sys.executable, "-c", READERS[reader], store.uri], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == sorted(seen)
