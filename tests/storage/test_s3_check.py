"""``lakelog check`` on an S3 store (loopback server, no Spark): a missing data file and a stray
temporary are found, the temporary removed by ``--repair``."""

from __future__ import annotations

import pytest

from lakelog.cli import main
from lakelog.store import Store

pytestmark = [pytest.mark.s3]


def test_check_finds_a_missing_file_and_a_stray_temporary_on_s3(s3_server, s3_uri, capsys):
    store = Store.open(s3_uri)
    store.create_topic("t", partitions=1)
    with store.producer(linger_ms=0) as producer:
        for i in range(3):
            producer.send("t", f"v{i}", partition=0).get()
    assert main(["--store", s3_uri, "check"]) == 0
    bucket, prefix = s3_uri.removeprefix("s3a://").split("/", 1)
    client = s3_server.client()
    stray = f"{prefix}/_delta_log/.00000000000000000009.checkpoint.parquet.0b5e.tmp"
    client.put_object(Bucket=bucket, Key=stray, Body=b"x")
    assert main(["--store", s3_uri, "check"]) == 0  # younger than the grace period: a writer in flight
    assert main(["--store", s3_uri, "check", "--grace-seconds", "0", "--repair"]) == 0
    assert "removed stray temporary _delta_log/.00000000000000000009" in capsys.readouterr().out
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix=stray)
    first = sorted(f.path for f in store.log.latest().files)[0]
    client.delete_object(Bucket=bucket, Key=f"{prefix}/{first}")
    assert main(["--store", s3_uri, "check"]) == 8
    assert f"missing_file: {first}" in capsys.readouterr().out
