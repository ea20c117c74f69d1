"""Certificates made for a test or a benchmark: a CA, a server's certificate (for
127.0.0.1/localhost), client certificates signed by the CA, and an expired one
(``cryptography``). The tests of ``lakelog serve``'s TLS listeners and ``lakelog perf serve
--security`` (the agent's and a Kafka broker's PEM keystores) both make theirs here."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

NOW = dt.datetime.now(dt.UTC)


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "lakelog-tests"), x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    )


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def pem_key(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def pem_cert(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write_pem(self, directory: Path, stem: str) -> tuple[Path, Path, Path]:
        """(key, certificate, key+certificate) files."""
        key, cert, both = (directory / f"{stem}.key", directory / f"{stem}.crt", directory / f"{stem}.pem")
        key.write_bytes(self.pem_key())
        cert.write_bytes(self.pem_cert())
        both.write_bytes(self.pem_key() + self.pem_cert())
        return key, cert, both

    def write_pkcs12(self, path: Path, password: str) -> Path:
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"agent", self.key, self.cert, None, serialization.BestAvailableEncryption(password.encode())
            )
        )
        return path


class Authority:
    """A CA that issues server and client certificates."""

    def __init__(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name("lakelog test CA"))
            .issuer_name(_name("lakelog test CA"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW - dt.timedelta(days=1))
            .not_valid_after(NOW + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        self.ca = Issued(key, cert)

    def issue(self, cn: str, *, server: bool = False, expired: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        before, after = (
            (NOW - dt.timedelta(days=10), NOW - dt.timedelta(days=5))
            if expired
            else (NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=1))
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(self.ca.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(before)
            .not_valid_after(after)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return Issued(key, builder.sign(self.ca.key, hashes.SHA256()))
