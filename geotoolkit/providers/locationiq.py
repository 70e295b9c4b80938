"""LocationIQ: a commercial Nominatim-compatible geocoder with an API key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import QuotaExceededError
from geotoolkit.keys import gate_key
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import DEFAULT_USER_AGENT
from geotoolkit.providers.base import json_or_none
from geotoolkit.providers.nominatim import Nominatim
from geotoolkit.results import NoMatch, Outcome, Query

__all__ = ["LOCATIONIQ_EU", "LOCATIONIQ_US", "LocationIQ"]

LOCATIONIQ_US = "https://us1.locationiq.com/v1"
LOCATIONIQ_EU = "https://eu1.locationiq.com/v1"


class LocationIQ(Nominatim):
    """LocationIQ ``/v1/search`` and ``/v1/reverse`` (format=json), parsed as Nominatim, sans-I/O.

    Differences from Nominatim: the key (``key`` parameter) is required, a
    no-match is ``404 {"error": "Unable to geocode"}``, and ``429`` with
    ``"Rate Limited Day"`` means the daily quota is spent (``QuotaExceededError``).
    ``format=json`` has no ``place_rank``: the request asks for ``matchquality=1``,
    whose ``matchlevel`` and ``matchtype`` (``interpolated``) give the precision.

    Reverse: ``/v1/reverse?lat=…&lon=…`` (named parameters, as Nominatim's); nothing
    there is the same ``404 {"error": "Unable to geocode"}`` (a ``NoMatch``). The
    precision of a reverse match comes from its ``class``/``type``.

    Parameters
    ----------
    base_url
        ``LOCATIONIQ_US`` (default) or ``LOCATIONIQ_EU``.
    api_key
        Required; never shown in reprs, logs or gate keys.
    country_codes, language
        As for Nominatim.
    user_agent
        Optional here (default: geotoolkit's own).
    rate
        Requests/s; default the free plan's 2/s from the policy registry.

    Examples
    --------
    >>> p = LocationIQ(api_key="pk.example")
    >>> p.build_request(Query(text="Oslo")).url.path
    '/v1/search'
    """

    name = "locationiq"
    key_required = True
    user_agent_required = False

    def __init__(
        self,
        base_url: str = LOCATIONIQ_US,
        *,
        api_key: str | None = None,
        user_agent: str | None = None,
        country_codes: Sequence[str] | None = None,
        language: str | None = None,
        rate: float | None = None,
    ) -> None:
        super().__init__(base_url, user_agent=user_agent or DEFAULT_USER_AGENT,
                         api_key=api_key, country_codes=country_codes,
                         language=language, rate=rate)
        self.is_public = False

    @property
    def gate_key(self) -> str:
        """One gate key per API key for both regions: the plan's limits are per key."""
        public = self.host in (urlsplit(LOCATIONIQ_US).hostname, urlsplit(LOCATIONIQ_EU).hostname)
        return gate_key("locationiq.com" if public else self.host, self._api_key)

    def _params(self, query: Query) -> dict[str, str]:
        return {**super()._params(query), "format": "json", "matchquality": "1"}

    def _reverse_params(self, lon: str, lat: str) -> dict[str, str]:
        return {**super()._reverse_params(lon, lat), "format": "json"}

    def _check(self, response: httpx.Response) -> Outcome | None:
        message = _error_message(response) if response.status_code in (404, 429) else ""
        if response.status_code == 404 and message.lower().startswith("unable to geocode"):
            return NoMatch(provider=self.name)  # for a reverse query too: nothing there
        if response.status_code == 429 and "day" in message.lower():
            raise QuotaExceededError(f"locationiq daily quota spent ({self._reason(message)})",
                                     provider=self.name, status_code=429)
        return None

    @staticmethod
    def _words(item: Mapping[str, Any]) -> dict[str, object]:
        quality = item.get("matchquality")
        return {**Nominatim._words(item),
                "matchquality.matchtype": f.dig(quality, "matchtype"),
                "matchquality.matchlevel": f.dig(quality, "matchlevel")}


def _error_message(response: httpx.Response) -> str:
    body = json_or_none(response)
    error = body.get("error") if isinstance(body, Mapping) else None
    return error[:500] if isinstance(error, str) else ""
