"""Certificates for the real broker's SSL and SASL_SSL listeners, made with ``cryptography``:
a test CA and a server certificate for 127.0.0.1 / localhost signed by it (EC P-256 keys,
valid for a day). The broker reads them as PEM (``ssl.keystore.type=PEM``); clients trust the
CA file."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TlsFiles", "make_certificates"]


@dataclass(frozen=True)
class TlsFiles:
    """``ca``: the CA certificate (PEM) clients trust; ``keystore``: the server's private key
    (PKCS#8, unencrypted) followed by its certificate chain, as Kafka's PEM keystore file."""

    ca: Path
    keystore: Path


def make_certificates(directory: Path, hostnames: tuple[str, ...] = ("localhost",)) -> TlsFiles:
    """Write ``ca.pem`` and ``server-keystore.pem`` into ``directory`` (created if missing):
    a server certificate for 127.0.0.1 and ``hostnames``. Raises ``ImportError`` without
    ``cryptography``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafkasniff test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                + [x509.DNSName(h) for h in hostnames]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    files = TlsFiles(directory / "ca.pem", directory / "server-keystore.pem")
    files.ca.write_bytes(ca.public_bytes(pem))
    files.keystore.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
        + cert.public_bytes(pem) + ca.public_bytes(pem))
    return files
