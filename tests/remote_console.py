"""A remote console for the tests of web/remote.py: another `plet web` in a process of its
own, over a cluster of its own, served over https with a certificate signed by a private CA
made here (the `cryptography` package), so the console under test verifies it against the
clusters file's `ca_file`.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.timing import scaled

_URL = re.compile(r"Web console: (https?://\S+?)/?\s")


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA's certificate (PEM): a clusters file's ca_file
    cert: Path  # the server's certificate for 127.0.0.1 and localhost, signed by the CA
    key: Path
    other_ca: Path  # a CA that signed nothing here: verifying against it must fail


def make_pki(directory: Path) -> Pki:
    """A private CA and a server certificate for 127.0.0.1 / localhost, in `directory`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def ca(label: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(label))
            .issuer_name(name(label))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
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
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        return cert, key

    ca_cert, ca_key = ca("plet test CA")
    other_cert, _ = ca("plet other CA")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = Pki(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "other-ca.pem",
    )
    files.ca.write_bytes(ca_cert.public_bytes(pem))
    files.other_ca.write_bytes(other_cert.public_bytes(pem))
    files.cert.write_bytes(cert.public_bytes(pem))
    files.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return files


def _plet() -> list[str]:
    script = Path(sys.executable).parent / "plet"
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli"]


class RemotePletWeb:
    """`plet web --cluster PATH --port 0 ...` in its own process; `url` once it listens."""

    def __init__(self, cluster_path: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PLET_CLUSTER",)}
        env["PLET_ADMIN_PASSWORD"] = "remote-admin-password-1"  # admin exists already
        self.proc = subprocess.Popen(
            [
                *_plet(),
                "web",
                "--cluster",
                str(cluster_path),
                "--port",
                "0",
                "--no-replicate",
                *args,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._printed = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self._printed.wait(scaled(90)) or self.proc.poll() is not None:
            self.stop()
            raise AssertionError(f"plet web did not start:\n{''.join(self.lines)}")
        found = _URL.search("".join(self.lines))
        assert found is not None
        self.url = found.group(1)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if _URL.search(line):
                self._printed.set()
        self._printed.set()  # ended: whoever waits finds out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=scaled(60))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(5)
