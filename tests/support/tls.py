"""A redis-server that also listens with TLS, and the throw-away CA that signed its certificate.

Usage::

    with TlsRedis() as tls:
        tls.url(trusted=True)    # rediss://127.0.0.1:<port>/0?ssl_ca_certs=<ca.crt>
        tls.url(trusted=False)   # the same without the CA: verification fails
        tls.server.url           # its plain port, for the harness's probes

The certificates are made with ``cryptography`` (RSA 2048, valid for a day, the
server's naming ``127.0.0.1`` and ``localhost``; the CA has the ``keyUsage`` that
Python 3.13's strict X.509 checks require).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .redis_server import RedisServer, free_port

_KEY_PEM = serialization.PrivateFormat.TraditionalOpenSSL


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, key: rsa.RSAPrivateKey, cert: x509.Certificate) -> None:
    path.with_suffix(".key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, _KEY_PEM, serialization.NoEncryption())
    )
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make_certificates(folder: Path) -> None:
    """Write ``ca.crt``/``ca.key`` and ``server.crt``/``server.key`` into ``folder``."""
    import ipaddress

    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = _key(), _key()
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("rqueue test CA"))
        .issuer_name(_name("rqueue test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(folder / "ca", ca_key, ca)
    _write(folder / "server", server_key, server)


class TlsRedis:
    """A :class:`RedisServer` with a TLS port beside its plain one (no client certificates)."""

    def __init__(self) -> None:
        self.tls_port = free_port()
        self.server = RedisServer()
        self.ca = self.server.dir / "ca.crt"
        make_certificates(self.server.dir)
        self.server.extra_args += [
            "--tls-port", str(self.tls_port),
            "--tls-cert-file", str(self.server.dir / "server.crt"),
            "--tls-key-file", str(self.server.dir / "server.key"),
            "--tls-ca-cert-file", str(self.ca),
            "--tls-auth-clients", "no",
        ]  # fmt: skip

    def url(self, *, trusted: bool) -> str:
        """The ``rediss://`` URL of the TLS port; ``trusted``: with ``ssl_ca_certs`` (verifies)."""
        url = f"rediss://127.0.0.1:{self.tls_port}/0"
        return f"{url}?ssl_ca_certs={self.ca}" if trusted else url

    def __enter__(self) -> Self:
        self.server.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.server.close()
