"""HERE Geocoding & Search API v7, with an API key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.providers._common import HTTPProvider
from geotoolkit.results import Failure, NoMatch, Outcome, Query

__all__ = ["HERE", "Here"]

HERE = "https://geocode.search.hereapi.com"

# HERE qualified-query (``qq``) subfield for each of our Query fields.
_QUALIFIED = {"housenumber": "houseNumber", "street": "street", "city": "city",
              "county": "county", "state": "state", "postalcode": "postalCode",
              "country": "country"}


class Here(HTTPProvider):
    """HERE ``/v1/geocode``, sans-I/O; ``items[].position`` is ``{lat, lng}``.

    Structured queries use HERE's qualified query (``qq=street=…;city=…``).

    Parameters
    ----------
    api_key
        Required, sent as ``apiKey``; never shown in reprs, logs or gate keys.
    language
        Label language (``lang``, BCP 47).
    base_url, user_agent, rate
        As for every provider; the default rate is the Base plan's 5/s.

    Examples
    --------
    >>> q = Query(street="Karl Johans gate", housenumber="1", city="Oslo")
    >>> Here(api_key="example").build_request(q).url.params["qq"]
    'houseNumber=1;street=Karl Johans gate;city=Oslo'
    """

    name = "here"
    default_base_url = HERE
    key_param = "apiKey"
    key_required = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 language: str | None = None, user_agent: str | None = None,
                 rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.language = language

    def _options(self) -> dict[str, Any]:
        return {"language": self.language}

    def build_request(self, query: Query) -> httpx.Request:
        params = {"limit": "1"}
        if query.text is not None:
            params["q"] = query.text
        else:
            params["qq"] = ";".join(f"{_QUALIFIED[k]}={v.replace(';', ' ')}"
                                    for k, v in query.structured().items())
        if self.language:
            params["lang"] = self.language
        return self._get("/v1/geocode", params)

    def _check(self, response: httpx.Response) -> Outcome | None:
        if response.status_code in (400, 404, 405, 422):
            try:
                body = response.json()
            except ValueError:
                return None
            title = body.get("title") if isinstance(body, Mapping) else None
            if isinstance(title, str):
                return Failure(reason=f"here rejected the query (HTTP {response.status_code}): "
                                      f"{title}", error="QueryError", provider=self.name)
        return None

    def _parse_body(self, body: Any) -> Outcome:
        items = body.get("items") if isinstance(body, Mapping) else None
        if not isinstance(items, list):
            raise self._bad("answer without an items list", body)
        if not items:
            return NoMatch(provider=self.name)
        item = items[0]
        position = item.get("position") if isinstance(item, Mapping) else None
        if not isinstance(position, Mapping):
            raise self._bad("item without a position", item)
        return self._match(position.get("lng"), position.get("lat"), item.get("title"), item)
