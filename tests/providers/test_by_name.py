"""Choosing a provider by name: get_provider, resolve_provider and geocode."""

from __future__ import annotations

import pytest

from geotoolkit import ConfigurationError, Match, QuotaExceededError, geocode
from geotoolkit.providers import PROVIDERS, LocationIQ, OpenCage, Photon, get_provider, resolve_provider
from geotoolkit.testing import ProviderSimulator

from .provider_support import AGENT, SECRET

ADDRESS = "Städtle 38, 9490 Vaduz"


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        get_provider("bing")
    assert all(name in str(info.value) for name in PROVIDERS)


@pytest.mark.parametrize("name", [42, None, ""])
def test_a_name_must_be_a_known_string(name: object) -> None:
    with pytest.raises(ConfigurationError):
        get_provider(name)  # type: ignore[arg-type]


def test_names_are_case_and_space_insensitive() -> None:
    assert isinstance(get_provider(" OpenCage ", api_key=SECRET), OpenCage)


def test_an_option_the_provider_does_not_take_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="photon does not take api_key"):
        get_provider("photon", api_key=SECRET)
    with pytest.raises(ConfigurationError, match="colour"):
        get_provider("opencage", api_key=SECRET, colour="blue")


def test_none_options_fall_back_to_defaults() -> None:
    provider = get_provider("photon", base_url=None, user_agent=None, language="de")
    assert isinstance(provider, Photon) and provider.host == "photon.komoot.io"
    assert provider.language == "de"


def test_nominatim_by_name_still_requires_a_user_agent() -> None:
    with pytest.raises(ConfigurationError, match="user_agent"):
        get_provider("nominatim")


def test_options_for_an_instance_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="api_key"):
        resolve_provider(OpenCage(api_key=SECRET), api_key="other")


def test_not_a_provider_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="name such as"):
        resolve_provider(42)  # type: ignore[arg-type]


def test_geocode_by_name_end_to_end_against_the_simulator() -> None:
    with ProviderSimulator(valid_keys=[SECRET]) as sim:
        out = geocode([ADDRESS], provider="locationiq", api_key=SECRET, user_agent=AGENT,
                      base_url=sim.url, gate="memory://", rate=50)
        seen = sim.requests
        expected = sim.expected(ADDRESS)
    assert isinstance(out[0], Match) and out[0].provider == "locationiq"
    assert (out[0].lon, out[0].lat) == pytest.approx(expected)
    assert [(r.key, r.params["format"]) for r in seen] == [(SECRET, "json")]


def test_geocode_by_name_stops_on_quota() -> None:
    with ProviderSimulator(valid_keys=[SECRET], daily_cap=0) as sim, \
            pytest.raises(QuotaExceededError):
        geocode([ADDRESS], provider="locationiq", api_key=SECRET, base_url=sim.url,
                gate="memory://", rate=50)


def test_locationiq_repr_hides_the_key() -> None:
    assert repr(LocationIQ(api_key=SECRET)) == "LocationIQ('https://us1.locationiq.com/v1', api_key='***')"
