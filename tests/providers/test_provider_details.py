"""Each provider's own conventions: parameter names, structured search, special statuses."""

from __future__ import annotations

import httpx
import pytest

from geotoolkit import Failure, NoMatch, Query
from geotoolkit.errors import AuthenticationError, QuotaExceededError, RateLimitError
from geotoolkit.providers import ArcGIS, Geonorge, Mapbox, Pelias

from .provider_support import SECRET, load, make, response_of

OSLO = Query(housenumber="1", street="Karl Johans gate", city="Oslo", postalcode="0154",
             country="NO")
TEXT = Query(text="Karl Johans gate 1, Oslo")


def params(name: str, query: Query = OSLO, **options: object) -> dict[str, str]:
    return dict(make(name, **options).build_request(query).url.params)


def test_key_parameter_names() -> None:
    names = {"locationiq": "key", "opencage": "key", "google": "key", "mapbox": "access_token",
             "here": "apiKey", "arcgis": "token", "pelias": "api_key"}
    for name, param in names.items():
        assert params(name, TEXT)[param] == SECRET, name


def test_providers_without_structured_search_join_the_fields() -> None:
    assert params("photon")["q"] == "1 Karl Johans gate, Oslo, 0154, NO"
    assert params("opencage")["q"] == "1 Karl Johans gate, Oslo, 0154, NO"
    google = params("google")
    assert google["address"] == "1 Karl Johans gate, Oslo, 0154, NO"
    assert google["components"] == "country:NO"


def test_pelias_structured_and_free_text() -> None:
    request = make("pelias").build_request(OSLO)
    assert request.url.path == "/v1/search/structured"
    assert {k: v for k, v in request.url.params.items() if k != "api_key"} == {
        "address": "1 Karl Johans gate", "locality": "Oslo", "postalcode": "0154",
        "country": "NO", "size": "1"}
    assert make("pelias").build_request(TEXT).url.path == "/v1/search"


def test_self_hosted_pelias_and_arcgis_need_no_key() -> None:
    assert "api_key" not in Pelias("http://127.0.0.1:4000").build_request(TEXT).url.params
    assert "token" not in ArcGIS("http://127.0.0.1:6080/arcgis/rest/services/X/GeocodeServer"
                                 ).build_request(TEXT).url.params


def test_mapbox_structured_input_and_permanence() -> None:
    assert params("mapbox") == {"address_number": "1", "street": "Karl Johans gate",
                                "place": "Oslo", "postcode": "0154", "country": "NO",
                                "limit": "1", "permanent": "false", "access_token": SECRET}
    permanent = Mapbox(api_key=SECRET, permanent=True)
    assert permanent.build_request(TEXT).url.params["permanent"] == "true"
    assert permanent.cache_namespace() != Mapbox(api_key=SECRET).cache_namespace()
    assert "permanent=True" in repr(permanent)


def test_mapbox_throttle_hint_from_the_reset_header_yields_to_retry_after() -> None:
    headers = {"Date": "Mon, 02 Jun 2025 10:00:00 GMT", "X-Rate-Limit-Reset": "1748858442"}
    with pytest.raises(RateLimitError) as info:
        make("mapbox").parse_response(TEXT, httpx.Response(429, headers={**headers, "Retry-After": "7"}))
    assert info.value.retry_after == 7.0
    with pytest.raises(RateLimitError) as info:
        make("mapbox").parse_response(TEXT, httpx.Response(429))
    assert info.value.retry_after is None


def test_here_qualified_query() -> None:
    query = Query(street="Karl Johans gate;1", city="Oslo")
    assert params("here", query)["qq"] == "street=Karl Johans gate 1;city=Oslo"
    assert params("here", TEXT, language="nb")["lang"] == "nb"


def test_arcgis_asks_for_wgs84_json_and_storage_rights() -> None:
    got = params("arcgis")
    assert (got["f"], got["outSR"], got["forStorage"]) == ("json", "4326", "false")
    assert (got["Address"], got["City"], got["Postal"], got["CountryCode"]) == (
        "1 Karl Johans gate", "Oslo", "0154", "NO")
    stored = ArcGIS(api_key=SECRET, for_storage=True)
    assert stored.build_request(TEXT).url.params["forStorage"] == "true"
    assert stored.cache_namespace() != ArcGIS(api_key=SECRET).cache_namespace()


def test_geonorge_structured_search() -> None:
    query = Query(housenumber="1b", street="Karl Johans gate", city="Oslo", postalcode="0154")
    got = dict(Geonorge().build_request(query).url.params)
    assert got == {"adressenavn": "Karl Johans gate", "nummer": "1", "bokstav": "B",
                   "postnummer": "0154", "poststed": "Oslo", "treffPerSide": "1",
                   "utkoordsys": "4258"}


@pytest.mark.parametrize("query", [Query(housenumber="12-14", street="Storgata", city="Oslo"),
                                   Query(housenumber="3", country="NO")])
def test_geonorge_falls_back_to_free_text(query: Query) -> None:
    got = dict(Geonorge().build_request(query).url.params)
    assert got["sok"] == ", ".join(filter(None, [
        " ".join(filter(None, [query.housenumber, query.street])), query.city, query.country]))
    assert "nummer" not in got


def test_census_structured_and_one_line() -> None:
    query = Query(housenumber="4600", street="Silver Hill Rd", city="Washington", state="DC",
                  postalcode="20233")
    request = make("census").build_request(query)
    assert request.url.path == "/geocoder/locations/address"
    assert dict(request.url.params) == {"street": "4600 Silver Hill Rd", "city": "Washington",
                                        "state": "DC", "zip": "20233",
                                        "benchmark": "Public_AR_Current", "format": "json"}
    assert make("census").build_request(TEXT).url.params["address"] == TEXT.text


def test_locationiq_is_nominatim_shaped() -> None:
    request = make("locationiq").build_request(OSLO)
    assert request.url.path == "/v1/search" and request.url.params["format"] == "json"
    assert request.url.params["street"] == "1 Karl Johans gate"
    eu = make("locationiq", base_url="https://eu1.locationiq.com/v1")
    assert eu.default_rate == 2.0 and eu.host == "eu1.locationiq.com"
    assert eu.gate_key == make("locationiq").gate_key  # the plan's limits are per key
    assert make("locationiq", base_url="http://127.0.0.1:9").gate_key != eu.gate_key


def test_locationiq_other_404_is_a_failure() -> None:
    outcome = make("locationiq").parse_response(TEXT, httpx.Response(404, json={"error": "Not found"}))
    assert isinstance(outcome, Failure) and outcome.error == "QueryError"
    assert isinstance(make("locationiq").parse_response(TEXT, httpx.Response(200, json=[])), NoMatch)


def test_opencage_trusts_the_body_status_behind_a_proxy() -> None:
    body = {"results": [], "status": {"code": 402, "message": "quota exceeded"}, "total_results": 0}
    with pytest.raises(QuotaExceededError):
        make("opencage").parse_response(TEXT, httpx.Response(200, json=body))
    assert params("opencage", TEXT, country_codes=["NO", "SE"])["countrycode"] == "no,se"


def test_google_unknown_status_is_a_failure() -> None:
    outcome = make("google").parse_response(TEXT, httpx.Response(200, json={"status": "NEW_THING"}))
    assert isinstance(outcome, Failure) and "NEW_THING" in outcome.reason


def test_photon_label_from_properties() -> None:
    body = {"type": "FeatureCollection", "features": [{
        "type": "Feature", "geometry": {"type": "Point", "coordinates": [10.75, 59.91]},
        "properties": {"name": "Slottet", "city": "Oslo", "postcode": "0010", "country": "Norway"}}]}
    outcome = make("photon").parse_response(TEXT, httpx.Response(200, json=body))
    assert outcome.label == "Slottet, 0010 Oslo, Norway"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "case", "words"),
    [
        # OpenCage asks libraries to show status.message: a disabled key, a rejected IP and a
        # spent quota are all 401-403 or 402 and need different fixes
        ("opencage", "forbidden", "API key disabled"),
        ("opencage", "quota", "quota exceeded"),
        ("opencage", "unauthorized", "invalid API key"),
        # LocationIQ: "Invalid key", "Key not active", "Service not enabled", "Access restricted"
        ("locationiq", "invalid_key", "Invalid key"),
        ("here", "unauthorized", "apiKey invalid. apiKey not found."),
        ("mapbox", "unauthorized", "Not Authorized - Invalid Token"),
        ("pelias", "unauthorized", "invalid api_key"),
        # Nominatim's ban page (HTML): the block, not a key, is what stopped the run
        ("nominatim", "forbidden", "Access blocked: you have been blocked for violating the usage policy"),
    ],
)
def test_what_stops_the_run_carries_the_providers_own_words(name: str, case: str, words: str) -> None:
    with pytest.raises((AuthenticationError, QuotaExceededError)) as caught:
        make(name).parse_response(TEXT, response_of(load(name, case)))
    assert words in str(caught.value) and SECRET not in str(caught.value)
    assert "<" not in str(caught.value)  # no markup


def test_the_providers_words_are_redacted_and_capped() -> None:
    echoed = httpx.Response(403, json={"status": {"code": 403, "message": f"key {SECRET} disabled "
                                                                          + "x" * 5000}})
    with pytest.raises(AuthenticationError) as caught:
        make("opencage").parse_response(TEXT, echoed)
    assert SECRET not in str(caught.value) and "key *** disabled" in str(caught.value)
    assert len(str(caught.value)) < 400


NGINX_414 = ("<html>\r\n<head><title>414 Request-URI Too Large</title></head>\r\n<body>\r\n"
             "<center><h1>414 Request-URI Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n"
             "</body>\r\n</html>\r\n")


@pytest.mark.parametrize(
    ("name", "response", "words"),
    [
        # a proxy's HTML page: its text on one line, not the markup
        ("photon", httpx.Response(414, text=NGINX_414), "(HTTP 414): 414 Request-URI Too Large nginx"),
        # Google's own words are in error_message
        ("google", httpx.Response(400, json={"error_message": "Invalid request. Invalid 'latlng' "
                                             "parameter.", "results": [], "status": "INVALID_REQUEST"}),
         "(HTTP 400): Invalid request. Invalid 'latlng' parameter."),
        ("mapbox", httpx.Response(422, json={"message": "Query too long - 300/256 characters"}),
         "(HTTP 422): Query too long - 300/256 characters"),
    ],
)
def test_a_refused_row_says_why_on_one_line(name: str, response: httpx.Response, words: str) -> None:
    outcome = make(name).parse_response(TEXT, response)
    assert isinstance(outcome, Failure) and outcome.error == "QueryError"
    assert outcome.reason.endswith(words) and "<" not in outcome.reason and "\n" not in outcome.reason
