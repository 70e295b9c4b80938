"""What a real Nominatim answers geotoolkit, case by case, and what geotoolkit makes of it.

Each case is a query as geotoolkit sends it (``Nominatim.build_request``) and the outcome
expected from the answer. The answers of a real Nominatim 5.3.3 that imported its own
API test data (Liechtenstein and Autauga County, Alabama; ``benchmarks/nominatim/lab.sh``)
are recorded in ``fixtures/nominatim_lab/recorded/<case>.json`` by
``benchmarks/nominatim/record.py``: ``test_nominatim.py`` parses them (no network),
``test_nominatim_lab.py`` asks the real server again and checks it still answers the same.
Data (c) OpenStreetMap contributors, ODbL 1.0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from geotoolkit import errors
from geotoolkit.providers import Nominatim
from geotoolkit.results import Failure, Match, NoMatch, Query, ReverseQuery

RECORDED = Path(__file__).parent / "fixtures" / "nominatim_lab" / "recorded"


@dataclass(frozen=True)
class Case:
    """A query and what geotoolkit must make of the real answer.

    ``expect``: the outcome's class, or the ``ProviderError`` raised; ``precision`` and
    ``osm_type`` of a match; ``reason``: text the reason (or the error) must hold;
    ``server``: ``"timeout"`` for an answer recorded from a Nominatim whose every
    database query times out (``NOMINATIM_QUERY_TIMEOUT=0``), not asked again live;
    ``base_path``: added to the server's URL to make the base URL (a wrong one).
    """

    name: str
    query: Query | ReverseQuery
    expect: str
    precision: str | None = None
    osm_type: str | None = None
    reason: str | None = None
    server: str = "lab"
    base_path: str = ""


def _text(text: str) -> Query:
    return Query(text=text)


CASES = (
    # A building with its house number: the building's own point.
    Case("house", _text("Landstrasse 51, 9490 Vaduz"), "Match", "address", "way"),
    # ß in the query, ss in the data: Nominatim folds it.
    Case("house_eszett", _text("Landstraße 51, 9490 Vaduz"), "Match", "address", "way"),
    # A POI (the post office) tagged with the address asked: at the address.
    Case("poi_at_address", _text("Städtle 38, 9490 Vaduz"), "Match", "address", "way"),
    # A bus stop: a rank-30 highway feature (addresstype "highway"), its own point; a
    # street says addresstype "road".
    Case("bus_stop", _text("Abzw. Badäl-Schlatt"), "Match", "address", "node"),
    Case("house_structured", Query(housenumber="27", street="In der Fina", city="Schaan",
                                   postalcode="9494", country="LI"), "Match", "address", "way"),
    # A house number placed along an OSM addr:interpolation way.
    Case("interpolated", _text("Grosssteg 1011, Triesenberg"), "Match", "interpolated", "way"),
    Case("street", Query(street="Städtle", city="Vaduz"), "Match", "street", "way"),
    # A house number the street does not have: Nominatim falls back to the street.
    Case("street_fallback", _text("Städtle 999, Vaduz"), "Match", "street", "way"),
    Case("postcode", Query(postalcode="9490"), "Match", "postcode"),
    Case("postcode_text", _text("9497"), "Match", "postcode"),
    Case("village", _text("Ebenholz"), "Match", "locality", "node"),
    Case("town", _text("Vaduz"), "Match", "locality", "relation"),
    Case("us_city", _text("Prattville"), "Match", "locality", "relation"),
    Case("county", _text("Oberland"), "Match", "region", "relation"),
    Case("us_county", _text("Autauga County"), "Match", "region", "relation"),
    Case("country", Query(country="Liechtenstein"), "Match", "country", "relation"),
    # Named places that are no part of an address (Nominatim's address rank 0), with the
    # search ranks of towns, villages and neighbourhoods (18, 20, 24): features, not
    # localities, so that no town-level minimum keeps a river's centroid.
    Case("river", _text("Rhein"), "Match", "feature", "relation"),
    Case("lake", _text("Stausee Steg"), "Match", "feature", "way"),
    Case("peak", _text("Naafkopf"), "Match", "feature", "node"),
    Case("park", _text("Familienpark Äule"), "Match", "feature", "way"),
    Case("forest", _text("Sattelwald"), "Match", "feature", "relation"),
    # Landuse and place=locality that Nominatim ranks as address parts (24, 25): localities.
    Case("residential_area", _text("Egerta"), "Match", "locality", "way"),
    Case("named_locality", _text("Alpila"), "Match", "locality", "node"),
    # A range or a letter after the number: Nominatim finds nothing, not even the street.
    Case("housenumber_range", _text("Landstrasse 51-53, 9490 Vaduz"), "NoMatch"),
    Case("two_housenumbers", _text("Städtle 33;31, 9490 Vaduz"), "NoMatch"),
    Case("nothing", _text("zzqxj nowhere 99999"), "NoMatch"),
    # Reverse, at building level (zoom 18, geotoolkit's).
    Case("reverse_address", ReverseQuery(9.522097, 47.138592), "Match", "address", "node"),
    Case("reverse_street", ReverseQuery(9.5298, 47.1), "Match", "street", "way"),
    Case("reverse_interpolated", ReverseQuery(9.570191, 47.1185474), "Match", "interpolated",
         "way"),
    Case("reverse_bus_stop", ReverseQuery(9.519635, 47.2311516), "Match", "address", "node"),
    # On the Liechtenstein-Switzerland border, the Swiss side outside the data: the
    # country fallback.
    Case("reverse_border", ReverseQuery(9.4716736, 47.15), "Match", "country"),
    # At sea: 200 with {"error": "Unable to geocode"}.
    Case("reverse_sea", ReverseQuery(-30.0, 0.0), "NoMatch", reason="nothing found"),
    # Outside the imported data: Nominatim's country fallback, no OSM object.
    Case("reverse_outside_data", ReverseQuery(5.0, 47.0), "Match", "country"),
    # A base URL that is not the API's root: 404 to every query, whatever the address.
    Case("wrong_base_url", _text("Vaduz"), "Failure", base_path="/nominatim",
         reason="no Nominatim API at http://127.0.0.1:"),
    # A Nominatim that gives up on a query answers 503, text/plain: not throttling.
    Case("timeout", _text("Vaduz"), "ProviderUnavailableError",
         reason="Query took too long to process", server="timeout"),
)

BY_NAME = {case.name: case for case in CASES}


def recorded(name: str) -> dict[str, Any]:
    """The recorded envelope of case ``name``."""
    envelope: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))
    return envelope


def envelope_of(response: httpx.Response) -> dict[str, Any]:
    """A response as a fixture envelope: status, content type, JSON or text body."""
    envelope: dict[str, Any] = {"status": response.status_code,
                                "headers": {"Content-Type": response.headers.get("content-type", "")}}
    try:
        envelope["json"] = response.json()
    except ValueError:
        envelope["text"] = response.text
    return envelope


def response_of(envelope: dict[str, Any], request: httpx.Request) -> httpx.Response:
    """The recorded envelope as the response to ``request``."""
    body = {"json": envelope["json"]} if "json" in envelope else {"text": envelope["text"]}
    return httpx.Response(envelope["status"], headers=envelope["headers"], request=request, **body)


def check_outcome(provider: Nominatim, case: Case, envelope: dict[str, Any]) -> None:
    """``provider`` makes of the answer ``envelope`` what ``case`` expects."""
    if case.base_path:
        provider = Nominatim(provider.base_url + case.base_path, user_agent=provider.user_agent)
    request = provider.build_request(case.query)
    response = response_of(envelope, request)
    if case.expect not in ("Match", "NoMatch", "Failure"):
        with pytest.raises(getattr(errors, case.expect)) as info:
            provider.parse_response(case.query, response)
        assert case.reason is None or case.reason in str(info.value), info.value
        return
    outcome = provider.parse_response(case.query, response)
    assert type(outcome).__name__ == case.expect, outcome
    if isinstance(outcome, Match):
        assert outcome.precision == case.precision, (case.name, outcome.precision)
        assert outcome.place.osm_type == case.osm_type
        body = envelope["json"]
        item = body[0] if isinstance(body, list) else body
        assert (outcome.lon, outcome.lat) == (float(item["lon"]), float(item["lat"]))
        if case.osm_type is not None:
            assert outcome.place.osm_id == int(item["osm_id"])
    if case.reason is not None:
        assert isinstance(outcome, Failure | NoMatch) and case.reason in outcome.reason
