"""``lakelog serve`` on a network: listeners in Kafka's syntax, TLS with client certificates,
SASL PLAIN and SCRAM against credentials in the store, ACLs as Kafka's StandardAuthorizer
applies them, and secrets kept out of the agent's log. One agent per module (every listener
at once); a second agent on the same store shows that users and ACLs are shared. No test
relies on what another did: each produces the records, makes the failures and commits the
group offsets it asserts on (its own values and group ids)."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from benchmarks.certificates import Authority
from benchmarks.secure_clients import java_sasl_ssl_properties, java_ssl_properties, sasl_ssl_config
from tests.kafka_endpoint.conftest import ROOT, Agent

ALICE_PASSWORD = "alice-" + uuid.uuid4().hex  # SCRAM-SHA-512
BOB_PASSWORD = "bob-" + uuid.uuid4().hex  # SCRAM-SHA-256, used over PLAIN
CAROL_PASSWORD = "carol-" + uuid.uuid4().hex  # SCRAM-SHA-512, may only read topic t in group carol-group
DAVE_PASSWORD = "dave-" + uuid.uuid4().hex  # added through the agent (AlterUserScramCredentials)
KEYSTORE_PASSWORD = "keystore-" + uuid.uuid4().hex
CLIENT_PRINCIPAL = "User:CN=client,O=lakelog-tests"
JAVA_PRINCIPAL = "User:CN=java-client,O=lakelog-tests"  # may only read and write topic other


def lakelog_in_process(store: Path, *args: str) -> None:
    """A ``lakelog`` command in this process: the CLI's own code without a new interpreter's start."""
    from lakelog.cli import main

    assert main(["--store", str(store), *args]) == 0


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
    listeners over a store with users alice (SCRAM-SHA-512) and bob (SCRAM-SHA-256); the client
    certificate of CN=client is a super user, that of CN=java-client has ACLs on topic other."""
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
    java_client = authority.issue("java-client").write_pem(work, "java-client")
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
                "authorizer.class.name org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                f"super.users User:alice;{CLIENT_PRINCIPAL}",
            ]
        )
        + "\n"
    )
    lakelog_in_process(
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
    lakelog_in_process(
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
    lakelog_in_process(
        store_dir,
        "configs",
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
        "--add-config",
        f"SCRAM-SHA-512=[password={CAROL_PASSWORD}]",
    )
    lakelog_in_process(
        store_dir,
        "acls",
        "--add",
        "--allow-principal",
        "User:bob",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "t",
    )
    lakelog_in_process(
        store_dir,
        "acls",
        "--add",
        "--allow-principal",
        "User:carol",
        "--operation",
        "Read",
        "--topic",
        "t",
        "--group",
        "carol-group",
    )
    lakelog_in_process(
        store_dir,
        "acls",
        "--add",
        "--allow-principal",
        JAVA_PRINCIPAL,
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "other",
    )
    log = work / "agent.log"
    listen = ["PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"]
    agent = Agent(
        store_dir, log=log, listen=listen, conf=conf, metrics_listen="127.0.0.1:0", serve_args=("--log-format", "json")
    )
    yield {
        "agent": agent,
        "store": store_dir,
        "work": work,
        "client": client,
        "java_client": java_client,
        "expired": expired,
        "log": log,
        "conf": conf,
    }
    agent.stop()


def scram_config(network, user: str = "alice", password: str = ALICE_PASSWORD) -> dict[str, str]:
    """confluent-kafka's configuration for the agent's SASL_SSL listener, SCRAM-SHA-512."""
    return sasl_ssl_config(network["agent"].listeners["SASL_SSL"], user, password, network["work"] / "ca.pem")


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


KCAT = shutil.which("kcat") or shutil.which("kafkacat")  # Debian's kcat package; older ones name it kafkacat


@pytest.mark.skipif(KCAT is None, reason="needs kcat (Debian's kcat package) on PATH")
def test_kcat_with_sasl_plain_and_a_wrong_password_refused(network):
    def kcat(password: str, *args: str, stdin: str = "", wait_s: int = 10) -> subprocess.CompletedProcess:
        sasl = ("security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=PLAIN", "sasl.username=bob")
        return subprocess.run(
            [KCAT, "-b", network["agent"].listeners["SASL_PLAINTEXT"], "-m", str(wait_s)]
            + [arg for setting in (*sasl, f"sasl.password={password}") for arg in ("-X", setting)]
            + list(args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    value = f"from kcat {uuid.uuid4().hex}"
    before = store_ends(network["store"])["t"][0]
    produced = kcat(BOB_PASSWORD, "-P", "-t", "t", "-p", "0", stdin=value + "\n")
    assert produced.returncode == 0, produced.stderr
    assert store_ends(network["store"])["t"][0] == before + 1
    consumed = kcat(BOB_PASSWORD, "-C", "-t", "t", "-p", "0", "-o", str(before), "-e", "-q")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [value]
    refused = kcat("not-" + BOB_PASSWORD, "-L", wait_s=3)  # librdkafka logs the refusal at once
    assert refused.returncode != 0 and "Authentication failed" in refused.stderr, refused.stderr
    assert network["agent"].proc.poll() is None


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


def store_ends(store: Path) -> dict:
    from lakelog.store import Store

    opened = Store.open(str(store))
    topics = opened.context.latest_topics()
    return {name: opened.end_offsets(name) for name in ("t", "other") if name in topics} | {"topics": sorted(topics)}


def test_a_principal_with_only_read_on_one_topic_can_do_nothing_else(network):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    carol = scram_config(network, "carol", CAROL_PASSWORD)
    produce_and_consume(scram_config(network), "t", b"for carol")  # alice is a super user
    before = store_ends(network["store"])
    admin = AdminClient(carol)
    assert sorted(admin.list_topics(timeout=30).topics) == ["t"]  # Metadata lists what carol may describe

    reports = []
    producer = Producer({**carol, "enable.idempotence": False, "retries": 0})
    for topic in ("t", "other"):
        producer.produce(topic, b"refused", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(30)
    assert sorted(err.code() for err in reports) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2

    for future in admin.create_topics([NewTopic("new", 1, 1)]).values():
        with pytest.raises(KafkaException) as created:
            future.result(30)
        assert created.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for future in admin.delete_topics(["other"]).values():
        with pytest.raises(KafkaException) as deleted:
            future.result(30)
        assert deleted.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    def first_error(config: dict, subscribe: str) -> int:
        consumer = Consumer({**config, "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([subscribe])
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is not None:
                    return message.error().code()
                assert message is None, f"read {message.value()!r}"
            raise AssertionError("no error")
        finally:
            consumer.close()

    assert first_error({**carol, "group.id": "carol-group"}, subscribe="other") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert first_error({**carol, "group.id": "other-group"}, subscribe="t") == KafkaError.GROUP_AUTHORIZATION_FAILED
    # What carol may do she can.
    consumer = Consumer({**carol, "group.id": "carol-group", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    seen = []
    deadline = time.monotonic() + 30
    while b"for carol" not in seen and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    assert b"for carol" in seen
    assert store_ends(network["store"]) == before  # nothing refused was committed


def test_plaintext_clients_are_user_anonymous(network):
    admin = AdminClient({"bootstrap.servers": network["agent"].listeners["PLAINTEXT"]})
    assert admin.list_topics(timeout=30).topics == {}


def test_users_and_acls_added_through_one_agent_apply_on_another(network):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(scram_config(network))  # alice, a super user, through the first agent
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), DAVE_PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(30)
    assert [i.mechanism for i in described.scram_credential_infos] == [ScramMechanism.SCRAM_SHA_256]
    second = Agent(
        network["store"],
        log=network["work"] / "second.log",
        listen=["SASL_PLAINTEXT://127.0.0.1:0"],
        conf=network["conf"],
    )
    try:
        dave = {
            "bootstrap.servers": second.listeners["SASL_PLAINTEXT"],
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "dave",
            "sasl.password": DAVE_PASSWORD,
        }
        assert AdminClient(dave).list_topics(timeout=30).topics == {}  # authenticated, no ACL yet
        binding = AclBinding(
            ResourceType.TOPIC,
            "t",
            ResourcePatternType.LITERAL,
            "User:dave",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([binding]).values():
            future.result(30)
        deadline = time.monotonic() + 10
        while "t" not in AdminClient(dave).list_topics(timeout=30).topics:
            assert time.monotonic() < deadline, "the ACL did not reach the second agent"
            time.sleep(0.3)
        dave_acls = AclBindingFilter(
            ResourceType.TOPIC,
            "t",
            ResourcePatternType.MATCH,
            "User:dave",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        assert admin.describe_acls(dave_acls).result(30) == [binding]
        for future in admin.delete_acls([dave_acls]).values():
            assert future.result(30) == [binding]
        assert admin.describe_acls(dave_acls).result(30) == []
    finally:
        second.stop()
    for secret in (DAVE_PASSWORD, CAROL_PASSWORD):
        assert secret not in (network["work"] / "second.log").read_text()


def read_frame(sock: socket.socket) -> bytes:
    size = b""
    while len(size) < 4:
        chunk = sock.recv(4 - len(size))
        if not chunk:
            return b""
        size += chunk
    rest, body = struct.unpack(">i", size)[0], b""
    while len(body) < rest:
        body += sock.recv(rest - len(body))
    return size + body


def test_a_v0_sasl_handshake_takes_the_token_as_a_bare_frame(network):
    host, port = network["agent"].listeners["SASL_PLAINTEXT"].rsplit(":", 1)

    def handshake(sock: socket.socket) -> None:
        header = struct.pack(">hhih", 17, 0, 9, 1) + b"p" + struct.pack(">h", 5) + b"PLAIN"
        sock.sendall(struct.pack(">i", len(header)) + header)
        answer = read_frame(sock)
        assert struct.unpack(">ih", answer[4:10]) == (9, 0)  # correlation id, error NONE

    with socket.create_connection((host, int(port)), timeout=10) as sock:
        handshake(sock)
        token = b"\0bob\0" + BOB_PASSWORD.encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(sock) == struct.pack(">i", 0)  # PLAIN's empty server token
        metadata = struct.pack(">hhih", 3, 1, 10, 0) + struct.pack(">i", -1)
        sock.sendall(struct.pack(">i", len(metadata)) + metadata)
        assert b"\x00\x01t" in read_frame(sock)  # bob may describe t
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        handshake(sock)
        token = b"\0bob\0wrong"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(sock) == b""  # refused: the connection is closed


def scraped(url: str) -> dict[tuple[str, tuple], float]:
    from urllib.request import urlopen

    from prometheus_client.parser import text_string_to_metric_families

    text = urlopen(url, timeout=30).read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_metrics_endpoint_shows_what_was_served(network):
    from urllib.request import urlopen

    url = network["agent"].metrics
    assert urlopen(url.replace("/metrics", "/health"), timeout=10).read() == b"ok\n"
    before = scraped(url)
    produce_and_consume(scram_config(network), "t", b"counted")
    reports = []
    carol = Producer({**scram_config(network, "carol", CAROL_PASSWORD), "enable.idempotence": False, "retries": 0})
    carol.produce("t", b"refused", on_delivery=lambda err, msg: reports.append(err))
    carol.flush(30)
    assert [err.code() for err in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    group = f"metrics-{uuid.uuid4().hex[:6]}"
    committer = Consumer({**scram_config(network), "group.id": group, "enable.auto.commit": False})
    end = store_ends(network["store"])["t"][0]
    committer.commit(offsets=[TopicPartition("t", 0, end - 1)], asynchronous=False)
    committer.close()
    after = scraped(url)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert grew("lakelog_requests_total", api="produce", error="none") >= 1
    assert grew("lakelog_requests_total", api="fetch", error="none") >= 1
    assert grew("lakelog_requests_total", api="sasl_authenticate", error="none") >= 2
    assert grew("lakelog_request_latency_seconds_count", api="produce") >= 1
    assert grew("lakelog_commit_latency_seconds_count") >= 1
    assert grew("lakelog_commit_batch_requests_count") >= 1
    assert grew("lakelog_bytes_in_total") > len(b"counted")
    assert grew("lakelog_bytes_out_total") > len(b"counted")
    assert grew("lakelog_connections_total", listener="SASL_SSL") >= 2
    assert after[("lakelog_open_connections", (("listener", "SASL_SSL"),))] >= 0
    assert grew("lakelog_requests_total", api="produce", error="topic_authorization_failed") >= 1  # carol's
    # Lag from the store: the group committed one short of t's end.
    labels = (("group", group), ("partition", "0"), ("topic", "t"))
    assert after[("lakelog_consumer_group_committed_offset", labels)] == end - 1
    assert after[("lakelog_consumer_group_lag", labels)] == 1


def console_tools_round_trip(network, protocol: str, config: Path) -> None:
    """Kafka's Java ConsoleProducer writes two records to topic other through the agent's
    ``protocol`` listener with the client properties file ``config``, and its ConsoleConsumer
    reads them back from the offset they landed at."""
    from benchmarks.kafka_reference import ensure_kafka_jars

    jars = ensure_kafka_jars()

    def tool(main: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            ["java", "-cp", f"{jars / 'tools'}/*:{jars}/*", main, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=180,
        )

    bootstrap = network["agent"].listeners[protocol]
    values = [f"from java over {protocol} {uuid.uuid4().hex}" for _ in range(2)]
    before = store_ends(network["store"])["other"][0]
    produced = tool(
        "org.apache.kafka.tools.ConsoleProducer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "other",
        "--producer.config",
        str(config),
        stdin="".join(f"{v}\n" for v in values),
    )
    assert produced.returncode == 0, produced.stderr
    assert store_ends(network["store"])["other"][0] == before + 2, produced.stderr
    consumed = tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "other",
        "--partition",
        "0",
        "--offset",
        str(before),
        "--max-messages",
        "2",
        "--consumer.config",
        str(config),
    )
    assert consumed.returncode == 0, consumed.stderr
    # Kafka 4.1+ prints a note on --consumer.config (renamed --command-config) to stdout first.
    assert consumed.stdout.splitlines()[-2:] == values


JAVA = pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 17+")


@pytest.mark.slow
@JAVA
def test_kafkas_console_tools_over_sasl_ssl_with_scram_sha_512(network):
    config = network["work"] / "alice.properties"
    config.write_text(java_sasl_ssl_properties("alice", ALICE_PASSWORD, network["work"] / "ca.pem"))
    try:
        console_tools_round_trip(network, "SASL_SSL", config)
    finally:
        config.unlink()


@pytest.mark.slow
@JAVA
def test_kafkas_console_tools_over_ssl_with_a_client_certificate(network):
    _, _, keystore = network["java_client"]  # key and certificate in one PEM file
    config = network["work"] / "java-client.properties"
    config.write_text(java_ssl_properties(keystore, network["work"] / "ca.pem"))
    console_tools_round_trip(network, "SSL", config)
    # The agent authorized the certificate's subject as Kafka names it (RFC 2253, CN first):
    # the only ACLs are JAVA_PRINCIPAL's on topic other, so neither User:ANONYMOUS nor a super
    # user would see what it sees, and Metadata lists only what that principal may describe.
    assert sorted(AdminClient(ssl_config(network, network["java_client"])).list_topics(timeout=30).topics) == ["other"]


def test_no_secret_in_the_agents_log(network):
    authentication_error(scram_config(network, password="not-" + ALICE_PASSWORD))
    deadline = time.monotonic() + 10
    while "authentication of 'alice'" not in (text := network["log"].read_text()):  # logged by name
        assert time.monotonic() < deadline, "the failed authentication was not logged"
        time.sleep(0.1)
    failures = [json.loads(line) for line in text.splitlines() if "authentication of 'alice'" in line]
    assert failures[0]["level"] == "WARNING" and failures[0]["principal"] == "User:ANONYMOUS"
    assert failures[0]["listener"].startswith("SASL_SSL://") and failures[0]["client_host"] == "127.0.0.1"
    for secret in (ALICE_PASSWORD, BOB_PASSWORD, CAROL_PASSWORD, DAVE_PASSWORD, KEYSTORE_PASSWORD):
        assert secret not in text
    shown = lakelog(network["store"], "--conf", str(network["conf"]), "config")
    assert KEYSTORE_PASSWORD not in shown and "ssl.keystore.password" in shown
