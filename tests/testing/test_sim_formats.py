"""Every provider's forward API against the simulator: geotoolkit's own provider builds the
request (``base_url=sim.url``), httpx sends it, the provider parses the answer, and the
point and the precision are the ones intended, level by level."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from formats_support import FACTORIES, KEY, KEYED, geocode

from geotoolkit.results import Match, NoMatch, Query
from geotoolkit.testing import FORMATS, ProviderSimulator
from geotoolkit.testing._gazetteer import COUNTRY, KNOWN_ADDRESSES, LOCALITIES, POSTCODES, STREETS

STAEDTLE = KNOWN_ADDRESSES[0]
DUXWEG = next(s for s in STREETS if s.name == "Duxweg")
VADUZ_9490 = next(p for p in POSTCODES if p.code == "9490")
VADUZ = next(t for t in LOCALITIES if t.name == "Vaduz")

#: level -> (free text, structured query, the (lon, lat) served)
LEVELS: dict[str, tuple[str, Query, tuple[float, float]]] = {
    "address": ("Städtle 38, 9490 Vaduz",
                Query(housenumber="38", street="Städtle", city="Vaduz", postalcode="9490"),
                (STAEDTLE.lon, STAEDTLE.lat)),
    "street": ("Duxweg 999, 9494 Schaan", Query(housenumber="999", street="Duxweg", city="Schaan"),
               (DUXWEG.lon, DUXWEG.lat)),
    "postcode": ("9490 Vaduz", Query(postalcode="9490"), (VADUZ_9490.lon, VADUZ_9490.lat)),
    "locality": ("Vaduz", Query(city="Vaduz"), (VADUZ.lon, VADUZ.lat)),
    "country": ("Liechtenstein", Query(country="LI"), (COUNTRY.lon, COUNTRY.lat)),
}


def intended(provider: str, level: str) -> str | None:
    """The precision geotoolkit should read (``None``: the provider finds nothing).

    Geonorge and the Census hold address points only; the Census places every match on
    a TIGER address range, which geotoolkit calls ``interpolated``.
    """
    if provider in ("geonorge", "census"):
        if level != "address":
            return None
        return "interpolated" if provider == "census" else "address"
    return level


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(valid_keys={KEY}) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as c:
        yield c


def test_every_provider_has_a_format() -> None:
    assert set(FORMATS) == set(FACTORIES)


@pytest.mark.parametrize("level", list(LEVELS))
@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_free_text_precision(sim: ProviderSimulator, client: httpx.Client, provider: str,
                             level: str) -> None:
    text, _, point = LEVELS[level]
    outcome = geocode(client, FACTORIES[provider](sim.url), Query(text=text))
    logged = sim.requests[-1]
    assert (logged.provider, logged.status) == (provider, outcome_status(provider, outcome))
    assert logged.key == (KEY if provider in KEYED else None)
    want = intended(provider, level)
    if want is None:
        assert isinstance(outcome, NoMatch), outcome
        return
    assert isinstance(outcome, Match), outcome
    assert (outcome.lon, outcome.lat) == point
    assert outcome.precision == want
    assert sim.expected_precision(text) == level


@pytest.mark.parametrize("level", list(LEVELS))
@pytest.mark.parametrize("provider", sorted(set(FACTORIES) - {"census"}))
def test_structured_precision(sim: ProviderSimulator, client: httpx.Client, provider: str,
                              level: str) -> None:
    _, query, point = LEVELS[level]
    outcome = geocode(client, FACTORIES[provider](sim.url), query)
    want = intended(provider, level)
    if want is None:
        assert isinstance(outcome, NoMatch), outcome
        return
    assert isinstance(outcome, Match), outcome
    assert ((outcome.lon, outcome.lat), outcome.precision) == (point, want)


def test_census_structured_needs_a_street(sim: ProviderSimulator, client: httpx.Client) -> None:
    census = FACTORIES["census"](sim.url)
    found = geocode(client, census, LEVELS["address"][1])
    assert isinstance(found, Match) and found.precision == "interpolated"
    assert (found.lon, found.lat) == LEVELS["address"][2]
    assert found.place.street == "STÄDTLE" and found.place.housenumber == "38"
    refused = geocode(client, census, LEVELS["locality"][1])
    assert refused.status == "failed" and "Street address" in refused.reason


def outcome_status(provider: str, outcome: object) -> int:
    """The HTTP status each API answers with (LocationIQ's no-match is a 404)."""
    return 404 if provider == "locationiq" and isinstance(outcome, NoMatch) else 200


@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_unknown_addresses_get_the_same_hashed_point_everywhere(
        sim: ProviderSimulator, client: httpx.Client, provider: str) -> None:
    text = "Irgendwo 7, 9490 Vaduz"
    outcome = geocode(client, FACTORIES[provider](sim.url), Query(text=text))
    assert isinstance(outcome, Match), outcome
    assert (outcome.lon, outcome.lat) == sim.expected(text)
    assert outcome.precision == ("interpolated" if provider == "census" else "address")


@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_no_match_in_each_providers_words(sim: ProviderSimulator, client: httpx.Client,
                                          provider: str) -> None:
    outcome = geocode(client, FACTORIES[provider](sim.url),
                      Query(text="Nowhere Street 999, 0000 Atlantis"))
    assert isinstance(outcome, NoMatch), outcome


def test_a_known_street_without_a_number_is_the_street(sim: ProviderSimulator,
                                                       client: httpx.Client) -> None:
    outcome = geocode(client, FACTORIES["google"](sim.url), Query(text="Städtle, Vaduz"))
    assert isinstance(outcome, Match) and outcome.precision == "street"
    assert "partial_match" not in outcome.raw  # nothing asked was missing
    partial = geocode(client, FACTORIES["google"](sim.url), Query(text="Städtle 99, Vaduz"))
    assert isinstance(partial, Match) and partial.raw["partial_match"] is True
    assert (partial.lon, partial.lat) == (outcome.lon, outcome.lat)


@pytest.mark.parametrize("provider", ["pelias", "opencage", "here", "mapbox"])
def test_scores_fall_with_the_level(sim: ProviderSimulator, client: httpx.Client,
                                    provider: str) -> None:
    built = FACTORIES[provider](sim.url)
    scores = []
    for level in ("address", "locality"):
        outcome = geocode(client, built, Query(text=LEVELS[level][0]))
        assert isinstance(outcome, Match)
        scores.append(outcome.score)
    assert scores[0] == 1.0
    assert scores[1] is None or scores[1] < 1.0  # (ArcGIS scores an exact town 100 too)


def test_places_carry_the_components(sim: ProviderSimulator, client: httpx.Client) -> None:
    for provider in ("nominatim", "photon", "pelias", "opencage", "google", "mapbox", "here",
                     "arcgis", "geonorge"):
        outcome = geocode(client, FACTORIES[provider](sim.url), Query(text=LEVELS["address"][0]))
        assert isinstance(outcome, Match), provider
        place = outcome.place
        assert (place.housenumber, place.postcode) == ("38", "9490"), provider
        assert place.street == "Städtle", provider
        if provider != "geonorge":  # geotoolkit's Geonorge says NO: it is Norway's register
            assert (place.country_code or "LI").upper() == "LI", provider
