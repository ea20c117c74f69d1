"""Listeners in Kafka's syntax and the TLS context of the secure ones.

``--listen`` takes what Kafka's ``listeners`` takes: ``PROTOCOL://HOST:PORT``, several separated
by commas, with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (Kafka's
``SecurityProtocol``); a bare ``HOST:PORT`` is PLAINTEXT, as ``lakelog serve`` always took. Each
protocol is used by one listener at most (Kafka's default listener names are the protocols).
TLS is the standard library's ``ssl`` with Kafka's broker settings (:func:`server_ssl_context`).
"""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakelog.engine.errors import InvalidConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Listener:
    """One listener: its security protocol and the address it binds (port 0: a free one)."""

    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __str__(self) -> str:
        return f"{self.protocol}://{self.host}:{self.port}"


def parse_listener(text: str) -> Listener:
    """``[PROTOCOL://]HOST:PORT`` as a :class:`Listener`; raises InvalidConfigError naming ``text``."""
    protocol, sep, address = text.strip().partition("://")
    if not sep:
        protocol, address = "PLAINTEXT", text.strip()
    protocol = protocol.upper()
    if protocol not in PROTOCOLS:
        raise InvalidConfigError(
            f"listener {text!r}: unknown security protocol {protocol!r}; known: {', '.join(PROTOCOLS)}"
        )
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidConfigError(f"listener {text!r} must be [PROTOCOL://]HOST:PORT")
    return Listener(protocol, host.strip("[]") or "127.0.0.1", int(port))


def parse_listeners(specs: Iterable[str]) -> list[Listener]:
    """Every listener of ``specs`` (each may list several, comma-separated), at most one per protocol;
    raises InvalidConfigError."""
    found = [parse_listener(part) for spec in specs for part in spec.split(",") if part.strip()]
    if not found:
        raise InvalidConfigError("no listener given (--listen [PROTOCOL://]HOST:PORT)")
    protocols = [listener.protocol for listener in found]
    for protocol in set(protocols):
        if protocols.count(protocol) > 1:
            raise InvalidConfigError(f"two listeners of protocol {protocol}: give each protocol once")
    return found


def advertised(listeners: Iterable[Listener], setting: str) -> dict[str, tuple[str, int]]:
    """The address clients are told per protocol: ``advertised.listeners`` where it names the
    protocol, else the listener's own (its bound port). Raises InvalidConfigError for an entry
    of a protocol no listener has."""
    own = {listener.protocol: (listener.host, listener.port) for listener in listeners}
    if setting.strip():
        for entry in parse_listeners([setting]):
            if entry.protocol not in own:
                raise InvalidConfigError(f"advertised.listeners names {entry.protocol}, which no listener has")
            own[entry.protocol] = (entry.host, entry.port)
    return own


def _pkcs12_as_pem(path: str, password: str, what: str) -> tuple[bytes, list[bytes]]:
    """The key (PEM, unencrypted; b"" if none) and certificates (PEM) of a PKCS12 file."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(Path(path).read_bytes(), password.encode() or None)
    except (OSError, ValueError) as exc:
        # The message of a wrong password names no secret; the exception's text is cryptography's own.
        raise InvalidConfigError(f"{what} {path!r} could not be read as PKCS12 ({type(exc).__name__})") from None
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) if key is not None else b""
    certs = [c.public_bytes(Encoding.PEM) for c in ([cert] if cert is not None else []) + list(extra)]
    return key_pem, certs


def server_ssl_context(serve: Mapping[str, Any], listener: Listener) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener from Kafka's broker settings
    (``ssl.keystore.*``, ``ssl.truststore.*``, ``ssl.client.auth``). ``ssl.client.auth`` applies
    to SSL listeners only: a SASL_SSL listener authenticates with SASL and asks no certificate,
    as Kafka does for the unprefixed setting (KIP-684). Raises InvalidConfigError naming the
    setting that is missing or unreadable (never its password)."""
    location = serve["ssl.keystore.location"]
    if not location:
        raise InvalidConfigError("an SSL or SASL_SSL listener needs ssl.keystore.location")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        if serve["ssl.keystore.type"] == "PKCS12":
            key, certs = _pkcs12_as_pem(location, serve["ssl.keystore.password"], "ssl.keystore.location")
            # load_cert_chain reads files only: the converted PEM lives for the call in a private file.
            with tempfile.NamedTemporaryFile(suffix=".pem") as pem:
                pem.write(key + b"".join(certs))
                pem.flush()
                context.load_cert_chain(pem.name)
        else:
            context.load_cert_chain(location, password=serve["ssl.key.password"] or None)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidConfigError(
            f"ssl.keystore.location {location!r}: {type(exc).__name__}: {exc.strerror or exc}"
        ) from None
    trust = serve["ssl.truststore.location"]
    try:
        if trust and serve["ssl.truststore.type"] == "PKCS12":
            _, certs = _pkcs12_as_pem(trust, serve["ssl.truststore.password"], "ssl.truststore.location")
            context.load_verify_locations(cadata=b"".join(certs).decode())
        elif trust:
            context.load_verify_locations(cafile=trust)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidConfigError(
            f"ssl.truststore.location {trust!r}: {type(exc).__name__}: {exc.strerror or exc}"
        ) from None
    client_auth = serve["ssl.client.auth"] if listener.protocol == "SSL" else "none"
    context.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}[
        client_auth
    ]
    return context


def certificate_principal(peer_cert: Mapping[str, Any] | None) -> str | None:
    """``User:<subject>`` of a client certificate as Kafka's DefaultKafkaPrincipalBuilder names it
    (the subject's RFC 2253 form, most specific attribute first: ``User:CN=alice,O=acme``), or None."""
    if not peer_cert or "subject" not in peer_cert:
        return None
    short = {
        "commonName": "CN",
        "organizationName": "O",
        "organizationalUnitName": "OU",
        "countryName": "C",
        "localityName": "L",
        "stateOrProvinceName": "ST",
        "domainComponent": "DC",
    }
    parts = [f"{short.get(k, k)}={v}" for rdn in peer_cert["subject"] for k, v in rdn]
    return "User:" + ",".join(reversed(parts))
