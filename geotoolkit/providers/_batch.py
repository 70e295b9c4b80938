"""Batch bookkeeping shared by the providers with a batch endpoint: pure, no I/O.

A batch is planned the same way when its request is built and when its answer is
parsed: queries that cannot be sent are left out (and answered as ``Failure``), the
others keep their position in the caller's sequence. Settling the answer always
gives exactly one outcome per query, in order, whatever the provider sent back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from geotoolkit.errors import QueryError
from geotoolkit.providers.protocol import MISSING_FROM_BATCH
from geotoolkit.results import Failure, Outcome, Query, ReverseQuery

__all__ = ["Item", "plan", "settle"]

#: A query to send and its position in the caller's sequence.
Item = tuple[int, Query | ReverseQuery]


def plan(queries: Sequence[Query | ReverseQuery], refuse: Callable[[Query | ReverseQuery], None],
         provider: str) -> tuple[list[Item], dict[int, Failure]]:
    """The items to send, and a ``Failure`` for each query ``refuse`` raised ``QueryError`` for.

    >>> def refuse(query):
    ...     if not query.text:
    ...         raise QueryError("empty address")
    >>> items, refused = plan([Query(text="Oslo"), Query(text="")], refuse, "demo")
    >>> items, refused[1].reason
    ([(0, Query(text='Oslo', housenumber=None, street=None, city=None, county=None, state=None, \
postalcode=None, country=None))], 'empty address')
    """
    items: list[Item] = []
    refused: dict[int, Failure] = {}
    for position, query in enumerate(queries):
        try:
            refuse(query)
        except QueryError as exc:
            refused[position] = Failure(reason=str(exc), error="QueryError", provider=provider)
        else:
            items.append((position, query))
    return items, refused


def settle(count: int, refused: Mapping[int, Failure], found: Mapping[int, Outcome],
           whole: Outcome | None, provider: str) -> list[Outcome]:
    """Exactly ``count`` outcomes: refused, else the whole batch's, else found, else missing.

    ``whole`` (an answer for the whole batch, such as a 400 or a body that does not
    parse) stands for every query that was sent; positions outside ``range(count)``
    in ``found`` are ignored.

    >>> missing = settle(2, {}, {0: Failure(reason="x")}, None, "demo")[1]
    >>> missing.reason, missing.error
    ('missing from the batch answer', 'ProviderResponseError')
    """
    outcomes: list[Outcome] = []
    for position in range(count):
        outcome = refused.get(position) or whole or found.get(position)
        if outcome is None:
            outcome = Failure(reason=MISSING_FROM_BATCH, error="ProviderResponseError",
                              provider=provider)
        outcomes.append(outcome)
    return outcomes
