"""HERE Geocoding & Search API v7, with an API key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider, parse_base_url
from geotoolkit.providers.base import json_or_none
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["HERE", "HERE_REVERSE", "Here"]

HERE = "https://geocode.search.hereapi.com"
#: HERE serves reverse geocoding from its own host.
HERE_REVERSE = "https://revgeocode.search.hereapi.com"

# HERE qualified-query (``qq``) subfield for each of our Query fields.
_QUALIFIED = {"housenumber": "houseNumber", "street": "street", "city": "city",
              "county": "county", "state": "state", "postalcode": "postalCode",
              "country": "country"}


class Here(HTTPProvider):
    """HERE ``/v1/geocode``, sans-I/O; ``items[].position`` is ``{lat, lng}``.

    Structured queries use HERE's qualified query (``qq=street=…;city=…``).

    Reverse: ``/v1/revgeocode?at=LAT,LNG``, **latitude first** (the query's ``lon, lat``
    are swapped here, once), on HERE's reverse host :data:`HERE_REVERSE` (or on
    ``reverse_base_url``; with another ``base_url``, on that one). ``items: []`` is a
    ``NoMatch``; the item is read as forward (a reverse item has no ``scoring``).

    The precision comes from ``resultType`` refined by ``houseNumberType`` (``PA``
    point address, ``interpolated``), ``localityType`` and ``administrativeAreaType``;
    a ``houseNumberFallback`` (the nearest known house, not the one asked) is ``street``,
    a place whose primary category is "Natural and Geographical" (``350-...``) a ``feature``;
    the score is ``scoring.queryScore`` (0-1). The place id is HERE's ``id``, the
    country code its alpha-3 ``countryCode`` turned into alpha-2, the bbox ``mapView``.

    Parameters
    ----------
    api_key
        Required, sent as ``apiKey``; never shown in reprs, logs or gate keys.
    language
        Label language (``lang``, BCP 47).
    reverse_base_url
        Where reverse queries go; default :data:`HERE_REVERSE` for HERE's own
        ``base_url``, else ``base_url`` itself (a proxy or a simulator serving both).
    base_url, user_agent, rate
        As for every provider; the default rate is the Base plan's 5/s.

    Examples
    --------
    >>> q = Query(street="Karl Johans gate", housenumber="1", city="Oslo")
    >>> Here(api_key="example").build_request(q).url.params["qq"]
    'houseNumber=1;street=Karl Johans gate;city=Oslo'
    >>> url = Here(api_key="example").build_request(ReverseQuery(10.75, 59.91)).url
    >>> url.host, url.path, url.params["at"]
    ('revgeocode.search.hereapi.com', '/v1/revgeocode', '59.910000,10.750000')
    """

    name = "here"
    default_base_url = HERE
    key_param = "apiKey"
    key_required = True
    supports_reverse = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 language: str | None = None, reverse_base_url: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.language = language
        default = HERE_REVERSE if self.base_url == HERE else self.base_url
        self.reverse_base_url = parse_base_url(reverse_base_url or default)[0]

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"language": self.language}
        if self.reverse_base_url not in (HERE_REVERSE, self.base_url):  # an unusual split only
            options["reverse_base_url"] = self.reverse_base_url
        return options

    def _build(self, query: Query) -> httpx.Request:
        params = {"limit": "1"}
        if query.text is not None:
            params["q"] = query.text
        else:
            params["qq"] = ";".join(f"{_QUALIFIED[k]}={v.replace(';', ' ')}"
                                    for k, v in query.structured().items())
        if self.language:
            params["lang"] = self.language
        return self._get("/v1/geocode", params)

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        params = {"at": f"{lat},{lon}", "limit": "1"}  # LAT first
        if self.language:
            params["lang"] = self.language
        return self._get("/v1/revgeocode", params, self.reverse_base_url)

    def _check(self, response: httpx.Response) -> Outcome | None:
        if response.status_code in (400, 404, 405, 422):
            title = f.dig(json_or_none(response), "title")
            if isinstance(title, str):
                return Failure(reason=self._reason(f"here rejected the query (HTTP "
                                                   f"{response.status_code}): {title}"),
                               error="QueryError", provider=self.name)
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
        words = {key: item.get(key) for key in ("houseNumberFallback", "houseNumberType",
                                                "localityType", "administrativeAreaType",
                                                "resultType")}
        words["categories[].id"] = _category_group(item.get("categories"))
        return self._match(position.get("lng"), position.get("lat"), item.get("title"), item,
                           precision=precision_of(self.name, words),
                           score=f.scaled(f.dig(item, "scoring", "queryScore"), 1.0),
                           place=_place(item))


def _category_group(categories: object) -> str | None:
    """The first part of a place's primary category id (``"350-3500-0304"``, a lake:
    ``"350"``), or of its first category when none is marked primary."""
    if not isinstance(categories, list):
        return None
    found = [c for c in categories[:50] if isinstance(c, Mapping)]
    primary = next((c for c in found if c.get("primary") is True), found[0] if found else None)
    group = f.text(primary.get("id")) if primary is not None else None
    return group.split("-", 1)[0] if group else None


def _place(item: Mapping[str, Any]) -> Place:
    address, view = item.get("address"), item.get("mapView")
    return f.place(
        place_id=item.get("id"), housenumber=f.dig(address, "houseNumber"),
        street=f.dig(address, "street"), postcode=f.dig(address, "postalCode"),
        locality=f.first_text(address, "city", "district"),
        region=f.first_text(address, "state", "county"),
        country_code=f.dig(address, "countryCode"),
        bbox=f.bbox(f.dig(view, "west"), f.dig(view, "south"), f.dig(view, "east"),
                    f.dig(view, "north")))
