"""`lakelog quickstart` ends with the topic through the Kafka protocol: an in-process agent, a Kafka
client (aiokafka) sending a record and fetching the partition back (no Spark)."""

from __future__ import annotations

from lakelog.cli import main


def test_the_quickstart_sends_and_fetches_through_the_kafka_protocol(tmp_path, capsys):
    for _ in range(2):  # it can run again on the same store
        assert main(["--store", str(tmp_path / "qs"), "quickstart"]) == 0
        out = capsys.readouterr().out
        assert "lakelog serve: Kafka protocol on 127.0.0.1:" in out
        sent = next(line for line in out.splitlines() if line.startswith("a Kafka client (aiokafka) sent"))
        partition, offset = sent.split("partition ")[1].split(" offset ")
        assert f"  {partition}  {offset}  frank  order 9 for frank (via Kafka)" in out
