"""The engine's HTTP transport: the client, a deadline per request, a cap on the body.

httpx's timeouts are per operation (a read timeout is per read), so a server that
trickles one byte at a time never trips them. :func:`send` puts one deadline on the
whole exchange (connect, send, every byte of the body) and reads the body in chunks
up to ``max_bytes``, counted after decompression. It undoes ``gzip`` and ``deflate``
itself (``x-gzip`` too, which httpx does not know), in pieces of at most 64 KiB: httpx
inflates each chunk read whole (one 64 KiB chunk of a gzip bomb is 64 MB, and a body
gzipped twice, a few hundred bytes, is as large as it likes), so memory stays bounded by
the cap. A coding it does not know (``br``, never asked for) is left as it came, as httpx
without brotli leaves it. Foreign exceptions are mapped here, once:

- timeouts, refused or reset connections, a body cut short:
  :class:`~geotoolkit.errors.ProviderUnavailableError` (retried);
- a body that cannot be decoded (``Content-Encoding: gzip`` that is not gzip, or whose
  stream stops before its end: the trailer with its CRC never came), a body over the cap:
  :class:`~geotoolkit.errors.ProviderResponseError` (the row fails);
- a request httpx refuses to build or send (an invalid URL):
  :class:`~geotoolkit.errors.QueryError` (the row fails, nothing was sent);
- a proxy's ``407`` (or ``401``/``403``) to an HTTPS tunnel's ``CONNECT``:
  :class:`~geotoolkit.errors.AuthenticationError` (the run stops), as a 407 answer does;
- a proxy variable that cannot be used (an unknown scheme, ``socks5://`` without socksio,
  a port no proxy can have): :class:`~geotoolkit.errors.ConfigurationError`, from
  :func:`make_client`, before anything is sent;
- a TLS certificate refused (a private CA not trusted, another host's, expired):
  :class:`~geotoolkit.errors.ConfigurationError` (the run stops: no retry mends it). The
  CAs trusted are ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` where set, else certifi's.

httpx logs every request URL at INFO, httpcore the response headers at DEBUG; a filter
on each of their loggers hides credentials in those records.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import os
import ssl
import urllib.request
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import (
    ConfigurationError,
    ProviderResponseError,
    ProviderUnavailableError,
    QueryError,
)
from geotoolkit.providers.base import proxy_refused
from geotoolkit.redact import redact

__all__ = ["BEFORE_SEND", "DEFAULT_TIMEOUT", "SendVoided", "make_client", "send", "warm_up"]

#: A request extension: an async callable returning whether the request may still go,
#: asked by :func:`send` right before the request enters the client, outside its deadline
#: (a wait there is pacing, not a slow server).
BEFORE_SEND = "geotoolkit.before_send"


class SendVoided(Exception):
    """Internal: a request's ``BEFORE_SEND`` check said no; nothing was sent."""


def warm_up() -> None:
    """Import now what httpx imports on its first request (anyio's backend, ~20 ms), so a
    worker's first send is not late after its slot by its lazy imports."""
    for name in ("httpcore._backends.anyio", "anyio._backends._asyncio", "anyio.streams.tls",
                 "anyio.streams.stapled", "anyio.streams.memory", "anyio.to_thread"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

#: Connect within 5 s, each read within 20 s.
DEFAULT_TIMEOUT = httpx.Timeout(20.0, connect=5.0)

#: Headers describing the body as it came on the wire, dropped once it is decoded.
_WIRE_HEADERS = (b"content-encoding", b"content-length", b"transfer-encoding")


#: The loggers of httpx and httpcore. A logger's filters see only its own records, not
#: those of its children: httpcore logs under ``httpcore.http11`` and its siblings (at
#: DEBUG, the response headers, where a ``Location`` may echo the key), not ``httpcore``.
_HTTP_LOGGERS = ("httpx", "httpcore", "httpcore.connection", "httpcore.http11",
                 "httpcore.http2", "httpcore.proxy", "httpcore.socks")


#: The exact secrets (API keys) of the clients made in this process: a header or a body
#: httpcore logs may echo a key bare, with no ``key=`` before it for a pattern to find.
_SECRETS: set[str] = set()


class _RedactingFilter(logging.Filter):
    """httpx logs every request URL at INFO; strip credentials from those records."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage(), tuple(_SECRETS))
        record.args = None
        return True


def _install_redaction(secrets: Iterable[str | None] = ()) -> None:
    _SECRETS.update(s for s in secrets if s)
    known = [name for name in logging.Logger.manager.loggerDict
             if name.startswith(("httpx.", "httpcore."))]
    for name in (*_HTTP_LOGGERS, *known):
        log = logging.getLogger(name)
        if not any(isinstance(f, _RedactingFilter) for f in log.filters):
            log.addFilter(_RedactingFilter())


def _tls_context() -> ssl.SSLContext:
    """A verified TLS context trusting ``SSL_CERT_FILE`` and/or ``SSL_CERT_DIR`` where set
    (the OpenSSL convention httpx honours too: a company's CA, a TLS-intercepting gateway's),
    else certifi's bundle. A path that cannot be loaded is a :class:`ConfigurationError`."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    try:
        return _verified_context(cafile, capath)
    except (OSError, ssl.SSLError) as exc:  # FileNotFoundError, a file that is not PEM
        named = " and ".join(f"{var}={value}" for var, value in
                             (("SSL_CERT_FILE", cafile), ("SSL_CERT_DIR", capath)) if value)
        raise ConfigurationError(f"cannot load the CA certificates of {named} "
                                 f"({type(exc).__name__}: {exc.strerror or exc})") from exc


@functools.cache
def _verified_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """One context per CA bundle and process: building one loads the bundle (~0.1 s)."""
    if cafile is None and capath is None:
        import certifi

        cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile, capath=capath)


def make_client(
    *,
    concurrency: int,
    timeout: httpx.Timeout | float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    secrets: Iterable[str | None] = (),
) -> httpx.AsyncClient:
    """An AsyncClient sized for ``concurrency`` keep-alive connections. ``secrets``: exact
    values (the provider's API key) hidden wherever httpx and httpcore log them."""
    _install_redaction(secrets)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    if transport is None:
        _check_proxies()
    try:  # without a transport, httpx reads HTTP(S)_PROXY, ALL_PROXY and NO_PROXY here
        return httpx.AsyncClient(
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
            limits=limits,
            transport=transport,
            verify=_tls_context(),
        )
    except (ImportError, ValueError, httpx.InvalidURL) as exc:  # socks:// without socksio,
        raise ConfigurationError(    # an unknown scheme, a NO_PROXY entry httpx cannot parse
            f"the proxy named by HTTPS_PROXY / HTTP_PROXY / ALL_PROXY, or the hosts NO_PROXY "
            f"lists, cannot be used: {redact(str(exc))}") from exc


def _check_proxies() -> None:
    """Refuse a proxy variable whose port cannot be one (``:99999``, ``:abc``, an IPv6
    address whose bracket is not closed): httpx takes ``:99999`` and every row then
    fails on it with an error that names no proxy."""
    for scheme, value in urllib.request.getproxies().items():
        if scheme not in ("http", "https", "all"):
            continue
        try:
            port = urlsplit(value if "://" in value else f"http://{value}").port
        except ValueError as exc:
            port, why = -1, str(exc)
        else:
            why = "port 0"
        if port in (-1, 0):
            raise ConfigurationError(
                f"the proxy named by {scheme.upper()}_PROXY cannot be used ({why}): "
                f"{redact(value)[:200]}")


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    provider: str,
    *,
    deadline_seconds: float = 30.0,
    max_bytes: int = 5_000_000,
) -> httpx.Response:
    """Send ``request`` and read its whole body within ``deadline_seconds``.

    Returns a complete, already decoded response (no streaming left to do). See the
    module docstring for the errors. A ``BEFORE_SEND`` check that says no raises
    :class:`SendVoided`; its time does not count toward the deadline.
    """
    check = request.extensions.get(BEFORE_SEND)
    if check is not None and not await check():
        raise SendVoided
    # What ``_read`` undoes, said: with no Accept-Encoding any coding is acceptable (RFC
    # 9110), and a request built apart from the client carries none of its headers.
    request.headers.setdefault("Accept-Encoding", ACCEPT_ENCODING)
    try:
        async with asyncio.timeout(deadline_seconds):
            response = await client.send(request, stream=True)
            try:
                body = await _read(response, provider, max_bytes)
            finally:
                await response.aclose()
    except TimeoutError as exc:
        raise ProviderUnavailableError(
            f"{provider} did not answer within the {deadline_seconds:g} s deadline",
            provider=provider) from exc
    except httpx.TimeoutException as exc:
        raise ProviderUnavailableError(
            f"{provider} did not answer in time ({type(exc).__name__})", provider=provider
        ) from exc
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise QueryError(f"{provider}: the request cannot be sent ({type(exc).__name__})",
                         provider=provider) from exc
    except httpx.TransportError as exc:
        raise _transport_error(exc, provider, request.url) from exc
    # As received, in bytes: a value httpx decoded from UTF-8 or Latin-1 would not encode back
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _WIRE_HEADERS]
    return httpx.Response(response.status_code, headers=headers, content=body, request=request,
                          extensions={"http_version": response.http_version.encode()})


def _transport_error(exc: httpx.TransportError, provider: str, url: httpx.URL) -> Exception:
    """A connection that failed: an outage (retried), unless the certificate was refused,
    which no retry mends (an untrusted CA, another host's certificate, an expired one)."""
    status = str(exc)[:3]  # httpcore: "407 Proxy Authentication Required"
    if isinstance(exc, httpx.ProxyError) and status in ("401", "403", "407"):  # CONNECT refused
        return proxy_refused(provider, redact(str(exc)[:200], tuple(_SECRETS)), status=int(status))
    refused = _certificate_refused(exc)
    if refused is None:  # why, as httpx says it: "[Errno 111] Connection refused", a proxy's
        why = redact(_said(exc), tuple(_SECRETS))[:200]  # "502 Bad Gateway", "peer closed ..."
        return ProviderUnavailableError(
            f"{provider} connection failed ({type(exc).__name__}{f': {why}' if why else ''})",
            provider=provider)
    where = f"{url.host}:{url.port or 443}"
    return ConfigurationError(
        f"{provider}: the TLS certificate of {where} was refused ({refused}); a private CA "
        "(a company's, a TLS-intercepting gateway's) is trusted with SSL_CERT_FILE=/path/to/ca.pem "
        "or SSL_CERT_DIR=/path/to/folder")


def _said(exc: BaseException) -> str:
    """What ``exc`` says, or else the first error under it that says something: httpx's
    ``ReadError`` for a connection reset says nothing, the OSError it wraps "[Errno 104]
    Connection reset by peer"."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if str(seen):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return ""


def _certificate_refused(exc: BaseException) -> str | None:
    """Why the TLS handshake refused the peer's certificate, if that is what ``exc`` is."""
    seen: BaseException | None = exc
    for _ in range(8):  # httpx wraps httpcore's error, which wraps the ssl module's
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return str(seen.verify_message or seen.reason or "certificate verify failed")
        seen = seen.__cause__ or seen.__context__
    return None


async def _read(response: httpx.Response, provider: str, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in _pieces(response):
            size += len(chunk)
            if size > max_bytes:
                raise ProviderResponseError(
                    f"{provider} answered more than {max_bytes:,} bytes (HTTP "
                    f"{response.status_code}); the answer was not read", provider=provider,
                    status_code=response.status_code)
            chunks.append(chunk)
    except zlib.error as exc:  # Content-Encoding: gzip on a body that is not gzip
        raise ProviderResponseError(
            f"{provider} sent a body that cannot be decoded (Content-Encoding: "
            f"{response.headers.get('content-encoding', '')}: {exc})", provider=provider,
            status_code=response.status_code) from exc
    return b"".join(chunks)


async def _pieces(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body, its content codings undone, piece by piece as it comes off the wire."""
    try:
        whole = response.content  # a transport that answered a whole Response: read, decoded
    except httpx.ResponseNotRead:
        codings = _codings(response.headers.get_list("content-encoding", split_commas=True))
        async for raw in response.aiter_raw():
            for piece in _decoded(codings, raw):
                yield piece
        _check_ended(codings)
        return
    yield whole


def _check_ended(codings: Sequence[_Inflater]) -> None:
    """Raise ``zlib.error`` if a coding's stream began but did not end: the body was cut
    (its trailer, where gzip's CRC is, never came), though its framing was complete."""
    for inflater in codings:
        if not inflater.ended:
            raise zlib.error(f"the {inflater.coding} stream ends before it is complete: "
                             "the body was cut")


#: The content codings every request asks for: those the bounded inflater below undoes.
ACCEPT_ENCODING = "gzip, deflate"

#: The most bytes one step of decompression makes at once.
_PIECE = 65_536


class _Inflater:
    """One content coding undone (``gzip``, ``x-gzip`` or ``deflate``), in pieces of at most
    ``_PIECE`` bytes however much the input expands."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        gzip = coding in ("gzip", "x-gzip")
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16) if gzip else None
        self._head = b""  # "deflate": its first two bytes tell a zlib stream from a raw one
        self._fed = False

    @property
    def ended(self) -> bool:
        """Whether the stream is complete, or was never begun (no body: nothing to undo)."""
        if not self._fed:
            return True
        return self._inflate is not None and self._inflate.eof

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._fed = self._fed or bool(data)
        if self._inflate is None:  # "deflate" is zlib-wrapped; some servers send it raw
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS if _zlib_header(data)
                                               else -zlib.MAX_WBITS)
        while True:
            piece = self._inflate.decompress(data, _PIECE)
            data = self._inflate.unconsumed_tail
            if piece:
                yield piece
            if not data and len(piece) < _PIECE:  # input used up, no output held back
                return


def _zlib_header(data: bytes) -> bool:
    """Whether ``data`` starts with a zlib header (RFC 1950: deflate, a checksum of 31)."""
    return data[0] & 0x0F == 8 and data[0] >> 4 <= 7 and (data[0] << 8 | data[1]) % 31 == 0


def _codings(values: Sequence[str]) -> list[_Inflater]:
    """The inflaters for ``Content-Encoding``'s codings, the last applied first; codings
    that change nothing (``identity``) or that are not known are left out."""
    names = [value.strip().lower() for value in values]
    return [_Inflater(name) for name in reversed(names) if name in ("gzip", "x-gzip", "deflate")]


def _decoded(codings: Sequence[_Inflater], data: bytes) -> Iterator[bytes]:
    """``data`` (the next bytes on the wire) through every coding, piece by piece."""
    if not codings:
        if data:
            yield data
        return
    for piece in codings[0].feed(data):
        yield from _decoded(codings[1:], piece)
