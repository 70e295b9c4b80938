"""LocationIQ: a commercial Nominatim-compatible geocoder with an API key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import ConfigurationError, QuotaExceededError
from geotoolkit.keys import gate_key
from geotoolkit.providers._common import DEFAULT_USER_AGENT, policy_rate
from geotoolkit.providers.nominatim import Nominatim
from geotoolkit.results import NoMatch, Outcome, Query

__all__ = ["LOCATIONIQ_EU", "LOCATIONIQ_US", "LocationIQ"]

LOCATIONIQ_US = "https://us1.locationiq.com/v1"
LOCATIONIQ_EU = "https://eu1.locationiq.com/v1"


class LocationIQ(Nominatim):
    """LocationIQ ``/v1/search`` (format=json), parsed as Nominatim, sans-I/O.

    Differences from Nominatim: the key (``key`` parameter) is required, a
    no-match is ``404 {"error": "Unable to geocode"}``, and ``429`` with
    ``"Rate Limited Day"`` means the daily quota is spent (``QuotaExceededError``).

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
        if not isinstance(api_key, str) or not api_key.strip():
            raise ConfigurationError("locationiq requires an api_key")
        super().__init__(base_url, user_agent=user_agent or DEFAULT_USER_AGENT,
                         api_key=api_key.strip(), country_codes=country_codes,
                         language=language, rate=rate)
        self.default_rate = policy_rate(self.name, self.host, rate)
        self.is_public = False

    @property
    def gate_key(self) -> str:
        """One gate key per API key for both regions: the plan's limits are per key."""
        public = self.host in (urlsplit(LOCATIONIQ_US).hostname, urlsplit(LOCATIONIQ_EU).hostname)
        return gate_key("locationiq.com" if public else self.host, self._api_key)

    def build_request(self, query: Query) -> httpx.Request:
        request = super().build_request(query)
        return httpx.Request("GET", request.url.copy_set_param("format", "json"),
                             headers=request.headers)

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        message = _error_message(response) if response.status_code in (404, 429) else ""
        if response.status_code == 404 and message.lower().startswith("unable to geocode"):
            return NoMatch(provider=self.name)
        if response.status_code == 429 and "day" in message.lower():
            raise QuotaExceededError(f"locationiq daily quota spent ({message})",
                                     provider=self.name, status_code=429)
        return super().parse_response(query, response)

    def __repr__(self) -> str:
        return f"LocationIQ({self.base_url!r}, api_key='***')"


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, Mapping) else None
    return error if isinstance(error, str) else ""
