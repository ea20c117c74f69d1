"""``lakelog serve`` with a real Kafka client (confluent-kafka, librdkafka): records produced through
the agent land in the store with the offsets it acknowledged, records in the store are fetched by the
client, bad input gets Kafka's error codes, and SIGTERM stops the agent cleanly (no Spark)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTP

from lakelog.engine.topics import TopicPartition
from lakelog.store import Store


def _produce(bootstrap: str, records: list[dict], **config) -> list[tuple]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    acks: list[tuple] = []

    def delivered(error, message):
        acks.append((error, message.topic(), message.partition(), message.offset()))

    for record in records:
        producer.produce(on_delivery=delivered, **record)
    assert producer.flush(30) == 0
    return acks


def _fetch(bootstrap: str, partitions: list[int], count: int) -> list:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    )
    consumer.assign([KafkaTP("t", p, 0) for p in partitions])
    got = []
    for _ in range(200):
        if len(got) >= count:
            break
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            got.append(message)
    consumer.close()
    return got


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_produced_through_the_agent_land_with_the_acknowledged_offsets(agent, compression):
    records = [
        {"topic": "t", "value": f"v{i}".encode(), "key": f"k{i % 3}".encode(), "headers": [("h", b"x")]}
        for i in range(20)
    ]
    records += [{"topic": "t", "value": b"keyless", "partition": 1, "timestamp": 1_700_000_000_123}]
    acks = _produce(agent.bootstrap, records, **{"compression.type": compression})
    assert all(error is None for error, *_ in acks)
    store = Store.open(agent.store, create=False)
    placed = {}
    for p in (0, 1):
        consumer = store.consumer(None, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("t", p)])
        for r in consumer.poll(timeout_ms=1000):
            placed[(p, r.offset)] = r
        consumer.close()
    assert sorted(placed) == sorted((p, o) for _, _, p, o in acks)  # dense, as acknowledged
    keyless = next(r for r in placed.values() if bytes(r.value) == b"keyless")
    assert keyless.partition == 1 and keyless.timestamp == 1_700_000_000_123
    one = next(r for r in placed.values() if bytes(r.value) == b"v0")
    assert bytes(one.key) == b"k0" and [(k, bytes(v)) for k, v in one.headers] == [("h", b"x")]
    # The same key lands where lakelog's own producer puts it (Kafka's murmur2 partitioner).
    with store.producer(linger_ms=0) as mine:
        assert mine.send("t", "again", key="k0").get().partition == one.partition


def test_records_in_the_store_are_fetched_by_a_kafka_consumer(agent):
    store = Store.open(agent.store, create=False)
    with store.producer(linger_ms=0) as producer:
        for i in range(30):
            producer.send(
                "t",
                f"v{i}",
                key=None,
                partition=i % 2,
                headers=[("n", str(i).encode())],
                timestamp=1_700_000_000_000 + i,
            ).get()
    got = _fetch(agent.bootstrap, [0, 1], 30)
    assert sorted((m.partition(), m.offset()) for m in got) == sorted((i % 2, i // 2) for i in range(30))
    m = next(m for m in got if m.value() == b"v7")
    assert (m.partition(), m.offset(), m.headers(), m.timestamp()[1]) == (1, 3, [("n", b"7")], 1_700_000_000_007)


def test_list_offsets_earliest_latest_and_by_time(agent):
    from confluent_kafka import Consumer

    store = Store.open(agent.store, create=False)
    with store.producer(linger_ms=0) as producer:
        for i in range(5):
            producer.send("t", f"v{i}", partition=0, timestamp=1_000_000 + 1000 * i).get()
    consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": "unused"})
    low, high = consumer.get_watermark_offsets(KafkaTP("t", 0), timeout=10)
    assert (low, high) == (0, 5)
    try:
        offsets = [
            consumer.offsets_for_times([KafkaTP("t", 0, ts)], timeout=10)[0].offset for ts in (1_002_500, 9_999_999)
        ]
    finally:
        consumer.close()
    assert offsets == [3, -1]  # the first record at or after the time; none after the last


def test_list_offsets_max_timestamp_answers_the_newest_record(agent):
    """Kafka's OffsetSpec.maxTimestamp() (ListOffsets -3, KIP-734): the first record holding the
    largest timestamp, wherever it sits in the partition; nothing for an empty partition."""
    from confluent_kafka.admin import AdminClient, OffsetSpec

    store = Store.open(agent.store, create=False)
    with store.producer(linger_ms=0) as producer:
        for i, ts in enumerate([1_000_000, 1_005_000, 1_002_000, 1_005_000, 1_001_000]):
            producer.send("t", f"v{i}", partition=0, timestamp=ts).get()
    admin = AdminClient({"bootstrap.servers": agent.bootstrap})
    asked = {KafkaTP("t", 0): OffsetSpec.max_timestamp(), KafkaTP("t", 1): OffsetSpec.max_timestamp()}
    answers = {tp.partition: info.result() for tp, info in admin.list_offsets(asked, request_timeout=10).items()}
    assert (answers[0].offset, answers[0].timestamp) == (1, 1_005_000)
    assert answers[1].offset == -1  # partition 1 holds no record


def test_an_unknown_topic_is_refused_and_nothing_is_written(agent):
    store = Store.open(agent.store, create=False)
    version = store.log.latest_version()
    producer = Producer(
        {"bootstrap.servers": agent.bootstrap, "message.timeout.ms": 3000, "topic.metadata.refresh.interval.ms": 500}
    )
    errors = []
    producer.produce("nope", b"x", on_delivery=lambda error, message: errors.append(error))
    producer.flush(10)
    assert errors and errors[0].code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._MSG_TIMED_OUT,
    )
    assert Store.open(agent.store, create=False).log.latest_version() == version


def _raw(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def test_unsupported_versions_are_answered_and_garbage_closes_only_its_connection(agent):
    # ApiVersions v99: Kafka's answer is a v0 ApiVersions response with UNSUPPORTED_VERSION (35).
    answer = _raw(agent.port, struct.pack(">hhih", 18, 99, 7, -1))
    assert struct.unpack_from(">ih", answer, 0) == (7, 35)
    # A Metadata request cut short: that connection ends, the agent keeps serving.
    with socket.create_connection(("127.0.0.1", agent.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 10) + struct.pack(">hhih", 3, 12, 8, 300))
        assert sock.recv(10) == b""
    acks = _produce(agent.bootstrap, [{"topic": "t", "value": b"still here", "partition": 0}])
    assert acks[0][0] is None


def test_sigterm_stops_the_agent_cleanly(agent):
    _produce(agent.bootstrap, [{"topic": "t", "value": b"x", "partition": 0}])
    assert agent.stop() == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", agent.port), timeout=2).close()


def test_offsets_committed_by_a_kafka_consumer_are_the_groups_offsets_in_the_store(agent):
    from confluent_kafka import Consumer

    store = Store.open(agent.store, create=False)
    with store.producer(linger_ms=0) as producer:
        for i in range(4):
            producer.send("t", f"v{i}", partition=0).get()
    consumer = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": "g", "enable.auto.commit": False})
    try:
        consumer.assign([KafkaTP("t", 0, 0)])
        consumer.commit(offsets=[KafkaTP("t", 0, 3)], asynchronous=False)
        assert [tp.offset for tp in consumer.committed([KafkaTP("t", 0), KafkaTP("t", 1)], timeout=10)] == [3, -1001]
        with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
            consumer.commit(offsets=[KafkaTP("t", 7, 1)], asynchronous=False)
    finally:
        consumer.close()
    mine = Store.open(agent.store, create=False).consumer("g", enable_auto_commit=False)
    assert mine.committed([TopicPartition("t", 0)])[TopicPartition("t", 0)].offset == 3  # lakelog's group too
    mine.close(autocommit=False)


def test_kafka_python_produces_consumes_and_commits(agent):
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as KP

    producer = KafkaProducer(bootstrap_servers=agent.bootstrap, compression_type="gzip")
    futures = [
        producer.send("t", key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"1")]) for i in range(10)
    ]
    producer.flush()
    placed = sorted((f.get(10).partition, f.get(10).offset) for f in futures)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=agent.bootstrap, group_id="kp", enable_auto_commit=False)
    consumer.assign([KP("t", 0), KP("t", 1)])
    consumer.seek_to_beginning()
    got = []
    deadline = time.monotonic() + 60  # a loaded machine: the first fetches may take seconds
    while len(got) < len(placed) and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=1000).values():
            got += [(m.partition, m.offset, m.headers) for m in messages]
    got += [(m.partition, m.offset, m.headers) for ms in consumer.poll(timeout_ms=500).values() for m in ms]
    assert sorted((p, o) for p, o, _ in got) == placed and all(h == [("h", b"1")] for *_, h in got)
    consumer.commit({KP("t", 0): OffsetAndMetadata(2, "", -1)})
    assert consumer.committed(KP("t", 0)) == 2
    consumer.close()


def test_a_record_over_max_message_bytes_is_refused_and_nothing_written(agent):
    store = Store.open(agent.store, create=False)
    store.create_topic("small", partitions=1, config={"max.message.bytes": 100})
    version = store.log.latest_version()
    producer = Producer({"bootstrap.servers": agent.bootstrap, "message.max.bytes": 1_000_000})
    errors = []
    producer.produce("small", b"x" * 500, partition=0, on_delivery=lambda error, message: errors.append(error))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert Store.open(agent.store, create=False).log.latest_version() == version


def _produce_v3(correlation_id: int, topic: str, partition: int, batch: bytes) -> bytes:
    """A Produce v3 request (acks=all) carrying one record batch for one partition."""
    name = topic.encode()
    return (
        struct.pack(">hhih", 0, 3, correlation_id, -1)  # header v1: Produce v3, no client id
        + struct.pack(">hhi", -1, -1, 30_000)  # no transactional id, acks=all, timeout
        + struct.pack(">ih", 1, len(name))
        + name
        + struct.pack(">iii", 1, partition, len(batch))
        + batch
    )


def _idempotent_batch(producer_id: int, base_sequence: int, values: list[bytes]) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=base_sequence,
        batch_size=2**20,
    )
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def test_a_connections_pipelined_produce_requests_are_answered_in_order_and_share_commits(agent):
    """Kafka's producer keeps max.in.flight requests outstanding on one connection: the agent
    reads them while earlier ones commit, commits them in order (one producer's sequences
    continue from request to request), several in one commit, and answers them in the order
    they came, each after the commit holding its records."""
    version = Store.open(agent.store, create=False).log.latest_version()
    requests = 8
    frames = b"".join(
        struct.pack(">i", len(frame)) + frame
        for frame in (
            _produce_v3(100 + i, "t", 1, _idempotent_batch(4242, 10 * i, [b"r%d-%d" % (i, j) for j in range(10)]))
            for i in range(requests)
        )
    )
    answers = []
    with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
        sock.sendall(frames)  # all eight in flight at once
        for _ in range(requests):
            answers.append(_exactly(sock, struct.unpack(">i", _exactly(sock, 4))[0]))
    parsed = []
    for answer in answers:
        correlation_id, topics, name_length = struct.unpack_from(">iih", answer, 0)
        at = 10 + name_length
        partitions, index, error_code, base_offset = struct.unpack_from(">iihq", answer, at)
        assert (topics, partitions, index) == (1, 1, 1)
        parsed.append((correlation_id, error_code, base_offset))
    assert parsed == [(100 + i, 0, 10 * i) for i in range(requests)]
    state = Store.open(agent.store, create=False).log.latest()
    assert state.end_offset(TopicPartition("t", 1)) == 10 * requests
    assert state.version - version < requests  # some of them shared a commit
