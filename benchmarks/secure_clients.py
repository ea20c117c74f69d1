"""Kafka clients' settings for a SASL_SSL listener, in confluent-kafka's (librdkafka's) names and
in the Java client's properties, and the Java client's for an SSL listener with a client
certificate: one home for what the security tests and ``lakelog perf serve --security`` hand
their clients."""

from __future__ import annotations

from pathlib import Path


def sasl_ssl_config(
    bootstrap: str, user: str, password: str, ca: Path | str, mechanism: str = "SCRAM-SHA-512"
) -> dict[str, str]:
    """confluent-kafka's configuration for ``bootstrap`` over SASL_SSL: the server's certificate
    checked against the PEM file ``ca``, then SASL ``mechanism`` as ``user``."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(ca),
    }


def java_sasl_ssl_properties(user: str, password: str, ca: Path | str, mechanism: str = "SCRAM-SHA-512") -> str:
    """The same for Kafka's Java clients and tools (``--producer.config``, ``--command-config``):
    a properties file's text, with a PEM truststore. Raises ValueError for a mechanism other than
    PLAIN or SCRAM-SHA-256/512."""
    modules = {
        "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
        "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    }
    if mechanism not in modules:
        raise ValueError(f"no JAAS login module for SASL mechanism {mechanism!r}")
    return (
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={modules[mechanism]} required username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
    )


def java_ssl_properties(keystore_pem: Path | str, ca: Path | str) -> str:
    """Kafka's Java clients and tools over an SSL listener that requires client certificates: a
    properties file's text with a PEM keystore (``keystore_pem`` holds the unencrypted PKCS#8
    private key and the certificate chain, KIP-651) and a PEM truststore."""
    return (
        "security.protocol=SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore_pem}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
    )
