"""Opt-in checks against a real Nominatim on loopback: skipped unless
``GEOTOOLKIT_TEST_NOMINATIM_URL`` is set.

Start one with ``bash benchmarks/nominatim/lab.sh`` (Nominatim 5.3.3 with its own API test
data, Liechtenstein; about a minute the first time), then::

    GEOTOOLKIT_TEST_NOMINATIM_URL=http://127.0.0.1:8088 \
        python3 -m pytest tests/providers/test_nominatim_lab.py

The expected points are the address points that Nominatim imported
(``fixtures/nominatim_lab/liechtenstein.csv``). Never on the internet: the URL must be
a loopback one.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import geopandas as gpd
import httpx
import pandas as pd
import pytest
from pyproj import Geod

from geotoolkit import Failure, Match, NoMatch, geocode  # (and the .geocode accessor)
from geotoolkit.providers import Nominatim
from geotoolkit.results import ReverseQuery

from .nominatim_cases import CASES, Case, check_outcome, envelope_of, recorded

URL = os.environ.get("GEOTOOLKIT_TEST_NOMINATIM_URL", "")
AGENT = "geotoolkit-tests/1.0 (tests@example.org)"
ADDRESSES = Path(__file__).parent / "fixtures" / "nominatim_lab" / "liechtenstein.csv"

pytestmark = [
    pytest.mark.nominatim_lab,
    pytest.mark.skipif(not URL, reason="set GEOTOOLKIT_TEST_NOMINATIM_URL (benchmarks/nominatim/lab.sh)"),
]


@pytest.fixture(scope="module")
def nominatim() -> Nominatim:
    host = urlsplit(URL).hostname
    assert host in ("127.0.0.1", "localhost", "::1"), f"not a loopback Nominatim: {URL}"
    return Nominatim(URL, user_agent=AGENT)


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    """Every tenth address of the file: 40 real ones, the expected point as numbers."""
    frame = pd.read_csv(ADDRESSES, dtype={"address": str})
    return frame.iloc[::10].reset_index(drop=True)


def _metres(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """The geodesic distance on WGS84, in metres."""
    return float(Geod(ellps="WGS84").inv(lon1, lat1, lon2, lat2)[2])


def test_real_addresses_land_on_their_address_points(nominatim: Nominatim,
                                                     sample: pd.DataFrame) -> None:
    out = sample.geocode.run("address", provider=nominatim, gate="memory://", rate=50.0,
                             progress=None)
    assert isinstance(out, gpd.GeoDataFrame) and out.crs.to_epsg() == 4326
    assert len(out) == len(sample) and (out.index == sample.index).all()
    assert set(out.geocode_status) <= {"matched", "no_match"}  # nothing failed
    matched = out[out.geocode_status == "matched"]
    assert len(matched) >= 0.9 * len(sample)
    assert (matched.geocode_precision == "address").all()
    # Points built as (lon, lat): x is the longitude Nominatim gave, y the latitude.
    assert (matched.geometry.x == matched.lon).all() and (matched.geometry.y == matched.lat).all()
    off = [_metres(r.lon, r.lat, r.expected_lon, r.expected_lat) for r in matched.itertuples()]
    assert sorted(off)[len(off) // 2] < 25.0, off   # the median lands on the address point
    assert max(off) < 1_000.0, off                  # and none leaves its neighbourhood


def test_no_match_is_a_dead_letter_after_one_request(nominatim: Nominatim) -> None:
    # Two house numbers in one tag, as the data has them: Nominatim finds nothing.
    out = geocode(["Städtle 33;31, 9490 Vaduz", "zzqxj nowhere 99999"], provider=nominatim,
                  gate="memory://", rate=50.0)
    assert all(isinstance(o, NoMatch) for o in out), out
    assert [o.attempts for o in out] == [1, 1]


def test_reverse_finds_the_address_at_its_point(nominatim: Nominatim,
                                                sample: pd.DataFrame) -> None:
    points = sample.head(10)
    out = points.geocode.reverse(lon="expected_lon", lat="expected_lat", provider=nominatim,
                                 gate="memory://", rate=50.0, progress=None)
    assert (out.geocode_status == "matched").all(), out.geocode_reason.tolist()
    for row in out.itertuples():
        street, number = row.address.split(",")[0].rsplit(" ", 1)
        assert street in row.geocode_label and number in row.geocode_label, (row.address,
                                                                             row.geocode_label)
        assert row.geocode_distance_m < 50.0


def test_hostile_text_ends_as_a_result_never_an_exception(nominatim: Nominatim) -> None:
    texts = ["Vaduz 😀", "Balzers\nLiechtenstein", "Triesenberg\tLI", '"Quoted", Vaduz',
             "Landstrasse 151, Schaan; DROP TABLE x", "x" * 3000, "   ", "47.14, 9.52"]
    out = geocode(texts, provider=nominatim, gate="memory://", rate=50.0)
    assert len(out) == len(texts)
    by_text = dict(zip(texts, out, strict=True))
    assert isinstance(by_text["Vaduz 😀"], Match)
    assert isinstance(by_text["Balzers\nLiechtenstein"], Match)
    too_long = by_text["x" * 3000]
    assert isinstance(too_long, Failure) and too_long.attempts == 0  # refused before sending
    assert "too long" in too_long.reason
    assert isinstance(by_text["   "], Failure) and by_text["   "].attempts == 0
    assert all(isinstance(o, Match | NoMatch | Failure) for o in out)


def test_a_point_outside_the_expected_country_is_flagged(nominatim: Nominatim) -> None:
    # The test data holds Autauga County, Alabama, too.
    frame = pd.DataFrame({"address": ["Prattville, Alabama", "Vaduz"]})
    out = frame.geocode.run("address", provider=nominatim, gate="memory://", rate=50.0,
                            country="LI", progress=None)
    assert out.geocode_status.tolist() == ["failed", "matched"]
    assert "outside LI" in out.geocode_reason.iloc[0]
    assert out.geometry.iloc[0] is None or out.geometry.iloc[0].is_empty


# What the recorded answers' parse depends on: if the server says otherwise, re-record them
# (benchmarks/nominatim/record.py) and look at what changed.
_REVERSE = ReverseQuery(9.522097, 47.138592)
_FIELDS = ("osm_type", "osm_id", "lat", "lon", "category", "type", "addresstype", "place_rank",
           "display_name", "error")


def _fields(envelope: dict[str, object]) -> object:
    body = envelope.get("json", envelope.get("text"))
    items = body if isinstance(body, list) else [body]
    return envelope["status"], [{k: v for k, v in item.items() if k in _FIELDS}
                                if isinstance(item, dict) else item for item in items]


@pytest.mark.parametrize("case", [c for c in CASES if c.server == "lab"], ids=lambda c: c.name)
def test_the_real_server_answers_as_recorded(nominatim: Nominatim, case: Case) -> None:
    """Each case asked again: the answer is the one recorded for the fast tests
    (test_nominatim.py), and geotoolkit makes of it what the case expects."""
    provider = Nominatim(URL + case.base_path, user_agent=AGENT)
    with httpx.Client(timeout=30.0) as client:
        live = envelope_of(client.send(provider.build_request(case.query)))
    assert _fields(live) == _fields(recorded(case.name))
    check_outcome(nominatim, case, live)


def test_a_real_400_is_the_rows_failure_with_nominatims_message(nominatim: Nominatim) -> None:
    """Nominatim refuses a bad parameter with 400 and a JSON error; the row fails with its
    message, nothing retried."""
    request = nominatim.build_request(CASES[0].query)
    bad = httpx.Request("GET", request.url.copy_merge_params({"layer": "nowhere"}),
                        headers=request.headers)
    with httpx.Client(timeout=30.0) as client:
        response = client.send(bad)
    assert response.status_code == 400
    outcome = nominatim.parse_response(CASES[0].query, response)
    assert isinstance(outcome, Failure) and outcome.error == "QueryError"
    assert outcome.reason.startswith("nominatim rejected the query (HTTP 400): Parameter 'layer'")


def test_reverse_zoom_levels_are_rated_as_the_level_they_answer(nominatim: Nominatim) -> None:
    """The real server's answer at each zoom for one point in Vaduz, as geotoolkit rates it:
    a building's POI, the street, the village, the town, the county, the country."""
    point = {"lat": "47.138592", "lon": "9.522097"}
    expected = {18: "address", 17: "street", 14: "locality", 12: "locality", 8: "region",
                5: "country"}
    got = {}
    with httpx.Client(timeout=30.0) as client:
        for zoom in expected:
            request = nominatim.build_request(CASES[0].query)
            url = request.url.copy_with(path="/reverse", params={
                "format": "jsonv2", "addressdetails": "1", "zoom": str(zoom), **point})
            response = client.send(httpx.Request("GET", url, headers=request.headers))
            outcome = nominatim.parse_response(_REVERSE, response)
            assert isinstance(outcome, Match), outcome
            got[zoom] = outcome.precision
    assert got == expected


def test_country_codes_filter_on_the_real_server(nominatim: Nominatim) -> None:
    """Why bad codes are refused before sending: the real server answers an unknown code
    (uk) with nothing and ignores a name; an alpha-2 code filters."""
    request = nominatim.build_request(CASES[0].query)
    answers = {}
    with httpx.Client(timeout=30.0) as client:
        for codes in ("uk", "liechtenstein", "li", "us"):
            url = request.url.copy_with(params={"q": "Prattville", "format": "jsonv2",
                                                "countrycodes": codes})
            answers[codes] = len(client.send(httpx.Request("GET", url, headers=request.headers)).json())
    assert answers["uk"] == 0 and answers["liechtenstein"] > 0
    assert answers["li"] == 0 and answers["us"] > 0
    only_li = Nominatim(URL, user_agent=AGENT, country_codes=["LIE"])
    out = geocode(["Prattville", "Vaduz"], provider=only_li, gate="memory://", rate=50.0)
    assert [type(o) for o in out] == [NoMatch, Match]


def test_rivers_peaks_parks_and_forests_do_not_pass_a_town_level_minimum(
        nominatim: Nominatim) -> None:
    """The real server ranks a river, a peak, a park and a forest like towns and villages
    (search ranks 18-24); geotoolkit reads them as features: a locality minimum keeps the
    town, the village, the street and the house, and none of them."""
    places = {"Rhein": "feature", "Naafkopf": "feature", "Familienpark Äule": "feature",
              "Sattelwald": "feature", "Stausee Steg": "feature", "Vaduz": "locality",
              "Ebenholz": "locality", "Städtle, Vaduz": "street",
              "Landstrasse 51, 9490 Vaduz": "address"}
    frame = pd.DataFrame({"address": list(places)})
    out = frame.geocode.run("address", provider=nominatim, gate="memory://", rate=50.0,
                            min_precision="locality", cache=False, progress=None)
    assert dict(zip(out.address, out.geocode_precision.astype(str), strict=True)) == places
    kept = {a: s for a, s in zip(out.address, out.geocode_status, strict=True)}
    assert kept == {a: "too_coarse" if p == "feature" else "matched" for a, p in places.items()}
    coarse = out[out.geocode_status == "too_coarse"]
    assert coarse.geometry.isna().all() and coarse.geocode_coarse_lon.notna().all()
    assert (coarse.geocode_reason == "precision feature is coarser than locality").all()
