"""The sans-I/O provider protocol and helpers shared by providers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, Protocol, runtime_checkable

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
from geotoolkit.policy import parse_retry_after
from geotoolkit.redact import redact
from geotoolkit.results import STRUCTURED_FIELDS, Failure, Outcome, Query, ReverseQuery, reverse_query

__all__ = [
    "DEFAULT_MAX_QUERY_CHARS",
    "MAX_REASON_CHARS",
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
    "response_date",
    "safe_text",
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


@dataclasses.dataclass(frozen=True)
class BatchPolicy:
    """What a provider's batch endpoint takes, and what one batch costs at the gate.

    Parameters
    ----------
    max_queries
        The most queries one request may carry (the engine sends bigger sets in chunks).
    cost
        ``"request"``: the whole batch takes one gate slot (the provider counts the
        upload as one request); ``"query"``: one slot per query, where the provider
        counts each query toward its rate limit or quota.
    max_bytes
        The largest body the endpoint accepts, when it documents one: a batch whose
        body is bigger is refused by ``build_batch_request`` (``QueryError``); send
        fewer queries.
    reverse
        Whether the batch may carry ``ReverseQuery`` items (else they are refused, row
        by row, as ``Failure``).

    Examples
    --------
    >>> policy = BatchPolicy(max_queries=1000, cost="query")
    >>> policy.slots(250), BatchPolicy(max_queries=10_000, cost="request").slots(250)
    (250, 1)
    """

    max_queries: int
    cost: Literal["request", "query"]
    max_bytes: int | None = None
    reverse: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.max_queries, bool) or not isinstance(self.max_queries, int) \
                or self.max_queries < 1:
            raise ConfigurationError(f"max_queries must be a positive integer, got {self.max_queries!r}")
        if self.cost not in ("request", "query"):
            raise ConfigurationError(f"cost must be 'request' or 'query', got {self.cost!r}")
        if self.max_bytes is not None and (isinstance(self.max_bytes, bool) or not isinstance(
                self.max_bytes, int) or self.max_bytes < 1):
            raise ConfigurationError(f"max_bytes must be a positive integer, got {self.max_bytes!r}")

    def slots(self, queries: int) -> int:
        """The gate slots a batch of ``queries`` queries takes."""
        return 1 if self.cost == "request" else queries


@runtime_checkable
class ForwardProvider(Protocol):
    """The least a provider is: it geocodes addresses (what geotoolkit asked of one first).

    ``resolve_provider`` accepts any such object: one that says nothing of reverse
    geocoding or batches has neither (read them with :func:`can_reverse` and
    :func:`batch_policy`, never as attributes).
    """

    name: str
    host: str
    default_rate: float | None
    #: The longest query text (characters) the provider accepts; longer ones are refused.
    max_query_chars: int

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret strings this provider sends (its API key), or ``()``: hidden everywhere."""
        ...

    @property
    def gate_key(self) -> str:
        """The fleet gate key: provider host and a hash of the API key."""
        ...

    def cache_namespace(self) -> str:
        """What besides the address changes an answer: provider, host, parameters."""
        ...

    def build_request(self, query: Query) -> httpx.Request:
        """The request for ``query``; ``QueryError`` for a query that must not be sent."""
        ...

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        """Return an outcome, or raise the ProviderError that stops or retries.

        Never raises anything but a ``ProviderError``, whatever the response holds.
        """
        ...


@runtime_checkable
class Provider(Protocol):
    """A geocoding service, sans-I/O: it builds requests and parses responses.

    A query is a ``Query`` (an address: forward geocoding) or a ``ReverseQuery`` (a
    point, ``lon`` first: reverse geocoding); both methods dispatch on its type. A
    provider without a reverse endpoint (``supports_reverse = False``) refuses a
    ``ReverseQuery`` with ``QueryError`` and never sends it. A provider with a batch
    endpoint describes it in ``batch`` (else ``None``) and builds one request for many
    queries, whose answer is one outcome per query, in order.

    Every geotoolkit provider is one; an object that only has the members of
    :class:`ForwardProvider` is accepted too (see there).
    """

    name: str
    host: str
    default_rate: float | None
    #: The longest query text (characters) the provider accepts; longer ones are refused.
    max_query_chars: int
    #: Whether ``build_request`` takes a ``ReverseQuery``.
    supports_reverse: bool
    #: The batch endpoint, or ``None`` when there is none.
    batch: BatchPolicy | None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret strings this provider sends (its API key), or ``()``: hidden everywhere."""
        ...

    @property
    def gate_key(self) -> str:
        """The fleet gate key: provider host and a hash of the API key."""
        ...

    def cache_namespace(self) -> str:
        """What besides the address changes an answer: provider, host, parameters."""
        ...

    def build_request(self, query: Query | ReverseQuery) -> httpx.Request:
        """The request for ``query``; ``QueryError`` for a query that must not be sent."""
        ...

    def parse_response(self, query: Query | ReverseQuery, response: httpx.Response) -> Outcome:
        """Return an outcome, or raise the ProviderError that stops or retries.

        Never raises anything but a ``ProviderError``, whatever the response holds.
        """
        ...

    def build_batch_request(self, queries: Sequence[Query | ReverseQuery]) -> httpx.Request:
        """One request for ``queries`` (at most ``batch.max_queries``).

        A query that cannot be sent is left out of the request and answered as a
        ``Failure`` by ``parse_batch_response``; ``QueryError`` when none can be sent
        or the body is over ``batch.max_bytes``; ``ConfigurationError`` without a batch
        endpoint or for more than ``batch.max_queries`` queries.
        """
        ...

    def parse_batch_response(self, queries: Sequence[Query | ReverseQuery],
                             response: httpx.Response) -> list[Outcome]:
        """One outcome per query, in order; or raise what stops or retries the whole batch.

        Raises only a ``ProviderError`` (``RateLimitError``, ``AuthenticationError``,
        ``ProviderUnavailableError``, ...), exactly as ``parse_response``; a query the
        answer does not account for is a ``Failure`` ("missing from the batch answer").
        """
        ...


def can_reverse(provider: object) -> bool:
    """Whether ``provider`` geocodes points; ``False`` for one that does not say.

    >>> class Old:
    ...     name = "old"
    >>> can_reverse(Old())
    False
    """
    return getattr(provider, "supports_reverse", False) is True


def batch_policy(provider: object) -> BatchPolicy | None:
    """The provider's ``BatchPolicy``, or ``None`` (also for one that does not say)."""
    policy = getattr(provider, "batch", None)
    return policy if isinstance(policy, BatchPolicy) else None


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
        return response.json()
    except (ValueError, UnicodeError, RecursionError):
        return None


def check_user_agent(user_agent: str | None, provider: str) -> str:
    """Refuse an empty user agent or an HTTP library's default one."""
    if not isinstance(user_agent, str) or not user_agent.strip():
        raise ConfigurationError(
            f"{provider} requires a user_agent that identifies your application "
            "(for example 'acme-geocoder/1.0 (ops@acme.example)')")
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


def raise_for_status(response: httpx.Response, provider: str) -> None:
    """Map the statuses every provider shares to exceptions; let 200 and 4xx through."""
    status = response.status_code
    if status in (401, 403):
        raise AuthenticationError(
            f"{provider} refused the credentials (HTTP {status})",
            provider=provider, status_code=status)
    if status == 402:
        raise QuotaExceededError(
            f"{provider} quota exhausted (HTTP 402)", provider=provider, status_code=status)
    if status in (429, 503):
        hint = parse_retry_after(response.headers.get("retry-after"), now=response_date(response))
        raise RateLimitError(
            f"{provider} is throttling (HTTP {status})",
            retry_after=hint, provider=provider, status_code=status)
    if status >= 500:
        raise ProviderUnavailableError(
            f"{provider} is unavailable (HTTP {status})", provider=provider, status_code=status)


def decode_json(response: httpx.Response, provider: str, secrets: tuple[str, ...] = ()) -> Any:
    """The JSON body, or ProviderResponseError carrying a redacted prefix of the raw text.

    Bodies that are not JSON, not UTF-8, numbers of thousands of digits and nesting
    deeper than Python parses are all refused the same way.
    """
    try:
        return response.json()
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise ProviderResponseError(
            f"{provider} sent a body that is not JSON (HTTP {response.status_code})",
            raw=redact(_prefix(response), secrets), provider=provider,
            status_code=response.status_code,
        ) from exc


def _prefix(response: httpx.Response, size: int = 1000) -> str:
    return response.content[:size * 4].decode("utf-8", errors="replace")[:size]


def client_error(response: httpx.Response, provider: str, secrets: tuple[str, ...] = ()) -> Failure:
    """A 4xx other than auth/quota/throttle: the query itself was refused."""
    body = json_or_none(response)
    message: object = ""
    if isinstance(body, Mapping):
        err = body.get("error", body.get("message", ""))
        message = err.get("message", "") if isinstance(err, Mapping) else err
    elif body is None:
        message = _prefix(response, 200)
    text = safe_text(message, secrets) if message else ""
    reason = f"{provider} rejected the query (HTTP {response.status_code})"
    return Failure(reason=f"{reason}: {text}" if text else reason, error="QueryError",
                   provider=provider)
