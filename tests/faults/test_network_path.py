"""The network between an analyst and the provider: a private CA, a bad certificate, a proxy.

A provider behind a TLS-intercepting gateway or a company's own CA: a real TLS server on
127.0.0.1 with a certificate signed by a CA made here. A company's HTTP proxy, named by
``HTTP_PROXY`` / ``HTTPS_PROXY``: a tiny forwarding proxy on 127.0.0.1 (plain requests in
absolute form, ``CONNECT`` tunnels) that may want credentials. The batch runs end to end
(``df.geocode.run``).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.client
import logging
import select
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
import pytest
from loopback_support import Quiet, serving

from geotoolkit.errors import AuthenticationError, ConfigurationError
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


class _Handler(Quiet):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.reply(200, [("Content-Type", "application/json")], GOOD)


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


def _serving(make: Callable[..., ThreadingHTTPServer]) -> Iterator[Callable[..., Any]]:
    """``start(*args)``: a server ``make(*args)`` serving in a thread, shut down after the test."""
    with contextlib.ExitStack() as servers:
        yield lambda *args: servers.enter_context(serving(make(*args)))


def _tls_server(cert: Path, key: Path) -> _TLSServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return _TLSServer(context)


@pytest.fixture
def serve() -> Iterator[Any]:
    yield from _serving(_tls_server)


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


PROXY_USER, PROXY_PASSWORD = "alice", "pr0xy-pa55word-42"


class _ProxyHandler(Quiet):
    """Forwards ``GET http://host/...`` and tunnels ``CONNECT host:port``, once the client
    gave the proxy's credentials (when it wants some)."""

    protocol_version = "HTTP/1.1"
    server: _Proxy

    def _allowed(self) -> bool:
        self.server.seen.append(f"{self.command} {self.path}")
        if self.server.credentials is None:
            return True
        token = base64.b64encode(self.server.credentials.encode()).decode()
        if self.headers.get("Proxy-Authorization") == f"Basic {token}":
            return True
        page = b"<html><body><h1>407 Proxy Authentication Required</h1></body></html>"
        self.reply(407, [("Proxy-Authenticate", 'Basic realm="corp"'),
                         ("Content-Type", "text/html")], page)
        return False

    def do_GET(self) -> None:
        if not self._allowed():
            return
        target = urlsplit(self.path)
        upstream = http.client.HTTPConnection(target.hostname or "", target.port, timeout=5)
        try:
            upstream.request("GET", f"{target.path}?{target.query}")
        except OSError:
            return self._bad_gateway(b"<html><body><h1>502 Bad Gateway</h1>"
                                     b"<p>corp-proxy: the upstream host is unreachable</p></body></html>")
        answer = upstream.getresponse()
        self.reply(answer.status, [("Content-Type", answer.getheader("Content-Type", ""))],
                   answer.read())
        upstream.close()

    def do_CONNECT(self) -> None:
        if not self._allowed():
            return
        if self.server.forbid_tunnels:
            self.reply(403, [], b"")
            return
        host, port = self.path.rsplit(":", 1)
        try:
            upstream = socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            return self._bad_gateway(b"")
        with upstream:
            self.send_response(200, "Connection established")
            self.end_headers()
            self._pipe(self.connection, upstream)
        self.close_connection = True

    def _bad_gateway(self, page: bytes) -> None:
        self.reply(502, [("Content-Type", "text/html")], page)

    @staticmethod
    def _pipe(client: socket.socket, upstream: socket.socket) -> None:
        while True:
            ready, _, _ = select.select([client, upstream], [], [], 5)
            if not ready:
                return
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                (upstream if sock is client else client).sendall(data)


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, credentials: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.credentials, self.seen = credentials, list[str]()
        self.forbid_tunnels = False


@pytest.fixture
def proxy() -> Iterator[Any]:
    yield from _serving(_Proxy)


@pytest.fixture
def plain() -> Iterator[str]:
    """The provider on plain HTTP."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def _proxy_url(server: _Proxy, userinfo: str = "") -> str:
    return f"http://{userinfo}127.0.0.1:{server.server_address[1]}"


@pytest.fixture(autouse=True)
def _no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_the_proxy_named_by_http_proxy_carries_the_run_and_no_proxy_goes_around_it(
        proxy: Any, plain: str, monkeypatch: pytest.MonkeyPatch) -> None:
    server = proxy(f"{PROXY_USER}:{PROXY_PASSWORD}")
    monkeypatch.setenv("HTTP_PROXY", _proxy_url(server, f"{PROXY_USER}:{PROXY_PASSWORD}@"))
    assert list(run(plain, ["Vaduz"])["geocode_status"]) == ["matched"]
    assert [seen.split("?")[0] for seen in server.seen] == [f"GET {plain}/search"]
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert list(run(plain, ["Schaan"])["geocode_status"]) == ["matched"]
    assert len(server.seen) == 1


def test_the_proxy_named_by_https_proxy_tunnels_to_a_provider_on_a_private_ca(
        proxy: Any, ca: _CA, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = serve(*ca.server("provider"))
    server = proxy(f"{PROXY_USER}:{PROXY_PASSWORD}")
    monkeypatch.setenv("HTTPS_PROXY", _proxy_url(server, f"{PROXY_USER}:{PROXY_PASSWORD}@"))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    assert list(run(_url(provider), ["Vaduz", "Schaan"])["geocode_status"]) == ["matched"] * 2
    assert server.seen[0] == f"CONNECT 127.0.0.1:{provider.server_address[1]}"


@pytest.mark.parametrize("tunnel", [False, True], ids=["http", "https-connect"])
@pytest.mark.parametrize("userinfo", ["", f"{PROXY_USER}:wrong-{PROXY_PASSWORD}@"],
                         ids=["no-credentials", "wrong-credentials"])
def test_a_proxy_that_wants_credentials_stops_the_run_saying_so_and_hides_them(
        proxy: Any, plain: str, ca: _CA, serve: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, tunnel: bool, userinfo: str) -> None:
    """A 407 is no row's fault and no outage: not every row dead-lettered as 'rejected the
    query', nor probed for circuit_timeout_seconds."""
    server = proxy(f"{PROXY_USER}:{PROXY_PASSWORD}")
    if tunnel:
        url = _url(serve(*ca.server("provider")))
        monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    else:
        url = plain
    monkeypatch.setenv("HTTPS_PROXY" if tunnel else "HTTP_PROXY", _proxy_url(server, userinfo))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuthenticationError) as caught:
        run(url, ["Vaduz", "Schaan", "Balzers"], circuit_timeout_seconds=600.0)
    message = str(caught.value)
    assert "proxy" in message and "407" in message and "HTTPS_PROXY" in message
    assert caught.value.status_code == 407
    assert len(server.seen) == 1
    for text in (message, repr(caught.value), caplog.text):
        assert PROXY_PASSWORD not in text and SECRET not in text


def test_a_proxy_that_forbids_the_tunnel_stops_the_run_saying_so(
        proxy: Any, ca: _CA, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = proxy()
    server.forbid_tunnels = True
    monkeypatch.setenv("HTTPS_PROXY", _proxy_url(server))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    with pytest.raises(AuthenticationError, match=r"proxy .*HTTP 403.*CONNECT.*403 Forbidden"):
        run(_url(serve(*ca.server("provider"))), ["Vaduz", "Schaan"], circuit_timeout_seconds=600.0)
    assert len(server.seen) == 1


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("tunnel", [False, True], ids=["http", "https-connect"])
def test_a_proxy_that_cannot_reach_the_provider_fails_the_rows_with_what_it_said(
        proxy: Any, monkeypatch: pytest.MonkeyPatch, tunnel: bool) -> None:
    """An outage, retried as documented; the reason shows it was the proxy's answer."""
    server = proxy()
    monkeypatch.setenv("HTTPS_PROXY" if tunnel else "HTTP_PROXY", _proxy_url(server))
    url = f"{'https' if tunnel else 'http'}://127.0.0.1:{_dead_port()}"
    result = run(url, ["Vaduz"], max_attempts=2, circuit_failures=50, full_results=True)
    assert list(result["geocode_status"]) == ["failed"]
    reason = result["geocode_reason"].iloc[0]
    assert ("ProxyError: 502 Bad Gateway" if tunnel else
            "(HTTP 502): 502 Bad Gateway corp-proxy: the upstream host is unreachable") in reason
    assert len(server.seen) == 2


@pytest.mark.parametrize(("variable", "value", "why"), [
    ("HTTP_PROXY", f"ftp://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:2121", "Unknown scheme"),
    ("ALL_PROXY", f"socks5://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:1080", "socks"),
    # a traceback (httpx.InvalidURL), and every row failed on a port no proxy can have
    ("HTTP_PROXY", f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:squid", "HTTP_PROXY"),
    ("HTTPS_PROXY", "http://[::1:3128", "HTTPS_PROXY cannot be used (Invalid IPv6 URL)"),
    ("HTTP_PROXY", f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:99999", "Port out of range"),
    ("ALL_PROXY", "127.0.0.1:0", "ALL_PROXY cannot be used (port 0)"),
    ("NO_PROXY", "localhost:abc", "NO_PROXY"),  # it blamed HTTP_PROXY, which was fine
])
def test_a_proxy_from_the_environment_that_cannot_be_used_stops_the_run_naming_it(
        plain: str, monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
        why: str) -> None:
    if why == "socks":
        try:
            import socksio  # noqa: F401
        except ImportError:
            why = "socksio"
        else:
            pytest.skip("socksio is installed: httpx can use a SOCKS proxy")
    monkeypatch.setenv(variable, value)
    if variable == "NO_PROXY":
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    with pytest.raises(ConfigurationError) as caught:
        run(plain, ["Vaduz"])
    message = str(caught.value)
    assert why in message and "proxy" in message.lower()
    assert PROXY_PASSWORD not in message and PROXY_PASSWORD not in repr(caught.value)
