"""Nominatim: the OpenStreetMap geocoder, public or self-hosted, and compatible hosts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import ConfigurationError, ProviderResponseError
from geotoolkit.keys import gate_key
from geotoolkit.providers._common import lonlat
from geotoolkit.providers.base import (
    check_user_agent,
    client_error,
    decode_json,
    namespace,
    raise_for_status,
)
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Query

__all__ = ["PUBLIC_NOMINATIM", "Nominatim"]

PUBLIC_NOMINATIM = "https://nominatim.openstreetmap.org"

# Nominatim's structured parameter for each of our Query fields.
_STRUCTURED = {"street": "street", "city": "city", "county": "county", "state": "state",
               "postalcode": "postalcode", "country": "country"}


class Nominatim:
    """Nominatim ``/search`` (format=jsonv2), sans-I/O.

    Parameters
    ----------
    base_url
        The instance; default the public OpenStreetMap one (1 request/s for the
        whole application, a real User-Agent required, results must be cached).
    user_agent
        Identifies your application; empty or an HTTP library's default is refused.
    api_key
        For Nominatim-compatible commercial hosts: sent as the ``key`` query
        parameter. Never shown in reprs, logs or gate keys.
    country_codes
        Limit results to these ISO 3166-1 alpha-2 codes.

    Examples
    --------
    >>> p = Nominatim(user_agent="docs-example/1.0 (docs@example.org)")
    >>> p.build_request(Query(text="Vaduz")).url.params["format"]
    'jsonv2'
    """

    name = "nominatim"

    def __init__(
        self,
        base_url: str = PUBLIC_NOMINATIM,
        *,
        user_agent: str,
        api_key: str | None = None,
        country_codes: Sequence[str] | None = None,
        email: str | None = None,
        language: str | None = None,
        rate: float | None = None,
    ) -> None:
        self.user_agent = check_user_agent(user_agent, "Nominatim")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.host = parts.netloc.lower().rsplit("@", 1)[-1]
        self._api_key = api_key or None
        self.country_codes = tuple(c.lower() for c in country_codes or ())
        self.email = email
        self.language = language
        public = self.host == urlsplit(PUBLIC_NOMINATIM).hostname
        if rate is not None and not (math.isfinite(rate) and rate > 0):
            raise ConfigurationError(f"rate must be positive, got {rate!r}")
        self.default_rate: float | None = rate if rate is not None else (1.0 if public else None)
        self.is_public = public

    @property
    def gate_key(self) -> str:
        return gate_key(self.host, self._api_key)

    def cache_namespace(self) -> str:
        return namespace(self.name, self.host, self.country_codes, self.language)

    def build_request(self, query: Query) -> httpx.Request:
        params: dict[str, str] = {"format": "jsonv2", "addressdetails": "1", "limit": "1"}
        if query.text is not None:
            params["q"] = query.text
        else:
            params.update(self._structured(query))
        if self.country_codes:
            params["countrycodes"] = ",".join(self.country_codes)
        if self.email:
            params["email"] = self.email
        if self.language:
            params["accept-language"] = self.language
        if self._api_key:
            params["key"] = self._api_key
        return httpx.Request("GET", f"{self.base_url}/search", params=params,
                             headers={"User-Agent": self.user_agent,
                                      "Accept": "application/json"})

    @staticmethod
    def _structured(query: Query) -> dict[str, str]:
        fields = query.structured()
        street = " ".join(v for v in (fields.pop("housenumber", None), fields.get("street")) if v)
        if street:
            fields["street"] = street
        return {_STRUCTURED[k]: v for k, v in fields.items() if k in _STRUCTURED}

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        raise_for_status(response, self.name)
        if response.status_code >= 400:
            return client_error(response, self.name)
        try:
            body = decode_json(response, self.name)
            return self._parse_body(body)
        except ProviderResponseError as exc:
            return Failure(reason=str(exc), error=type(exc).__name__, provider=self.name)

    def _parse_body(self, body: Any) -> Outcome:
        if isinstance(body, Mapping) and "error" in body:
            error = body["error"]
            message = error.get("message", error) if isinstance(error, Mapping) else error
            return Failure(reason=f"nominatim error: {message}", error="ProviderError",
                           provider=self.name)
        if not isinstance(body, list):
            raise ProviderResponseError("nominatim answered neither a list nor an error",
                                        raw=str(body), provider=self.name, status_code=200)
        if not body:
            return NoMatch(provider=self.name)
        return self._match(body[0])

    def _match(self, item: Any) -> Match:
        try:
            lon, lat = lonlat(item["lon"], item["lat"])  # strings, checked to be in range
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderResponseError("nominatim result without usable lat/lon",
                                        raw=str(item), provider=self.name) from exc
        return Match(lon=lon, lat=lat, label=str(item.get("display_name", "")),
                     provider=self.name, raw=dict(item))

    def __repr__(self) -> str:
        key = ", api_key='***'" if self._api_key else ""
        return f"Nominatim({self.base_url!r}, user_agent={self.user_agent!r}{key})"
