"""Esri ArcGIS World Geocoding Service (or an ArcGIS Enterprise GeocodeServer)."""

from __future__ import annotations

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
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, NoMatch, Outcome, Place, Query

__all__ = ["ARCGIS_WORLD", "ArcGIS"]

ARCGIS_WORLD = "https://geocode-api.arcgis.com/arcgis/rest/services/World/GeocodeServer"

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

    The precision comes from ``Addr_type`` (``PointAddress``, ``StreetAddress`` =
    interpolated, ``StreetName``, ``Postal``…; a ``Locality`` refined by ``Type``);
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
    """

    name = "arcgis"
    default_base_url = ARCGIS_WORLD
    key_param = "token"

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
                  "forStorage": "true" if self.for_storage else "false"}
        if query.text is not None:
            params["SingleLine"] = query.text
        else:
            fields = query.structured()
            address = " ".join(v for v in (fields.pop("housenumber", None),
                                           fields.pop("street", None)) if v)
            if address:
                params["Address"] = address
            params.update({_STRUCTURED[k]: v for k, v in fields.items() if k in _STRUCTURED})
        return self._get("/findAddressCandidates", params)

    def _parse_body(self, body: Any) -> Outcome:
        if not isinstance(body, Mapping):
            raise self._bad("answer is not an object", body)
        if isinstance(body.get("error"), Mapping):
            return self._error(body["error"])
        candidates, reference = body.get("candidates"), body.get("spatialReference")
        if not isinstance(candidates, list):
            raise self._bad("answer without candidates", body)
        wkid = reference.get("latestWkid", reference.get("wkid")) if isinstance(reference, Mapping) else None
        if wkid not in _WGS84:
            raise self._bad(f"coordinates in spatial reference {wkid}, not WGS84", reference)
        if not candidates:
            return NoMatch(provider=self.name)
        first = candidates[0]
        location = first.get("location") if isinstance(first, Mapping) else None
        if not isinstance(location, Mapping):
            raise self._bad("candidate without a location", first)
        attributes = first.get("attributes")
        words = {"Addr_type": f.dig(attributes, "Addr_type"), "Type": f.dig(attributes, "Type")}
        return self._match(location.get("x"), location.get("y"), first.get("address"), first,
                           precision=precision_of(self.name, words),
                           score=f.scaled(first.get("score"), 100), place=_place(first, attributes))

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
