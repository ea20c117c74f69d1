"""``lakelog serve`` on a network: listeners in Kafka's syntax, TLS with client certificates,
SASL PLAIN and SCRAM against credentials in the store, ACLs as Kafka's StandardAuthorizer
applies them, and secrets kept out of the agent's log. One agent per module (every listener
at once); a second agent on the same store shows that users and ACLs are shared."""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from tests.kafka_endpoint.certificates import Authority
from tests.kafka_endpoint.conftest import ROOT, Agent

ALICE_PASSWORD = "alice-" + uuid.uuid4().hex  # SCRAM-SHA-512
BOB_PASSWORD = "bob-" + uuid.uuid4().hex  # SCRAM-SHA-256, used over PLAIN
KEYSTORE_PASSWORD = "keystore-" + uuid.uuid4().hex
CLIENT_PRINCIPAL = "User:CN=client,O=lakelog-tests"


def lakelog(store: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", "--store", str(store), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    """An agent with PLAINTEXT, SSL (client certificates required), SASL_PLAINTEXT and SASL_SSL
    listeners over a store with users alice (SCRAM-SHA-512) and bob (SCRAM-SHA-256)."""
    from lakelog.store import Store

    work = tmp_path_factory.mktemp("security")
    store_dir = work / "store"
    store = Store.open(str(store_dir), create=True)
    store.create_topic("t", partitions=1)
    store.create_topic("other", partitions=1)
    authority = Authority()
    authority.issue("127.0.0.1", server=True).write_pkcs12(work / "agent.p12", KEYSTORE_PASSWORD)
    (work / "ca.pem").write_bytes(authority.ca.pem_cert())
    client = authority.issue("client").write_pem(work, "client")
    expired = authority.issue("expired", expired=True).write_pem(work, "expired")
    conf = work / "lakelog.conf"
    conf.write_text(
        "\n".join(
            [
                "ssl.keystore.type PKCS12",
                f"ssl.keystore.location {work / 'agent.p12'}",
                f"ssl.keystore.password {KEYSTORE_PASSWORD}",
                f"ssl.truststore.location {work / 'ca.pem'}",
                "ssl.client.auth required",
                "sasl.enabled.mechanisms PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            ]
        )
        + "\n"
    )
    lakelog(
        store_dir,
        "configs",
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        f"SCRAM-SHA-512=[iterations=8192,password={ALICE_PASSWORD}]",
    )
    lakelog(
        store_dir,
        "configs",
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--add-config",
        f"SCRAM-SHA-256=[password={BOB_PASSWORD}]",
    )
    log = work / "agent.log"
    listen = ["PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"]
    agent = Agent(store_dir, log=log, listen=listen, conf=conf)
    yield {
        "agent": agent,
        "store": store_dir,
        "work": work,
        "client": client,
        "expired": expired,
        "log": log,
        "conf": conf,
    }
    agent.stop()


def scram_config(network, user: str = "alice", password: str = ALICE_PASSWORD) -> dict:
    return {
        "bootstrap.servers": network["agent"].listeners["SASL_SSL"],
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(network["work"] / "ca.pem"),
    }


def ssl_config(network, files=None) -> dict:
    key, cert, _ = files or network["client"]
    return {
        "bootstrap.servers": network["agent"].listeners["SSL"],
        "security.protocol": "SSL",
        "ssl.ca.location": str(network["work"] / "ca.pem"),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }


def produce_and_consume(config: dict, topic: str, value: bytes) -> None:
    producer = Producer({**config, "enable.idempotence": True})
    producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 30
    while value not in seen and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    assert value in seen


def test_sasl_ssl_scram_sha_512_with_confluent_kafka(network):
    produce_and_consume(scram_config(network), "t", b"over SASL_SSL")


def test_ssl_with_a_client_certificate(network):
    produce_and_consume(ssl_config(network), "t", b"over SSL")


def test_sasl_plaintext_plain_with_kafka_python(network):
    common = {
        "bootstrap_servers": network["agent"].listeners["SASL_PLAINTEXT"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "bob",
        "sasl_plain_password": BOB_PASSWORD,
    }
    producer = KafkaProducer(**common)
    producer.send("t", b"over PLAIN").get(30)
    producer.close()
    consumer = KafkaConsumer("t", auto_offset_reset="earliest", consumer_timeout_ms=5000, **common)
    assert b"over PLAIN" in [m.value for m in consumer]
    consumer.close()


def test_metadata_advertises_the_listener_a_client_came_in_on(network):
    for protocol, config in (("SASL_SSL", scram_config(network)), ("SSL", ssl_config(network))):
        brokers = AdminClient(config).list_topics(timeout=30).brokers
        assert [f"{b.host}:{b.port}" for b in brokers.values()] == [network["agent"].listeners[protocol]]


def authentication_error(config: dict) -> KafkaError:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reported"
    return errors[0]


def test_a_wrong_password_is_refused_and_the_agent_stays_up(network):
    error = authentication_error(scram_config(network, password="not-" + ALICE_PASSWORD))
    assert error.code() == KafkaError._AUTHENTICATION, error
    error = authentication_error(scram_config(network, user="nobody"))
    assert error.code() == KafkaError._AUTHENTICATION, error
    produce_and_consume(scram_config(network), "t", b"still up")


def api_versions_frame() -> bytes:
    client_id = b"probe"
    header = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    return struct.pack(">i", len(header)) + header


def ask_api_versions(sock: socket.socket) -> bytes:
    """The answer to an ApiVersions v0 request (b"" when the connection was closed or refused)."""
    try:
        sock.sendall(api_versions_frame())
        return sock.recv(4)
    except (OSError, ssl.SSLError):
        return b""


def tls_client(network, files) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(network["work"] / "ca.pem"))
    if files is not None:
        key, cert, _ = files
        context.load_cert_chain(str(cert), str(key))
    return context


def over_tls(network, files) -> bytes:
    host, port = network["agent"].listeners["SSL"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        try:
            with tls_client(network, files).wrap_socket(raw, server_hostname=host) as sock:
                return ask_api_versions(sock)
        except (OSError, ssl.SSLError):
            return b""


def test_an_expired_or_missing_certificate_and_a_plaintext_client_are_refused(network):
    assert len(over_tls(network, network["client"])) == 4  # the valid one is answered
    assert over_tls(network, network["expired"]) == b""
    assert over_tls(network, None) == b""  # ssl.client.auth=required
    for protocol in ("SSL", "SASL_SSL"):
        host, port = network["agent"].listeners[protocol].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            assert ask_api_versions(sock) == b""
    assert len(over_tls(network, network["client"])) == 4
    assert network["agent"].proc.poll() is None


def test_a_request_before_sasl_authentication_closes_the_connection(network):
    host, port = network["agent"].listeners["SASL_PLAINTEXT"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        size = ask_api_versions(sock)  # ApiVersions is answered before authentication
        rest = struct.unpack(">i", size)[0]
        while rest:
            rest -= len(sock.recv(rest))
        metadata = struct.pack(">hhih", 3, 0, 8, 0) + struct.pack(">i", 0)
        sock.sendall(struct.pack(">i", len(metadata)) + metadata)
        assert sock.recv(4) == b""


def test_no_secret_in_the_agents_log(network):
    text = network["log"].read_text()
    assert "authentication of 'alice'" in text  # the wrong password above was logged, by name
    for secret in (ALICE_PASSWORD, BOB_PASSWORD, KEYSTORE_PASSWORD, "not-" + ALICE_PASSWORD):
        assert secret not in text
    shown = lakelog(network["store"], "--conf", str(network["conf"]), "config")
    assert KEYSTORE_PASSWORD not in shown and "ssl.keystore.password" in shown
