"""Throwaway TLS material for the local broker: a CA, a broker certificate and a client certificate, as PEM.

One implementation for `deploy/local/kafka up --secured` and the test session. EC P-256 keys: generated in
milliseconds, and both the JDK (Kafka's PEM key store) and librdkafka's OpenSSL read them. Nothing here is
fit for a real cluster: the CA key sits beside the certificates it signed.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from transcoder.errors import LocalKafkaError

if TYPE_CHECKING:  # cryptography is the dev extra's: imported when certificates are made
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.x509 import Certificate


@dataclass(frozen=True)
class CertPaths:
    """Where the PEM files of one certificate set live."""

    dir: Path

    @property
    def ca(self) -> Path:
        """The CA certificate: the broker's and the clients' trust store."""
        return self.dir / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        """The broker's unencrypted PKCS#8 key followed by its certificate and the CA's (ssl.keystore.type=PEM)."""
        return self.dir / "broker-keystore.pem"

    @property
    def client_cert(self) -> Path:
        return self.dir / "client-cert.pem"

    @property
    def client_key(self) -> Path:
        """The client's PKCS#8 key, encrypted with the password in `client_key_password`."""
        return self.dir / "client-key.pem"

    @property
    def client_key_password(self) -> Path:
        return self.dir / "client-key.password"

    def complete(self) -> bool:
        return all(p.exists() for p in (self.ca, self.broker_keystore, self.client_cert, self.client_key,
                                        self.client_key_password))


def generate(directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = 365,
             client_cn: str = "transcoder-client") -> CertPaths:
    """Write a fresh CA, broker and client certificate set into `directory` (files 0600) and return their paths.

    The broker certificate names `hosts` as subject alternative names, so clients verify the hostname.
    """
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise LocalKafkaError("generating the local broker's certificates needs the cryptography package: "
                              "pip install 'transcoder[dev]'") from None

    paths = CertPaths(Path(directory))
    paths.dir.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca(days)
    broker_key, broker_cert = _leaf(ca_key, ca_cert, "transcoder-local-broker", days, hosts=hosts, server=True)
    client_key, client_cert = _leaf(ca_key, ca_cert, client_cn, days, hosts=(), server=False)
    key_password = secrets.token_hex(16)
    pem = serialization.Encoding.PEM
    pkcs8 = serialization.PrivateFormat.PKCS8

    _write(paths.ca, ca_cert.public_bytes(pem))
    _write(paths.broker_keystore,
           broker_key.private_bytes(pem, pkcs8, serialization.NoEncryption())
           + broker_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    _write(paths.client_cert, client_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    _write(paths.client_key, client_key.private_bytes(
        pem, pkcs8, serialization.BestAvailableEncryption(key_password.encode())))
    _write(paths.client_key_password, key_password.encode())
    return paths


def ensure(directory: Path, **kw: object) -> CertPaths:
    """The certificate set in `directory`, generated when any file is missing (a restart keeps the same one)."""
    paths = CertPaths(Path(directory))
    return paths if paths.complete() else generate(directory, **kw)  # type: ignore[arg-type]


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ca(days: int) -> tuple[EllipticCurvePrivateKey, Certificate]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "transcoder local CA")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - dt.timedelta(hours=1)).not_valid_after(_now() + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca_key: EllipticCurvePrivateKey, ca_cert: Certificate, cn: str, days: int, *, hosts: tuple[str, ...],
          server: bool) -> tuple[EllipticCurvePrivateKey, Certificate]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(_now() - dt.timedelta(hours=1)).not_valid_after(_now() + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                     else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    if hosts:
        names: list[x509.GeneralName] = []
        for h in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                names.append(x509.DNSName(h))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())
