"""A base class for the HTTP providers: configuration, secrets, the parse template."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import (
    ConfigurationError,
    GeotoolkitError,
    ProviderResponseError,
    QueryError,
)
from geotoolkit.keys import gate_key
from geotoolkit.providers import _batch
from geotoolkit.providers._fields import decimal
from geotoolkit.providers._fields import label as clean_label
from geotoolkit.providers.base import (
    DEFAULT_MAX_QUERY_CHARS,
    NOT_A_QUERY_ERROR,
    BatchPolicy,
    check_point,
    check_query,
    check_user_agent,
    client_error,
    decode_json,
    namespace,
    point_text,
    raise_for_status,
    redirected,
    safe_text,
    said,
)
from geotoolkit.providers.policies import POLICIES
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Place, Precision, Query, ReverseQuery

# What data (not our code's intent) can make a parser raise: a hostile or broken answer.
_DATA_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError,
                RecursionError, UnicodeError)

__all__ = ["DEFAULT_USER_AGENT", "HTTPProvider", "lonlat", "one_line", "parse_base_url", "policy_rate"]


def _version() -> str:
    try:
        return metadata.version("geotoolkit")
    except metadata.PackageNotFoundError:
        return "0"


#: Sent to providers that do not require an application-specific User-Agent.
DEFAULT_USER_AGENT = f"geotoolkit/{_version()}"


def one_line(query: Query) -> str:
    """A query as one line of text: free text as is, structured fields joined.

    >>> one_line(Query(housenumber="1", street="Karl Johans gate", city="Oslo"))
    '1 Karl Johans gate, Oslo'
    """
    if query.text is not None:
        return query.text
    fields = query.structured()
    street = " ".join(v for v in (fields.pop("housenumber", None), fields.pop("street", None)) if v)
    return ", ".join(v for v in (street, *fields.values()) if v)


class HTTPProvider:
    """Shared plumbing: base URL, API key (never shown), user agent, rate, gate key.

    Subclasses set ``name``, ``default_base_url`` and ``key_param`` and implement
    ``_build`` and ``_parse_body``; they may override ``_check`` to map
    provider-specific statuses before the common ones. A provider with a reverse
    endpoint sets ``supports_reverse`` and implements ``_build_reverse`` (and
    ``_parse_reverse`` when its answer differs from the forward one); one with a batch
    endpoint sets ``batch`` and implements ``_build_batch`` and ``_parse_batch``.

    ``build_request`` refuses (``QueryError``) text that cannot be encoded and queries
    longer than ``max_query_chars``; ``parse_response`` turns every answer it cannot
    read into a ``Failure`` (never a foreign exception), and text from a response is
    redacted of ``secrets`` before it enters a reason or an exception.

    The key is kept in a slot, out of ``vars()``: what encodes an object from its
    attributes (FastAPI's ``jsonable_encoder``, with which Prefect records a flow run's
    parameters) never sees it; pickling and copying still carry it (dask's workers).
    """

    __slots__ = ("__dict__", "__weakref__", "_api_key")

    name: str
    default_base_url: ClassVar[str]
    key_param: ClassVar[str | None] = None
    key_required: ClassVar[bool] = False
    user_agent_required: ClassVar[bool] = False
    #: The longest query text sent (see ``DEFAULT_MAX_QUERY_CHARS``: a GET URL's budget).
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS
    #: Whether the provider has a reverse endpoint (``build_request`` takes a ``ReverseQuery``).
    supports_reverse: bool = False
    #: The batch endpoint, or ``None``.
    batch: BatchPolicy | None = None

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        self.base_url, self.host = parse_base_url(base_url or self.default_base_url)
        self._api_key = api_key.strip() if isinstance(api_key, str) and api_key.strip() else None
        if self._requires_key() and self._api_key is None:
            raise ConfigurationError(
                f"{self.name} requires an api_key (on the command line: --api-key-env VAR, "
                "VAR the environment variable that holds it)")
        if user_agent is None and not self.user_agent_required:
            self.user_agent = DEFAULT_USER_AGENT
        else:
            self.user_agent = check_user_agent(user_agent, self.name)
        self.default_rate: float | None = policy_rate(self.name, self.host, rate)

    def _requires_key(self) -> bool:
        return self.key_required

    @property
    def gate_key(self) -> str:
        """The fleet gate key: host and a hash of the API key."""
        return gate_key(self.host, self._api_key)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The API key this provider sends, or ``()``: hidden from every text it produces."""
        return () if self._api_key is None else (self._api_key,)

    def cache_namespace(self) -> str:
        """What besides the address changes an answer: provider, host, options."""
        return namespace(self.name, self.host, *self._options().values())

    def _options(self) -> dict[str, Any]:
        """The options that change answers (shown in repr and the cache namespace)."""
        return {}

    def _get(self, path: str, params: dict[str, str], base_url: str | None = None) -> httpx.Request:
        """A GET of ``path`` on ``base_url`` (default the provider's), the key added."""
        if self._api_key is not None and self.key_param is not None:
            params = {**params, self.key_param: self._api_key}
        return httpx.Request("GET", f"{base_url or self.base_url}{path}", params=params,
                             headers=self._headers())

    def _headers(self) -> dict[str, str]:
        return {"User-Agent": self.user_agent, "Accept": "application/json"}

    def build_request(self, query: Query | ReverseQuery) -> httpx.Request:
        """The request for ``query`` (an address or a point); ``QueryError`` for one not to send."""
        if isinstance(query, ReverseQuery):
            if not self.supports_reverse:
                raise QueryError(f"{self.name} has no reverse geocoding endpoint", provider=self.name)
            check_point(query, self.name)
            return self._guarded(self._build_reverse, query)
        check_query(query, self.name, self.max_query_chars)
        return self._guarded(self._build, query)

    def _guarded(self, build: Any, query: Any) -> httpx.Request:
        """``build(query)``, with what httpx or the encoders raise mapped to ``QueryError``."""
        try:
            request: httpx.Request = build(query)
        except GeotoolkitError:
            raise
        except (httpx.InvalidURL, UnicodeError, ValueError, TypeError) as exc:
            raise QueryError(f"{self.name} cannot send this query: "
                             f"{safe_text(exc, self.secrets, 200)}", provider=self.name) from exc
        return request

    def _build(self, query: Query) -> httpx.Request:
        raise NotImplementedError

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        raise NotImplementedError

    def _point(self, query: ReverseQuery) -> tuple[str, str]:
        """``(lon, lat)`` as text, rounded as the query's cache key: lon first, always."""
        return point_text(query.lon, query.decimals), point_text(query.lat, query.decimals)

    def parse_response(self, query: Query | ReverseQuery, response: httpx.Response) -> Outcome:
        """Return an outcome, or raise the ProviderError that stops or retries.

        Whatever the response holds, nothing but a ``ProviderError`` is raised: an
        answer that cannot be read is a ``Failure`` (``error="ProviderResponseError"``).
        """
        if isinstance(query, ReverseQuery):
            if not self.supports_reverse:
                return Failure(reason=f"{self.name} has no reverse geocoding endpoint",
                               error="QueryError", provider=self.name)
            return self._parse(response, self._json(self._parse_reverse))
        return self._parse(response, self._json(self._parse_body))

    def _parse(self, response: httpx.Response, parse_body: Any) -> Outcome:
        outcome: Outcome = self._read(lambda: self._answer(response, parse_body), "an answer")
        return outcome

    def _answer(self, response: httpx.Response, parse_body: Any) -> Any:
        """The shared template: provider statuses, shared statuses, 4xx, 3xx, then the body.

        A 407, 408 or 425 (``NOT_A_QUERY_ERROR``) goes to the shared mapping first: a body in
        the provider's error form does not make it the query's fault."""
        if response.status_code in NOT_A_QUERY_ERROR:
            raise_for_status(response, self.name, self.secrets)
        early = self._check(response)
        if early is not None:
            return early
        raise_for_status(response, self.name, self.secrets)
        if response.status_code >= 400:
            return client_error(response, self.name, self.secrets)
        if 300 <= response.status_code < 400:
            return redirected(response, self.name, self.secrets)
        try:
            return parse_body(response)
        except ProviderResponseError as exc:
            told = self._told(exc, response)
            if told is exc:
                raise
            raise told from exc

    def _told(self, exc: ProviderResponseError, response: httpx.Response) -> ProviderResponseError:
        """``exc`` with what the answer says (``said``: an error message in its JSON, the
        text of an HTML page: a captive portal's, a block page's) where ``exc`` does not
        say it already; "answer without a results list" alone does not tell the reader
        that the network asks them to sign in, or that the key's plan lacks the API."""
        why = said(response, self.secrets)
        if not why or why in str(exc):
            return exc
        return ProviderResponseError(f"{exc}; the answer says: {why}", raw=exc.raw,
                                     provider=exc.provider, status_code=exc.status_code)

    def _read(self, read: Any, what: str) -> Any:
        """``read()``; what a hostile answer makes it raise is a ``Failure`` (ProviderErrors pass)."""
        try:
            return read()
        except ProviderResponseError as exc:
            return Failure(reason=str(exc), error=type(exc).__name__, provider=self.name)
        except GeotoolkitError:
            raise
        except _DATA_ERRORS as exc:
            return Failure(reason=self._reason(f"{self.name} sent {what} it could not read "
                                               f"({type(exc).__name__}: {exc})"),
                           error="ProviderResponseError", provider=self.name)

    def _json(self, parse_body: Any) -> Any:
        """``parse_body`` applied to the decoded JSON of a response."""
        return lambda response: parse_body(decode_json(response, self.name, self.secrets))

    def _reason(self, text: object) -> str:
        """Text (from a response, in part) fit for a reason: redacted and capped."""
        return safe_text(text, self.secrets)

    def _check(self, response: httpx.Response) -> Outcome | None:
        """Provider-specific statuses, before the shared mapping; ``None`` to go on."""
        return None

    def _parse_body(self, body: Any) -> Outcome:
        raise NotImplementedError

    def _parse_reverse(self, body: Any) -> Outcome:
        """A reverse answer; by default read as a forward one (the same format)."""
        return self._parse_body(body)

    def _nothing_here(self) -> NoMatch:
        """The provider answered a reverse query and found nothing at the point."""
        return NoMatch(reason="nothing found at this point", provider=self.name)

    # -- batch ------------------------------------------------------------------------------

    def build_batch_request(self, queries: Sequence[Query | ReverseQuery]) -> httpx.Request:
        """One request for ``queries``; unsendable ones are left out (their ``Failure`` comes
        from ``parse_batch_response``).

        ``ConfigurationError`` without a batch endpoint, for no queries or more than
        ``batch.max_queries``; ``QueryError`` when none can be sent or the body is
        over ``batch.max_bytes``.
        """
        policy = self._batch_policy()
        if not 0 < len(queries) <= policy.max_queries:
            raise ConfigurationError(f"a {self.name} batch takes 1 to {policy.max_queries} queries, "
                                     f"got {len(queries)}")
        items, refused = _batch.plan(queries, self._refuse, self.name)
        if not items:
            raise QueryError(f"no query of this batch can be sent to {self.name} "
                             f"(the first: {refused[0].reason})", provider=self.name)
        request = self._guarded(self._build_batch, items)
        size = len(request.read())
        if policy.max_bytes is not None and size > policy.max_bytes:
            raise QueryError(f"this {self.name} batch is {size:,} bytes, over the {policy.max_bytes:,}"
                             "-byte limit: send fewer queries", provider=self.name)
        return request

    def _batch_policy(self) -> BatchPolicy:
        if self.batch is None:
            raise ConfigurationError(f"{self.name} has no batch endpoint")
        return self.batch

    def _refuse(self, query: Query | ReverseQuery) -> None:
        """Raise ``QueryError`` for a query this provider's batch must not carry."""
        if isinstance(query, ReverseQuery):
            if self.batch is None or not self.batch.reverse:
                raise QueryError(f"{self.name}'s batch endpoint takes addresses, not points",
                                 provider=self.name)
            check_point(query, self.name)
        else:
            check_query(query, self.name, self.max_query_chars)

    def parse_batch_response(self, queries: Sequence[Query | ReverseQuery],
                             response: httpx.Response) -> list[Outcome]:
        """One outcome per query, in order; raises only the ProviderError that stops or retries.

        A row the provider answers as nothing found is a ``NoMatch``, one it could not
        read a ``Failure`` with the reason; a whole answer that cannot be read (or a
        4xx) is every sent query's ``Failure``; a query the answer does not account
        for is a ``Failure`` ("missing from the batch answer"); extra rows are ignored.
        """
        if self.batch is None:
            whole: Outcome = Failure(reason=f"{self.name} has no batch endpoint", error="QueryError",
                                     provider=self.name)
            return _batch.settle(len(queries), {}, {}, whole, self.name)
        items, refused = _batch.plan(queries, self._refuse, self.name)
        found, answer = self._batch_answer(response, items)
        return _batch.settle(len(queries), refused, found, answer, self.name)

    def _batch_answer(self, response: httpx.Response,
                      items: list[_batch.Item]) -> tuple[Mapping[int, Outcome], Outcome | None]:
        """The outcomes by position, or one outcome for the whole batch."""
        found = self._read(lambda: self._answer(response, lambda r: self._parse_batch(r, items)),
                           "a batch answer")
        return (found, None) if isinstance(found, Mapping) else ({}, found)

    def _build_batch(self, items: list[_batch.Item]) -> httpx.Request:
        raise NotImplementedError

    def _parse_batch(self, response: httpx.Response,
                     items: list[_batch.Item]) -> Mapping[int, Outcome] | Outcome:
        """The outcomes of a 2xx batch answer by position in the caller's sequence, or one
        outcome for the whole batch (an error object in a 200)."""
        raise NotImplementedError

    def _row(self, parse: Any, value: object) -> Outcome:
        """One row of a batch answer read with ``parse``: what it cannot read is that row's Failure."""
        outcome: Outcome = self._read(lambda: parse(value), "a batch row")
        return outcome

    def _match(self, lon: object, lat: object, label: object, raw: Any, *,
               precision: Precision = "unknown", score: float | None = None,
               place: Place | None = None) -> Match:
        """A Match from the provider's coordinate values, checked to be a real lon/lat.

        The label is capped (``MAX_LABEL_CHARS``); ``score`` must already be in [0, 1].
        """
        try:
            point = lonlat(lon, lat)
        except (TypeError, ValueError, OverflowError) as exc:
            raise self._bad(f"result without a usable lon/lat ({exc})", raw) from exc
        return Match(lon=point[0], lat=point[1], label=clean_label(label), provider=self.name,
                     raw=dict(raw) if isinstance(raw, Mapping) else {}, precision=precision,
                     score=score, place=Place() if place is None else place)

    def _bad(self, message: str, raw: object, status_code: int = 200) -> ProviderResponseError:
        """A ProviderResponseError whose message and raw excerpt are redacted and capped."""
        return ProviderResponseError(f"{self.name}: {self._reason(message)}",
                                     raw=safe_text(_excerpt(raw), self.secrets, 1000),
                                     provider=self.name, status_code=status_code)

    def __repr__(self) -> str:
        parts = [repr(self.base_url)]
        parts += [f"{k}={v!r}" for k, v in self._options().items() if v not in (None, (), "")]
        if self._api_key is not None:
            parts.append("api_key='***'")
        return f"{type(self).__name__}({', '.join(parts)})"



def _excerpt(raw: object) -> str:
    """The start of ``str(raw)``; never raises (deep nesting, huge numbers)."""
    try:
        return str(raw)[:1000]
    except (RecursionError, ValueError):
        return f"<{type(raw).__name__} that cannot be shown>"


def parse_base_url(base_url: str) -> tuple[str, str]:
    """``base_url`` without a trailing slash, and its host (``host:port``, no user info).

    ``ConfigurationError`` for anything but an http(s) URL with a host and a port in
    1-65535 (an IPv6 address whose bracket is not closed, ``:99999``, ``:abc``, a control
    character): it is refused before anything is sent, not met by every row as an error.
    """
    try:
        parts = urlsplit(base_url) if isinstance(base_url, str) else None
        port = None if parts is None else parts.port
        if parts is not None:
            httpx.URL(base_url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise ConfigurationError(f"base_url is not a usable URL ({exc}): "
                                 f"{safe_text(repr(base_url), limit=200)}") from None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"base_url must be an http(s) URL, got "
                                 f"{safe_text(repr(base_url), limit=200)}")
    if port == 0:
        raise ConfigurationError(f"base_url has port 0, which nothing listens on: "
                                 f"{safe_text(repr(base_url), limit=200)}")
    return base_url.rstrip("/"), parts.netloc.lower().rsplit("@", 1)[-1]


def policy_rate(name: str, host: str, rate: float | None) -> float | None:
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not (
                rate > 0 and not math.isnan(rate)):  # math.inf: no limit at all
            raise ConfigurationError(f"rate must be positive, got {rate!r}")
        return float(rate)
    policy = POLICIES.get(name)
    if policy is not None and host in policy.hosts:
        return policy.rate_per_second
    return None


def lonlat(lon: object, lat: object) -> tuple[float, float]:
    """Finite floats from JSON numbers or numeric strings, within the WGS84 ranges.

    A string must write its number as JSON would (``_fields.decimal``: ``"4_7"`` or
    ``"٤٧"``, which ``float()`` reads as 47, are not coordinates). Raises ``TypeError``
    or ``ValueError`` (never ``OverflowError``) for anything else.

    >>> lonlat("10.75", 59.91)
    (10.75, 59.91)
    """
    if isinstance(lon, bool) or isinstance(lat, bool):
        raise TypeError("a boolean is not a coordinate")
    if not isinstance(lon, int | float | str) or not isinstance(lat, int | float | str):
        raise TypeError("a coordinate must be a number or a numeric string")
    try:
        x, y = (decimal(v) if isinstance(v, str) else float(v) for v in (lon, lat))
    except OverflowError as exc:
        raise ValueError("a coordinate too large to be a number") from exc
    if not (math.isfinite(x) and -180.0 <= x <= 180.0):
        raise ValueError(f"lon {x!r} out of range")
    if not (math.isfinite(y) and -90.0 <= y <= 90.0):
        raise ValueError(f"lat {y!r} out of range")
    return x, y
