"""The provider protocol: what the engine asks of a geocoding service, and its batch policy.

``Provider`` is the whole protocol (forward and reverse geocoding, batches);
``ForwardProvider`` the least an object must have to be used as a provider (one
written before reverse geocoding and batches existed): :func:`can_reverse` and
:func:`batch_policy` read the capabilities of either, safely.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import httpx

from geotoolkit.errors import ConfigurationError
from geotoolkit.results import Outcome, Query, ReverseQuery

__all__ = ["MISSING_FROM_BATCH", "BatchPolicy", "ForwardProvider", "Provider", "batch_policy",
           "can_reverse"]

#: The reason of a query a batch answer does not account for (the engine sends it again
#: alone, through the single-query endpoint).
MISSING_FROM_BATCH = "missing from the batch answer"


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
