"""Nominatim: the OpenStreetMap geocoder, public or self-hosted, and compatible hosts."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import ConfigurationError, ProviderUnavailableError
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers.base import said
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["PUBLIC_NOMINATIM", "Nominatim"]

PUBLIC_NOMINATIM = "https://nominatim.openstreetmap.org"
_TERMS = "https://operations.osmfoundation.org/policies/nominatim/"

# Nominatim's structured parameter for each of our Query fields.
_STRUCTURED = {"street": "street", "city": "city", "county": "county", "state": "state",
               "postalcode": "postalcode", "country": "country"}
# What Nominatim answers (503, text/plain) when it gives up on a query: its own timeout
# (NOMINATIM_QUERY_TIMEOUT, NOMINATIM_REQUEST_TIMEOUT), not a limiter's refusal.
_TIMED_OUT = "query took too long to process"
# Every browser's User-Agent starts so ("Mozilla/5.0 (...)", old Opera's "Opera/9.80").
_BROWSER_AGENT = re.compile(r"^\s*(mozilla|opera)/", re.I)
# addressdetails keys, most specific first, for each Place field.
_STREET = ("road", "pedestrian", "square", "footway", "path", "cycleway")
_LOCALITY = ("city", "town", "village", "hamlet", "municipality", "suburb", "neighbourhood")
_REGION = ("state", "province", "region", "state_district", "county")


class Nominatim(HTTPProvider):
    """Nominatim ``/search`` and ``/reverse`` (format=jsonv2), sans-I/O.

    Reverse: ``/reverse?lat=…&lon=…`` (named parameters, WGS84 degrees; the point is
    sent from the query's ``lon, lat``) answers one object, the OSM object nearest
    to the point at building level (``zoom`` 18); ``{"error": "Unable to geocode"}``
    (nothing there, e.g. at sea) is a ``NoMatch``. The answer's ``lat``/``lon`` are
    the place's, read as for search.

    Each match carries its precision (from ``category``/``type``, ``addresstype``
    and ``place_rank``; an interpolated house number is ``interpolated``), no score
    (``importance`` is fame, not confidence) and its ``Place``: ``place_id``,
    ``osm_type``/``osm_id``, the address details and ``boundingbox`` turned into
    ``(min_lon, min_lat, max_lon, max_lat)``.

    A 503 saying "Query took too long to process." is the server giving up on that query
    (its ``NOMINATIM_QUERY_TIMEOUT``): ``ProviderUnavailableError``, retried and counted
    like an outage, so the row ends failed with that reason; a limiter's 503 (nginx's
    ``limit_req``) stays a ``RateLimitError``.

    Parameters
    ----------
    base_url
        The instance; default the public OpenStreetMap one (1 request/s for the
        whole application, a real User-Agent required, results must be cached).
    user_agent
        Identifies your application; empty or an HTTP library's default is refused, and
        on the public instance a browser's (``Mozilla/5.0 ...``) too: its usage policy asks
        for one that names the application.
    api_key
        For Nominatim-compatible commercial hosts: sent as the ``key`` query
        parameter. Never shown in reprs, logs or gate keys.
    country_codes
        Limit results to these ISO 3166-1 alpha-2 codes (``["li", "ch"]``, or one string
        ``"li,ch"``; alpha-3 codes are sent as alpha-2). Anything else is refused:
        Nominatim answers an unknown code (``uk``: the United Kingdom is ``gb``) with
        nothing, and ignores a name (``Liechtenstein``).
    email, language
        Nominatim's ``email`` (a contact for heavy users) and ``accept-language``.
    rate
        Requests/s; default 1 on the public instance, else none.

    Examples
    --------
    >>> p = Nominatim(user_agent="docs-example/1.0 (docs@example.org)")
    >>> p.build_request(Query(text="Vaduz")).url.params["format"]
    'jsonv2'
    >>> p.build_request(ReverseQuery(9.5215, 47.1410)).url.query.decode()
    'format=jsonv2&addressdetails=1&zoom=18&lat=47.141000&lon=9.521500'
    """

    name = "nominatim"
    default_base_url = PUBLIC_NOMINATIM
    key_param = "key"
    user_agent_required = True
    supports_reverse = True

    def __init__(
        self,
        base_url: str = PUBLIC_NOMINATIM,
        *,
        user_agent: str,
        api_key: str | None = None,
        country_codes: Sequence[str] | str | None = None,
        email: str | None = None,
        language: str | None = None,
        rate: float | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.country_codes = _country_codes(country_codes)
        self.email = email
        self.language = language
        self.is_public = self.host == "nominatim.openstreetmap.org"
        if self.is_public and _BROWSER_AGENT.match(self.user_agent):
            agent = self.user_agent if len(self.user_agent) <= 40 else f"{self.user_agent[:37]}..."
            raise ConfigurationError(
                f"the public Nominatim's usage policy asks for a User-Agent that identifies "
                f"your application, and {agent!r} is a browser's: give your "
                "application's name, version and a contact, for example "
                "'acme-geocoder/1.0 (ops@acme.example)' (on the command line: --user-agent), "
                f"or run your own Nominatim (terms: {_TERMS})")

    def _options(self) -> dict[str, Any]:
        return {"country_codes": self.country_codes, "language": self.language}

    def _check(self, response: httpx.Response) -> Outcome | None:
        """A 503 saying "Query took too long to process." is Nominatim's own timeout on this
        query: a failure retried as an outage's (counted, the row ends failed with it),
        not a limiter's refusal (which never fails a row and slows the fleet). A 404 is
        a base URL with no API under it: the row fails saying which URL to give."""
        if response.status_code == 404:  # Nominatim answers a search or a point 200 or 400
            why = said(response, self.secrets) or "Not Found"
            return Failure(reason=self._reason(
                f"{self.name} answered HTTP 404 ({why}): no Nominatim API at {self._shown_url()}; "
                "the base URL must be the address /search and /reverse are under (for "
                "http://host:8080/search, give http://host:8080)"),
                error="QueryError", provider=self.name)
        if response.status_code == 503:
            why = said(response, self.secrets)
            if why.lower().startswith(_TIMED_OUT):
                raise ProviderUnavailableError(
                    f"{self.name} gave up on the query (HTTP 503): {why}",
                    provider=self.name, status_code=503)
        return None

    def _shown_url(self) -> str:
        """The base URL without credentials, fit for a reason."""
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{self.host}{parts.path}"

    def _build(self, query: Query) -> httpx.Request:
        return self._get("/search", self._params(query))

    def _params(self, query: Query) -> dict[str, str]:
        params: dict[str, str] = {"format": "jsonv2", "addressdetails": "1", "limit": "1"}
        if query.text is not None:
            params["q"] = query.text
        else:
            params.update(self._structured(query))
        if self.country_codes:
            params["countrycodes"] = ",".join(self.country_codes)
        return {**params, **self._contact()}

    def _contact(self) -> dict[str, str]:
        params = {"email": self.email, "accept-language": self.language}
        return {k: v for k, v in params.items() if v}

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        return self._get("/reverse", self._reverse_params(lon, lat))

    def _reverse_params(self, lon: str, lat: str) -> dict[str, str]:
        """``/reverse`` takes named ``lat`` and ``lon``; ``countrycodes`` does not apply there."""
        return {"format": "jsonv2", "addressdetails": "1", "zoom": "18", "lat": lat, "lon": lon,
                **self._contact()}

    @staticmethod
    def _structured(query: Query) -> dict[str, str]:
        fields = query.structured()
        street = " ".join(v for v in (fields.pop("housenumber", None), fields.get("street")) if v)
        if street:
            fields["street"] = street
        return {_STRUCTURED[k]: v for k, v in fields.items() if k in _STRUCTURED}

    def _parse_body(self, body: Any) -> Outcome:
        if isinstance(body, Mapping) and "error" in body:
            error = body["error"]
            message = error.get("message", error) if isinstance(error, Mapping) else error
            return Failure(reason=self._reason(f"{self.name} error: {message}"),
                           error="ProviderError", provider=self.name)
        if not isinstance(body, list):
            raise self._bad("answered neither a list nor an error", body)
        if not body:
            return NoMatch(provider=self.name)
        item = body[0]
        if not isinstance(item, Mapping):
            raise self._bad("a result is not an object", item)
        return self._result(item)

    def _parse_reverse(self, body: Any) -> Outcome:
        """One object, or ``{"error": "Unable to geocode"}`` where there is nothing."""
        if isinstance(body, Mapping) and "error" in body:
            error = body["error"]
            message = error.get("message", error) if isinstance(error, Mapping) else error
            if isinstance(message, str) and message.lower().startswith("unable to geocode"):
                return self._nothing_here()
            return Failure(reason=self._reason(f"{self.name} error: {message}"),
                           error="ProviderError", provider=self.name)
        if not isinstance(body, Mapping):
            raise self._bad("reverse answer is not an object", body)
        return self._result(body)

    def _result(self, item: Mapping[str, Any]) -> Match:
        return self._match(item.get("lon"), item.get("lat"), item.get("display_name"), item,
                           precision=precision_of(self.name, self._words(item)),
                           place=_place(item))

    @staticmethod
    def _words(item: Mapping[str, Any]) -> dict[str, object]:
        """The fields the precision tables read (jsonv2 says ``category``, json ``class``)."""
        category = item.get("category", item.get("class"))
        kind = f"{category}/{item.get('type')}"
        return {"osm_type/category/type": f"{item.get('osm_type')}/{kind}",
                "osm_type/class/type": f"{item.get('osm_type')}/{kind}",
                "addresstype": item.get("addresstype"), "category/type": kind,
                "class/type": kind, "place_rank": item.get("place_rank")}


def _country_codes(codes: Sequence[str] | str | None) -> tuple[str, ...]:
    """``codes`` as the lower-case alpha-2 codes Nominatim reads; ``ConfigurationError`` for
    one that is none (a string is a comma-separated list, not a sequence of letters)."""
    items: Sequence[object] = codes.split(",") if isinstance(codes, str) else codes or ()
    found = []
    for code in items:
        alpha2 = f.country_code(code)
        if alpha2 is None:
            raise ConfigurationError(
                f"nominatim country_codes takes ISO 3166-1 alpha-2 codes such as 'li' or 'gb', "
                f"got {code!r} (Nominatim would find nothing for an unknown code and ignore a "
                "name)")
        found.append(alpha2.lower())
    return tuple(found)


def _place(item: Mapping[str, Any]) -> Place:
    address = item.get("address")
    box = item.get("boundingbox")  # [min_lat, max_lat, min_lon, max_lon], as strings
    return f.place(
        place_id=item.get("place_id"), osm_type=f.osm_type(item.get("osm_type")),
        osm_id=f.osm_id(item.get("osm_id")),
        housenumber=f.first_text(address, "house_number", "house_name"),
        street=f.first_text(address, *_STREET), postcode=f.first_text(address, "postcode"),
        locality=f.first_text(address, *_LOCALITY), region=f.first_text(address, *_REGION),
        country_code=f.dig(address, "country_code"),
        bbox=f.bbox(box[2], box[0], box[3], box[1])
        if isinstance(box, list) and len(box) == 4 else None)
