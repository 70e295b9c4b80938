"""The network between an analyst and the provider: a private CA, a bad certificate.

A provider behind a TLS-intercepting gateway or a company's own CA: a real TLS server on
127.0.0.1 with a certificate signed by a CA made here. The batch runs end to end
(``df.geocode.run``).
"""

from __future__ import annotations

import datetime
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from geotoolkit.errors import ConfigurationError
from geotoolkit.policy import Backoff
from geotoolkit.providers import Nominatim

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

pytestmark = pytest.mark.faults

SECRET = "sk-tls-0123456789abcdef-key"
UA = "geotoolkit-faults/1.0 (tests@example.org)"
GOOD = b'[{"lat": "47.141", "lon": "9.5215", "display_name": "Vaduz"}]'
FAST = {"request_deadline_seconds": 2.0, "max_attempts": 3, "rate": 200.0, "concurrency": 1,
        "backoff": Backoff(initial_seconds=0.01, max_seconds=0.05, retry_after_cap_seconds=0.1),
        "gate": "memory://", "circuit_timeout_seconds": 5.0}
NOW = datetime.datetime.now(datetime.UTC)


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _certificate(subject: str, issuer: str, key: Any, signer: Any, *, ca: bool,
                 hosts: tuple[str, ...] = (), days: tuple[int, int] = (-1, 30)) -> Any:
    import ipaddress

    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW + datetime.timedelta(days=days[0]))
               .not_valid_after(NOW + datetime.timedelta(days=days[1]))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if hosts:
        names: list[x509.GeneralName] = [
            x509.IPAddress(ipaddress.ip_address(h)) if h[0].isdigit() else x509.DNSName(h)
            for h in hosts]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signer, hashes.SHA256())


class _CA:
    """A private CA (a company's, a TLS-intercepting gateway's) and server certificates."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate("Test Corp Root CA", "Test Corp Root CA", self.key, self.key, ca=True)
        self.pem = folder / "corp-ca.pem"
        self.pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def server(self, name: str, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
               days: tuple[int, int] = (-1, 30)) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(hosts[0], "Test Corp Root CA", key, self.key, ca=False, hosts=hosts,
                            days=days)
        cert_path, key_path = self.folder / f"{name}.pem", self.folder / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_path, key_path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(GOOD)))
        self.end_headers()
        self.wfile.write(GOOD)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _TLSServer(ThreadingHTTPServer):
    """Counts the connections it accepted (a TLS handshake each, failed or not)."""

    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context, self.connections = context, 0

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        self.connections += 1
        return self.context.wrap_socket(sock, server_side=True), address


@pytest.fixture
def ca(tmp_path: Path) -> _CA:
    return _CA(tmp_path)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[tuple[_TLSServer, threading.Thread]] = []

    def start(cert: Path, key: Path) -> _TLSServer:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server = _TLSServer(context)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return server

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join()


def run(url: str, addresses: list[str], **options: Any) -> pd.DataFrame:
    provider = Nominatim(url, user_agent=UA, api_key=SECRET)
    frame = pd.DataFrame({"address": addresses})
    return frame.geocode.run(provider=provider, cache=None, progress=False, **{**FAST, **options})


def _url(server: _TLSServer, host: str = "127.0.0.1") -> str:
    return f"https://{host}:{server.server_address[1]}"


@pytest.fixture(autouse=True)
def _no_ca_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def test_a_private_ca_named_by_ssl_cert_file_is_trusted(
        ca: _CA, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(*ca.server("provider"))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    result = run(_url(server), ["Städtle 1, Vaduz", "Vaduz"])
    assert list(result["geocode_status"]) == ["matched", "matched"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl rehash names the files")
def test_a_private_ca_in_the_folder_named_by_ssl_cert_dir_is_trusted(
        ca: _CA, serve: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    server = serve(*ca.server("provider", hosts=("localhost",)))
    folder = tmp_path / "certs"
    folder.mkdir()
    shutil.copy(ca.pem, folder / "corp-ca.pem")
    subprocess.run(["openssl", "rehash", str(folder)], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_DIR", str(folder))
    result = run(_url(server, "localhost"), ["Vaduz"])
    assert list(result["geocode_status"]) == ["matched"]


def test_an_ssl_cert_file_that_cannot_be_read_stops_the_run_naming_it(
        ca: _CA, serve: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    server = serve(*ca.server("provider"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigurationError, match=r"SSL_CERT_FILE=.*missing\.pem.*No such file"):
        run(_url(server), ["Vaduz"])
    assert server.connections == 0


@pytest.mark.parametrize(("certificate", "why"), [
    ("untrusted", "unable to get local issuer certificate"),
    ("wrong-host", "not valid for '127.0.0.1'"),
    ("expired", "certificate has expired"),
])
def test_a_certificate_refused_stops_the_run_at_once_with_the_reason(
        ca: _CA, serve: Any, monkeypatch: pytest.MonkeyPatch, certificate: str,
        why: str) -> None:
    """Not an outage to probe for circuit_timeout_seconds: one handshake, then a stop."""
    options: dict[str, Any] = {"untrusted": {}, "wrong-host": {"hosts": ("other.example",)},
                               "expired": {"days": (-30, -1)}}[certificate]
    server = serve(*ca.server(certificate, **options))
    if certificate != "untrusted":
        monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    with pytest.raises(ConfigurationError) as caught:
        run(_url(server), ["Städtle 1, Vaduz", "Vaduz"], circuit_timeout_seconds=600.0)
    message = str(caught.value)
    assert why in message and "SSL_CERT_FILE" in message
    assert f"127.0.0.1:{server.server_address[1]}" in message
    assert SECRET not in message
    assert server.connections == 1
