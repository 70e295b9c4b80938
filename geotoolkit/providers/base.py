"""Helpers shared by providers, and the provider protocol (from ``protocol``, re-exported)."""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from geotoolkit.errors import (
    AuthenticationError,
    ConfigurationError,
    ProviderResponseError,
    ProviderUnavailableError,
    QueryError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.policy import parse_rate_limit_reset, parse_retry_after
from geotoolkit.providers.protocol import BatchPolicy, ForwardProvider, Provider, batch_policy, can_reverse
from geotoolkit.redact import redact
from geotoolkit.results import STRUCTURED_FIELDS, Failure, Query, ReverseQuery, reverse_query

__all__ = [
    "DEFAULT_MAX_QUERY_CHARS",
    "MAX_REASON_CHARS",
    "NOT_A_QUERY_ERROR",
    "BatchPolicy",
    "ForwardProvider",
    "Provider",
    "batch_policy",
    "can_reverse",
    "check_point",
    "check_query",
    "check_user_agent",
    "decode_json",
    "json_or_none",
    "point_text",
    "raise_for_status",
    "redirected",
    "response_date",
    "safe_text",
    "said",
    "stated_wait",
]

#: The longest query text a GET API is sent by default. Servers commonly cap a request
#: line at about 8 KB; a character may take up to 12 once UTF-8 encoded and escaped,
#: and the key and options need room too. Real addresses are far shorter.
DEFAULT_MAX_QUERY_CHARS = 2000
#: Text from a response (an error message, a body prefix) is cut to this in a reason.
MAX_REASON_CHARS = 500

_LIBRARY_AGENTS = re.compile(
    r"^\s*(python-httpx|python-requests|python-urllib|python/|urllib3|aiohttp|curl|wget|"
    r"go-http-client|java/|okhttp|libwww-perl|geopy)", re.I)


def check_point(query: ReverseQuery, provider: str) -> None:
    """Refuse, with ``QueryError``, a point that is not a real ``lon, lat`` pair.

    >>> check_point(ReverseQuery(9.52, 47.14), "photon")
    >>> check_point(ReverseQuery(47.14, 95.0), "photon")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.QueryError: latitude 95.0 out of range [-90, 90]
    """
    try:
        checked = reverse_query(query.lon, query.lat)
    except (OverflowError, ValueError, TypeError) as exc:  # an int too large for a float
        raise QueryError(f"coordinates are not usable numbers ({exc})", provider=provider) from None
    if isinstance(checked, str):
        raise QueryError(checked, provider=provider)
    if isinstance(query.decimals, bool) or not isinstance(query.decimals, int):
        raise QueryError(f"decimals must be an integer, got {query.decimals!r}", provider=provider)


def point_text(value: float, decimals: int) -> str:
    """A coordinate as the query's key rounds it: fixed notation, never ``-0`` or ``1e-07``.

    What is sent is what the cache key says (``ReverseQuery.key()``); ``decimals`` is
    held to 0-10 (10 decimals of a degree are about 0.01 mm).

    >>> point_text(9.5219512, 6), point_text(-0.0000001, 6), point_text(1e-7, 7)
    ('9.521951', '0.000000', '0.0000001')
    """
    digits = min(max(decimals, 0), 10)
    return f"{round(float(value), digits) + 0.0:.{digits}f}"


def check_query(query: Query, provider: str, max_chars: int) -> None:
    """Refuse, with ``QueryError``, a query that must not be sent.

    Text that is not valid Unicode (a lone surrogate cannot be encoded as UTF-8) or
    longer than ``max_chars`` characters in all (the free text, or the structured
    fields together).

    Examples
    --------
    >>> check_query(Query(text="Vaduz"), "nominatim", 2000)
    >>> check_query(Query(text="x" * 70_000), "nominatim", 2000)
    Traceback (most recent call last):
    ...
    geotoolkit.errors.QueryError: address too long for nominatim: 70 000 characters, at most 2 000
    >>> check_query(Query(street="Stä" + chr(0xD800) + "dtle"), "nominatim", 2000)
    Traceback (most recent call last):
    ...
    geotoolkit.errors.QueryError: street is not valid text (lone surrogate U+D800 at position 3)
    """
    parts = {"address": query.text} if query.text is not None else {
        name: getattr(query, name) for name in STRUCTURED_FIELDS}
    total = 0
    for name, value in parts.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise QueryError(f"{name} is not text ({type(value).__name__})", provider=provider)
        _check_encodable(name, value, provider)
        total += len(value)
    if total > max_chars:
        raise QueryError(f"address too long for {provider}: {_thousands(total)} characters, "
                         f"at most {_thousands(max_chars)}", provider=provider)


def _check_encodable(name: str, value: str, provider: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = value[exc.start]
        what = "lone surrogate" if 0xD800 <= ord(char) <= 0xDFFF else "unencodable character"
        raise QueryError(f"{name} is not valid text ({what} U+{ord(char):04X} at position "
                         f"{exc.start})", provider=provider) from None


def _thousands(number: int) -> str:
    return f"{number:,}".replace(",", " ")


def safe_text(text: object, secrets: tuple[str, ...] = (), limit: int = MAX_REASON_CHARS) -> str:
    """Text from a response, fit for a reason or an exception: redacted, then capped.

    >>> safe_text("bad request: key=sk-123456 q=Vaduz", ("sk-123456",))
    'bad request: key=*** q=Vaduz'
    """
    cleaned = redact(text, secrets)
    return cleaned if len(cleaned) <= limit else cleaned[:limit] + "…"


def json_or_none(response: httpx.Response) -> Any:
    """The JSON body, or ``None`` when there is none that parses (never raises)."""
    try:
        return _json(response)
    except (ValueError, UnicodeError, RecursionError):
        return None


# JSON may escape a lone UTF-16 surrogate ("\ud800"), which no UTF-8 text can hold: SQLite,
# PostgreSQL and Arrow refuse it when the row is stored or exported. It may escape NUL too
# ("\u0000"): PostgreSQL refuses it in text (one such label ended the batch on a
# PostgreSQL cache) and GDAL cuts the text there. Escapes of any surrogate, paired ones too
# (an emoji), and of NUL tell which bodies need a look.
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)")
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def _json(response: httpx.Response) -> Any:
    """The decoded JSON body, each lone surrogate and NUL in its text made U+FFFD."""
    body = response.json()
    return _valid_text(body) if _UNSTORABLE_ESCAPE.search(response.content) else body


def _valid_text(value: Any) -> Any:
    """``value`` (decoded JSON) with every lone surrogate and NUL in its strings and keys
    made U+FFFD."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_valid_text(v) for v in value]
    if isinstance(value, dict):
        return {_valid_text(k): _valid_text(v) for k, v in value.items()}
    return value


def check_user_agent(user_agent: str | None, provider: str) -> str:
    """Refuse an empty user agent or an HTTP library's default one."""
    if not isinstance(user_agent, str) or not user_agent.strip():
        raise ConfigurationError(
            f"{provider} requires a user_agent that identifies your application "
            "(for example 'acme-geocoder/1.0 (ops@acme.example)'; on the command line: "
            "--user-agent)")
    if _LIBRARY_AGENTS.match(user_agent):
        raise ConfigurationError(
            f"{provider} rejects stock library user agents like {user_agent.strip()!r}: "
            "name your application and a contact")
    return user_agent.strip()


def namespace(*parts: object) -> str:
    """A short stable digest of the parts that change a provider's answers."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def response_date(response: httpx.Response) -> datetime | None:
    """The response's ``Date`` header as an aware datetime, if valid."""
    value = response.headers.get("date")
    if not value:
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None


def stated_wait(response: httpx.Response) -> float | None:
    """The seconds the provider says to wait: ``Retry-After`` (an HTTP-date read against the
    response's ``Date``), else the quota's reset in its rate-limit headers; ``None``: none.

    >>> stated_wait(httpx.Response(402, headers={"X-RateLimit-Reset": "90"}))
    90.0
    """
    date = response_date(response)
    hint = parse_retry_after(response.headers.get("retry-after"), now=date)
    if hint is None:  # no Retry-After: the quota's reset, where the provider says it
        hint = parse_rate_limit_reset(response.headers, now=date)
    return hint


def raise_for_status(response: httpx.Response, provider: str, secrets: tuple[str, ...] = ()) -> None:
    """Map the statuses every provider shares to exceptions; let 2xx, 3xx and the other 4xx
    through. A 5xx, a 408 and a 425 (a request timeout, "too early": no fault of the
    query's) are a ``ProviderUnavailableError``, retried.

    A 401, 402 or 403 stops the run: its message ends with what the provider said why
    (``said``), redacted of ``secrets``: a disabled key, a rejected IP, a service not
    enabled and a usage-policy block need different fixes; without ``secrets`` (no key
    sent) it does not speak of credentials (a block page, a bot challenge, an IP refused).
    A 407 stops it too (a proxy on the way wants credentials, :func:`proxy_refused`): no
    row's fault, and no outage.
    """
    status = response.status_code
    if status == 407:
        raise proxy_refused(provider, said(response, secrets))
    if status in (401, 402, 403):
        why = said(response, secrets)
        why = f": {why}" if why else ""
        if status == 402:  # its reset, where the provider says it: the fleet stop's end
            raise QuotaExceededError(f"{provider} quota exhausted (HTTP 402){why}",
                                     retry_after=stated_wait(response),
                                     provider=provider, status_code=status)
        what = "the credentials" if secrets else "the request, which carried no API key,"
        raise AuthenticationError(f"{provider} refused {what} (HTTP {status}){why}",
                                  provider=provider, status_code=status)
    if status in (429, 503):
        raise RateLimitError(
            f"{provider} is throttling (HTTP {status})",
            retry_after=stated_wait(response), provider=provider, status_code=status)
    if status >= 500 or status in _NOT_NOW:
        why = said(response, secrets)  # a proxy's or a gateway's page tells whose failure it is
        what = _NOT_NOW.get(status, "is unavailable")
        raise ProviderUnavailableError(
            f"{provider} {what} (HTTP {status}){f': {why}' if why else ''}",
            provider=provider, status_code=status)


#: 4xx statuses that say "not now", not "not this query": retried as an outage is. A 408
#: is a server (or a proxy) that gave up waiting for the request, often on a keep-alive
#: connection it was closing as the request came; a 425 one that will not risk a replay.
_NOT_NOW = {408: "timed out waiting for the request", 425: "would not take the request yet"}

#: 4xx statuses that are no verdict on the query (a proxy's 407, a 408, a 425), whatever
#: error form their body takes: :func:`raise_for_status` maps them before a provider reads
#: a 4xx with its own error object as the query refused.
NOT_A_QUERY_ERROR = frozenset({407, *_NOT_NOW})


def _absolute(response: httpx.Response, location: str) -> str:
    """``location`` joined to the URL of the request ``response`` answers, if it has one."""
    try:
        return str(response.request.url.copy_with(query=None, fragment=None).join(location))
    except (RuntimeError, httpx.InvalidURL, ValueError):  # no request; a Location httpx refuses
        return location


def proxy_refused(provider: str, why: str = "", *, status: int = 407) -> AuthenticationError:
    """A proxy between here and the provider refused the request: a 407 (to a request, or
    to the ``CONNECT`` of an HTTPS tunnel) wants credentials; a 401/403 to a ``CONNECT``
    refuses those given, or the destination."""
    why = f": {why}" if why else ""
    cause = ("its credentials are missing or wrong" if status == 407 else
             "to the CONNECT of an HTTPS tunnel: wrong credentials, or a destination it forbids")
    return AuthenticationError(
        f"{provider}: the proxy on the way refused the request (HTTP {status}, {cause}){why}; "
        "credentials go in HTTPS_PROXY / HTTP_PROXY as http://user:password@proxy:port",
        provider=provider, status_code=status)


_HEAD = re.compile(r"<(head|script|style)\b.*?</\1\s*>", re.I | re.S)
_TAG = re.compile(r"<[^>]*>")
_SPACES = re.compile(r"\s+")
#: Where providers put why they refused, most telling first: OpenCage's ``status.message``,
#: Google's ``error_message``, HERE's ``error_description``, then the common ``message``,
#: ``error`` and ``title``.
_WHY = (("status", "message"), ("error_message",), ("error_description",), ("message",),
        ("error", "message"), ("error",), ("title",))


def said(response: httpx.Response, secrets: tuple[str, ...] = (), limit: int = 200) -> str:
    """What an error answer says, as one line of plain text (redacted, capped); ``""`` if
    nothing: the JSON body's message (``status.message``, ``error_description``,
    ``message``, ``error``, ``title``), else the text of the body without its markup.

    >>> said(httpx.Response(403, json={"status": {"code": 403, "message": "IP address rejected"}}))
    'IP address rejected'
    >>> said(httpx.Response(403, text="<html><head><title>x</title></head><h1>Access blocked</h1></html>"))
    'Access blocked'
    """
    body = json_or_none(response)
    if body is None:
        text = _TAG.sub(" ", _HEAD.sub(" ", _prefix(response, 4000)))
        return safe_text(_SPACES.sub(" ", html.unescape(text)).strip(), secrets, limit)
    for path in _WHY:
        value: Any = body
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value.strip():
            return safe_text(_SPACES.sub(" ", value).strip(), secrets, limit)
    return ""


def decode_json(response: httpx.Response, provider: str, secrets: tuple[str, ...] = ()) -> Any:
    """The JSON body, or ProviderResponseError carrying a redacted prefix of the raw text.

    Bodies that are not JSON, not UTF-8, numbers of thousands of digits and nesting
    deeper than Python parses are all refused the same way. A lone surrogate or a NUL that
    JSON escapes (``"\\ud800"``, ``"\\u0000"``) is read as U+FFFD: no store or file could
    hold it. An empty body (a 204, a 200 cut to nothing by a proxy) is said to be empty; the
    message names the ``Content-Type`` where there is one (``text/html``: a captive
    portal's page, a block page).
    """
    try:
        return _json(response)
    except (ValueError, UnicodeError, RecursionError) as exc:
        what = "an empty body" if not response.content.strip() else "a body that is not JSON"
        kind = safe_text(response.headers.get("content-type", "").split(";", 1)[0].strip(),
                         secrets, 100)
        raise ProviderResponseError(
            f"{provider} sent {what} (HTTP {response.status_code}{f', {kind}' if kind else ''})",
            raw=redact(_prefix(response), secrets), provider=provider,
            status_code=response.status_code,
        ) from exc


def _prefix(response: httpx.Response, size: int = 1000) -> str:
    """The start of a body as text; a NUL (which only JSON escapes, and ``_json`` reads as
    U+FFFD) is U+FFFD too: PostgreSQL refuses it in text, GDAL cuts the text there."""
    return response.content[:size * 4].decode("utf-8", errors="replace")[:size].replace("\x00", "\ufffd")


def client_error(response: httpx.Response, provider: str, secrets: tuple[str, ...] = ()) -> Failure:
    """A 4xx other than auth/quota/throttle: the query itself was refused; the reason ends
    with what the answer says why (``said``: one line, no markup)."""
    text = said(response, secrets, MAX_REASON_CHARS)
    reason = f"{provider} rejected the query (HTTP {response.status_code})"
    return Failure(reason=f"{reason}: {text}" if text else reason, error="QueryError",
                   provider=provider)


def redirected(response: httpx.Response, provider: str, secrets: tuple[str, ...] = ()) -> Failure:
    """A 3xx: not the answer, whatever its body holds; redirects are not followed (one
    would carry the request, key and all, wherever the server points).

    The reason names where it points (a relative ``Location`` made absolute against the
    request's URL), without its query string; a 3xx that points nowhere (a 304 to a
    request that was not conditional, a 307 without ``Location``) says so instead.

    >>> moved = httpx.Response(301, headers={"Location": "https://geo.example/search?key=k"})
    >>> where, advice = redirected(moved, "nominatim").reason.split(", ")
    >>> where
    'nominatim answered a redirect (HTTP 301) to https://geo.example/search'
    >>> advice
    'not followed: use the address it points to as the base URL'
    >>> redirected(httpx.Response(304), "photon").reason  # doctest: +NORMALIZE_WHITESPACE
    'photon answered HTTP 304 (not modified) to a request that was not conditional: not an
    answer (a cache or a proxy on the way?)'
    """
    status = response.status_code
    location = response.headers.get("location", "").split("?", 1)[0].split("#", 1)[0].strip()
    if not location:
        what = ("HTTP 304 (not modified) to a request that was not conditional" if status == 304
                else f"a redirect (HTTP {status}) that points nowhere (no Location)")
        return Failure(reason=f"{provider} answered {what}: not an answer (a cache or a proxy "
                              "on the way?)", error="ProviderResponseError", provider=provider)
    where = safe_text(_absolute(response, location), secrets, 200)
    return Failure(reason=f"{provider} answered a redirect (HTTP {status}) to {where}, "
                          "not followed: use the address it points to as the base URL",
                   error="ProviderResponseError", provider=provider)
