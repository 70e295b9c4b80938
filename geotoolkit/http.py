"""The HTTP adapter: client construction, transport-error mapping, key redaction."""

from __future__ import annotations

import functools
import logging
import re
import ssl

import httpx

from geotoolkit.errors import ProviderUnavailableError

__all__ = ["DEFAULT_TIMEOUT", "make_client", "redact", "send"]

#: Connect within 5 s, read within 20 s.
DEFAULT_TIMEOUT = httpx.Timeout(20.0, connect=5.0)

_SECRET_PARAMS = re.compile(
    r"(?i)\b(key|api_?key|apikey|access_token|token|app_code|client_secret|auth)=[^&\s\"']+")


def redact(text: str) -> str:
    """Replace the values of credential query parameters with ``***``.

    >>> redact("GET https://h/search?q=Vaduz&key=s3cret&limit=1")
    'GET https://h/search?q=Vaduz&key=***&limit=1'
    """
    return _SECRET_PARAMS.sub(lambda m: f"{m.group(1)}=***", text)


class _RedactingFilter(logging.Filter):
    """httpx logs every request URL at INFO; strip credentials from those records."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


def _install_redaction() -> None:
    for name in ("httpx", "httpcore"):
        log = logging.getLogger(name)
        if not any(isinstance(f, _RedactingFilter) for f in log.filters):
            log.addFilter(_RedactingFilter())


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verified TLS context per process: building one loads the CA bundle (~0.1 s)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def make_client(
    *,
    concurrency: int,
    timeout: httpx.Timeout | float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An AsyncClient sized for ``concurrency`` keep-alive connections."""
    _install_redaction()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        limits=limits,
        transport=transport,
        verify=_tls_context(),
    )


async def send(client: httpx.AsyncClient, request: httpx.Request, provider: str) -> httpx.Response:
    """Send ``request``; map timeouts and transport failures to ProviderUnavailableError."""
    try:
        return await client.send(request)
    except httpx.TimeoutException as exc:
        raise ProviderUnavailableError(
            f"{provider} did not answer in time ({type(exc).__name__})", provider=provider
        ) from exc
    except httpx.TransportError as exc:
        raise ProviderUnavailableError(
            f"{provider} connection failed ({type(exc).__name__})", provider=provider
        ) from exc
