"""Photon: komoot's OpenStreetMap search-as-you-type geocoder, public or self-hosted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.providers._common import HTTPProvider, one_line
from geotoolkit.providers._geojson import first_feature, point_of
from geotoolkit.results import NoMatch, Outcome, Query

__all__ = ["PUBLIC_PHOTON", "Photon"]

PUBLIC_PHOTON = "https://photon.komoot.io"


class Photon(HTTPProvider):
    """Photon ``/api`` (GeoJSON, coordinates ``[lon, lat]``), sans-I/O.

    Photon has no structured search here: structured queries are joined into text.

    Parameters
    ----------
    base_url
        The instance; default komoot's public one (fair use, throttled).
    language
        Preferred language of labels (``lang``: ``default``, ``en``, ``de``, ``fr``).
    user_agent
        Identifies your application (default: geotoolkit's own).
    rate
        Requests/s; default: the registry's value for the public host, else none.

    Examples
    --------
    >>> Photon().build_request(Query(text="Oslo")).url.params["q"]
    'Oslo'
    """

    name = "photon"
    default_base_url = PUBLIC_PHOTON

    def __init__(self, base_url: str | None = None, *, language: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, user_agent=user_agent, rate=rate)
        self.language = language

    def _options(self) -> dict[str, Any]:
        return {"language": self.language}

    def build_request(self, query: Query) -> httpx.Request:
        params = {"q": one_line(query), "limit": "1"}
        if self.language:
            params["lang"] = self.language
        return self._get("/api", params)

    def _parse_body(self, body: Any) -> Outcome:
        try:
            feature = first_feature(body)
            if feature is None:
                return NoMatch(provider=self.name)
            lon, lat = point_of(feature)
        except TypeError as exc:
            raise self._bad(str(exc), body) from exc
        return self._match(lon, lat, _label(feature.get("properties")), feature)


def _label(props: object) -> str:
    if not isinstance(props, Mapping):
        return ""
    street = " ".join(str(props[k]) for k in ("street", "housenumber") if props.get(k))
    place = " ".join(str(props[k]) for k in ("postcode", "city") if props.get(k))
    parts = [props.get("name"), street, place, props.get("country")]
    return ", ".join(str(p) for p in dict.fromkeys(parts) if p)
