"""Esri ArcGIS World Geocoding Service (or an ArcGIS Enterprise GeocodeServer)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.errors import (
    AuthenticationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from geotoolkit.providers import _fields as f
from geotoolkit.providers._batch import Item
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers.base import BatchPolicy, decode_json
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["ARCGIS_BATCH", "ARCGIS_WORLD", "ArcGIS"]

ARCGIS_WORLD = "https://geocode-api.arcgis.com/arcgis/rest/services/World/GeocodeServer"
#: ``geocodeAddresses``: the World service's ``MaxBatchSize`` is 1,000 addresses, and
#: each address is billed as one (stored) geocode.
ARCGIS_BATCH = BatchPolicy(max_queries=1000, cost="query")

# findAddressCandidates parameter for each of our Query fields (Address is built apart).
_STRUCTURED = {"city": "City", "county": "Subregion", "state": "Region",
               "postalcode": "Postal", "country": "CountryCode"}
_WGS84 = (4326, None)
# The candidate attributes asked for (outFields): precision, score and the Place.
_OUT_FIELDS = ("Match_addr,Addr_type,Type,Score,AddNum,StPreDir,StPreType,StName,StType,StDir,"
               "Postal,City,Subregion,Region,Country")


class ArcGIS(HTTPProvider):
    """ArcGIS ``findAddressCandidates`` (``f=json``), sans-I/O; ``location`` is ``{x: lon, y: lat}``.

    Errors arrive as HTTP 200 with ``{"error": {"code": …}}``: 498/499 (bad or
    missing token), 401 and 403 raise ``AuthenticationError``, 429 pauses
    (``RateLimitError``), 5xx codes are retried, others become a ``Failure``.
    Output is requested in WGS84 (``outSR=4326``) and checked.

    Reverse: ``reverseGeocode?location=X,Y``, **longitude first** (x, y in WGS84: the
    simple syntax is always WGS84); the answer is one ``address`` (attributes) and its
    ``location``; ``{"error": {"details": ["Unable to find address for the specified
    location."]}}`` is a ``NoMatch``. A reverse match has no score.

    Batch (:data:`ARCGIS_BATCH`): ``POST geocodeAddresses`` with ``addresses`` =
    ``{"records": [{"attributes": {"OBJECTID": …, "SingleLine": …}}]}`` (the position
    in the batch is the ``OBJECTID``, echoed as each location's ``ResultID``);
    ``Status`` ``M`` (matched) and ``T`` (tied: the best of equals) are matches, ``U``
    a ``NoMatch``. An ArcGIS Enterprise locator with a smaller ``MaxBatchSize``
    geocodes only the first ones: the others come back as missing (``Failure``).

    The precision comes from ``Addr_type`` (``PointAddress``, ``StreetAddress`` =
    interpolated, ``StreetName``, ``Postal``…; a ``Locality`` refined by ``Type``, and a
    ``POI`` whose ``Type`` is a mountain, a lake, a park... is a ``feature``);
    the score is the candidate's ``score`` / 100; the bbox its ``extent``. ArcGIS
    gives no stable id.

    Parameters
    ----------
    base_url
        A GeocodeServer URL; default the World Geocoding Service, which requires
        an ``api_key`` (sent as ``token``).
    api_key
        Never shown in reprs, logs or gate keys.
    for_storage
        Ask for results you may store (``forStorage=true``; uses credits). The
        terms forbid storing other results, which includes geotoolkit's cache.
    user_agent, rate
        As for every provider; no rate is published (the service throttles).

    Examples
    --------
    >>> ArcGIS(api_key="example").build_request(Query(text="Oslo")).url.params["SingleLine"]
    'Oslo'
    >>> ArcGIS(api_key="example").build_request(ReverseQuery(10.75, 59.91)).url.params["location"]
    '10.750000,59.910000'
    """

    name = "arcgis"
    default_base_url = ARCGIS_WORLD
    key_param = "token"
    supports_reverse = True
    batch = ARCGIS_BATCH

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 for_storage: bool = False, user_agent: str | None = None,
                 rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.for_storage = bool(for_storage)

    def _requires_key(self) -> bool:
        return self.host == "geocode-api.arcgis.com"

    def _options(self) -> dict[str, Any]:
        return {"for_storage": self.for_storage or None}

    def _build(self, query: Query) -> httpx.Request:
        params = {"f": "json", "maxLocations": "1", "outSR": "4326", "outFields": _OUT_FIELDS,
                  "forStorage": self._for_storage()}
        if query.text is not None:
            params["SingleLine"] = query.text
        else:
            params.update(_address_fields(query))
        return self._get("/findAddressCandidates", params)

    def _for_storage(self) -> str:
        return "true" if self.for_storage else "false"

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        return self._get("/reverseGeocode", {"f": "json", "location": f"{lon},{lat}",  # x,y: LON first
                                             "outSR": "4326", "forStorage": self._for_storage()})

    def _build_batch(self, items: list[Item]) -> httpx.Request:
        records = [{"attributes": {"OBJECTID": position, **_batch_fields(query)}}
                   for position, query in items]
        form = {"f": "json", "outSR": "4326", "outFields": _OUT_FIELDS,
                "addresses": json.dumps({"records": records}, ensure_ascii=False)}
        params = {} if self._api_key is None else {"token": self._api_key}
        return httpx.Request("POST", f"{self.base_url}/geocodeAddresses", params=params, data=form,
                             headers=self._headers())

    def _parse_body(self, body: Any) -> Outcome:
        if not isinstance(body, Mapping):
            raise self._bad("answer is not an object", body)
        if isinstance(body.get("error"), Mapping):
            return self._error(body["error"])
        candidates = body.get("candidates")
        if not isinstance(candidates, list):
            raise self._bad("answer without candidates", body)
        self._check_wgs84(body.get("spatialReference"))
        if not candidates:
            return NoMatch(provider=self.name)
        return self._candidate(candidates[0])

    def _check_wgs84(self, reference: object) -> None:
        wkid = reference.get("latestWkid", reference.get("wkid")) if isinstance(reference, Mapping) else None
        if wkid not in _WGS84:
            raise self._bad(f"coordinates in spatial reference {wkid}, not WGS84", reference)

    def _candidate(self, candidate: object) -> Match:
        """A candidate (or a batch location): ``address``, ``location`` {x, y}, ``score``, attributes."""
        location = candidate.get("location") if isinstance(candidate, Mapping) else None
        if not isinstance(candidate, Mapping) or not isinstance(location, Mapping):
            raise self._bad("candidate without a location", candidate)
        attributes = candidate.get("attributes")
        words = _precision_words(f.dig(attributes, "Addr_type"), f.dig(attributes, "Type"))
        return self._match(location.get("x"), location.get("y"), candidate.get("address"), candidate,
                           precision=precision_of(self.name, words),
                           score=f.scaled(candidate.get("score"), 100), place=_place(candidate, attributes))

    def _parse_reverse(self, body: Any) -> Outcome:
        """``{"address": {...attributes}, "location": {x, y, spatialReference}}``."""
        if not isinstance(body, Mapping):
            raise self._bad("answer is not an object", body)
        error = body.get("error")
        if isinstance(error, Mapping):
            details = error.get("details")
            if isinstance(details, list) and any(isinstance(d, str) and "unable to find address"
                                                 in d[:200].lower() for d in details[:10]):
                return self._nothing_here()
            return self._error(error)
        address, location = body.get("address"), body.get("location")
        if not isinstance(address, Mapping) or not isinstance(location, Mapping):
            raise self._bad("reverse answer without address and location", body)
        self._check_wgs84(location.get("spatialReference"))
        words = _precision_words(address.get("Addr_type"), address.get("Type"))
        return self._match(location.get("x"), location.get("y"),
                           f.first_text(address, "LongLabel", "Match_addr"), body,
                           precision=precision_of(self.name, words), place=_reverse_place(address))

    def _parse_batch(self, response: httpx.Response,
                     items: list[Item]) -> Mapping[int, Outcome] | Outcome:
        """``locations[]``, each with ``attributes.ResultID`` (our position) and ``Status``."""
        body = decode_json(response, self.name, self.secrets)
        if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            return self._error(body["error"])  # raises what stops or retries the batch
        locations = body.get("locations") if isinstance(body, Mapping) else None
        if not isinstance(locations, list):
            raise self._bad("batch answer without locations", body)
        self._check_wgs84(body.get("spatialReference"))
        sent = {position for position, _ in items}
        found: dict[int, Outcome] = {}
        for location in locations:
            position = f.dig(location, "attributes", "ResultID")
            if type(position) is int and position in sent and position not in found:  # not a bool
                found[position] = self._row(self._batch_row, location)
        return found

    def _batch_row(self, location: Mapping[str, Any]) -> Outcome:
        status = f.text(f.dig(location, "attributes", "Status"))
        if status == "U":
            return NoMatch(provider=self.name)
        if status not in ("M", "T"):
            raise self._bad(f"unknown batch status {status!r}", location)
        return self._candidate(location)

    def _error(self, error: Mapping[str, Any]) -> Failure:
        code, message = error.get("code"), f.text(error.get("message")) or ""
        details = error.get("details")
        if isinstance(details, list) and details:
            message = f"{message} ({'; '.join(str(d)[:200] for d in details[:10])})"
        if not isinstance(code, int) or isinstance(code, bool):
            code = None
        text = self._reason(f"arcgis error {code}: {message}")
        if code in (498, 499, 401, 403):
            raise AuthenticationError(text, provider=self.name, status_code=code)
        if code == 429:
            raise RateLimitError(text, provider=self.name, status_code=code)
        if isinstance(code, int) and code >= 500:
            raise ProviderUnavailableError(text, provider=self.name, status_code=code)
        error_name = "QueryError" if code == 400 else ProviderError.__name__
        return Failure(reason=text, error=error_name, provider=self.name)


def _precision_words(addr_type: object, kind: object) -> dict[str, object]:
    """The fields the precision is read from: ``Addr_type``, ``Type`` and both together
    (a ``POI`` whose ``Type`` is a mountain or a lake is no address)."""
    return {"Addr_type/Type": f"{addr_type}/{kind}", "Addr_type": addr_type, "Type": kind}


def _address_fields(query: Query) -> dict[str, str]:
    """Structured fields as ArcGIS address fields: ``Address`` (number and street), ``City``..."""
    fields = query.structured()
    address = " ".join(v for v in (fields.pop("housenumber", None), fields.pop("street", None)) if v)
    params = {_STRUCTURED[k]: v for k, v in fields.items() if k in _STRUCTURED}
    return {"Address": address, **params} if address else params


def _batch_fields(query: Query | ReverseQuery) -> dict[str, str]:
    if isinstance(query, ReverseQuery):  # refused before: the batch takes addresses only
        raise TypeError("geocodeAddresses takes addresses")
    return {"SingleLine": query.text} if query.text is not None else _address_fields(query)


def _reverse_place(address: Mapping[str, Any]) -> Place:
    """Reverse attributes: ``AddNum`` and ``Address`` (number and street), ``City``, ``Postal``..."""
    number, line = f.text(address.get("AddNum")), f.text(address.get("Address"))
    return f.place(housenumber=number, street=_without_number(line, number), postcode=address.get("Postal"),
                   locality=f.first_text(address, "City", "Neighborhood"),
                   region=f.first_text(address, "Region", "Subregion"),
                   country_code=address.get("CountryCode"))


def _without_number(line: str | None, number: str | None) -> str | None:
    """The street of an address line: ``380 New York St`` or ``Karl Johans gate 1`` without the number.

    >>> _without_number("380 New York St", "380"), _without_number("Karl Johans gate 1", "1")
    ('New York St', 'Karl Johans gate')
    """
    if not line or not number:
        return line
    if line.startswith(number + " "):
        return line[len(number):].strip() or None
    if line.endswith(" " + number):
        return line[:-len(number)].strip() or None
    return line


def _place(candidate: Mapping[str, Any], attributes: object) -> Place:
    street = " ".join(t for k in ("StPreDir", "StPreType", "StName", "StType", "StDir")
                      if (t := f.text(f.dig(attributes, k))))
    extent = candidate.get("extent")
    return f.place(
        housenumber=f.dig(attributes, "AddNum"), street=street or None,
        postcode=f.dig(attributes, "Postal"), locality=f.dig(attributes, "City"),
        region=f.first_text(attributes, "Region", "Subregion"),
        country_code=f.dig(attributes, "Country"),
        bbox=f.bbox(f.dig(extent, "xmin"), f.dig(extent, "ymin"), f.dig(extent, "xmax"),
                    f.dig(extent, "ymax")))
