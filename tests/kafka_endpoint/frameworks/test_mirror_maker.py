"""MirrorMaker 2 into ``lakelog serve``: Kafka's MirrorSourceConnector (connect-mirror 4.3.1, on
connect-runtime 4.3.1: its connectors load only on a runtime of their own version) in a Connect
worker whose cluster is the agent copies a topic from a real Apache Kafka broker on loopback. Every
record arrives once, under the name MM2's DefaultReplicationPolicy gives it (``<source alias>.<topic>``)
(issue 31). The module's one broker is the source; the agent is the target."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.java_programs import CONNECT_WORKERS, HarnessError, JavaProgram, stopped_after
from benchmarks.kafka_reference import free_ports
from tests.kafka_endpoint.frameworks import harness
from tests.kafka_endpoint.frameworks.conftest import KAFKA, Target, on_lakelog

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

TOPIC = "mm2-lines"
RECORDS = 500


@pytest.fixture(scope="module")
def source() -> Iterator[Target]:
    from benchmarks.kafka_reference import KafkaBroker

    broker = KafkaBroker().start()
    try:
        yield Target(KAFKA, broker.bootstrap, broker.log_path)
    finally:
        broker.stop()


def mirror_source_connector(source: str, target: str, topics: str) -> dict[str, str]:
    """The MirrorSourceConnector's configuration the README shows: clusters ``src`` -> ``dst``,
    records copied as bytes, single-replica internal topics (one broker, one agent)."""
    return {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "source.cluster.alias": "src",
        "target.cluster.alias": "dst",
        "source.cluster.bootstrap.servers": source,
        "target.cluster.bootstrap.servers": target,
        "topics": topics,
        "tasks.max": "1",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        # The source broker runs no authorizer: there are no ACLs to copy.
        "sync.topic.acls.enabled": "false",
    }


@pytest.mark.parametrize("target", [on_lakelog()], indirect=True)
def test_mirror_maker_2_copies_a_topic_from_kafka_into_lakelog_once(
    source: Target, target: Target, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    worker = tmp_path / "worker.properties"
    worker.write_text(harness.worker_properties(target.bootstrap, port))
    values = [f"record-{i}".encode() for i in range(RECORDS)]
    source.create_topic(TOPIC, 3)
    source.produce(TOPIC, values)

    with stopped_after([]) as programs:
        # Beside MM2's own progress, what tells a silent stall apart: the task producer's producer
        # id (TransactionManager), its requests that timed out (NetworkClient) and where its source
        # consumer starts (SubscriptionState): a source task's producer retries forever unlogged.
        levels = {
            "org.apache.kafka.connect.mirror": "INFO",
            "org.apache.kafka.clients.NetworkClient": "INFO",
            "org.apache.kafka.clients.producer.internals.TransactionManager": "INFO",
            "org.apache.kafka.clients.consumer.internals.SubscriptionState": "INFO",
        }
        workers = JavaProgram(CONNECT_WORKERS, tmp_path, "mm2", args=[str(worker)], log_levels=levels)
        programs.append(workers)
        workers.wait_for(lambda w: bool(w.events("STARTED")), 120, "the worker started")
        url = f"http://127.0.0.1:{port}"
        config = mirror_source_connector(source.bootstrap, target.bootstrap, TOPIC)
        # PUT .../config creates the connector.
        create = f"{url}/connectors/mm2/config"
        harness.until(workers, "the connector configured", lambda: harness.rest(create, "PUT", config))
        mirrored = f"src.{TOPIC}"  # DefaultReplicationPolicy

        seen: list[str] = ["nothing read yet"]

        def copied() -> list[tuple] | None:
            try:
                found = target.read_all(mirrored, timeout_s=10)
            except Exception as exc:
                seen[0] = f"reading failed: {exc!r}"
                return None
            seen[0] = f"{len(found)} records read"
            return found if len(found) >= RECORDS else None

        try:
            records = harness.until(workers, f"{RECORDS} records in {mirrored}", copied, timeout_s=240)
        except HarnessError as exc:
            agent = target.log.read_text(errors="replace")[-4000:] if target.log else ""
            raise HarnessError(f"{exc}\nlast read of {mirrored}: {seen[0]}\nthe agent's log ends:\n{agent}") from exc
        assert sorted(value for _, value, _, _ in records) == sorted(values)  # each once
