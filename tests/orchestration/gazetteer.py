"""A scripted Nominatim-compatible server on 127.0.0.1 for precision, chain and review tests.

Each instance knows its own small table (normalised address -> (lon, lat, precision)),
so two instances are two providers that know different things, with two gate keys and
two cache namespaces. It answers ``/search?q=...`` in Nominatim's jsonv2 with the
fields geotoolkit's own ``Nominatim`` provider reads its precision from (the real
parser runs: nothing is mocked), and logs every query it receives.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from geotoolkit.providers import Nominatim
from geotoolkit.results import normalise_address

UA = "geotoolkit-tests/1.0 (tests@example.org)"

#: Nominatim's words for each precision: (category, type, addresstype, place_rank).
_WORDS = {
    "address": ("building", "house", "building", 30),
    "street": ("highway", "residential", "road", 26),
    "postcode": ("place", "postcode", "postcode", 21),
    "locality": ("place", "town", "town", 16),
    "region": ("boundary", "administrative", "state", 8),
    "country": ("place", "country", "country", 4),
    # A river: its search rank is a village's, its main tag says it is no address.
    "feature": ("waterway", "river", "river", 19),
    "unknown": ("historic", "ruins", None, None),
}

Answer = tuple[float, float, str]


class Gazetteer:
    """The server: ``url``, ``queries`` (normalised, in arrival order), ``provider()``."""

    def __init__(self, places: Mapping[str, Answer], *, name: str = "gazetteer",
                 failing: Iterable[str] = ()) -> None:
        self.places = {normalise_address(k): v for k, v in places.items()}
        self.failing = {normalise_address(k) for k in failing}  # answered 500
        self.name = name
        self.queries: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def provider(self, **options: object) -> Nominatim:
        return Nominatim(self.url, user_agent=UA, **options)  # type: ignore[arg-type]

    def answer(self, query: str) -> list[dict[str, object]]:
        found = self.places.get(normalise_address(query))
        if found is None:
            return []
        lon, lat, precision = found
        category, kind, addresstype, rank = _WORDS[precision]
        return [{"place_id": abs(hash((self.name, query))) % 10**9, "osm_type": "node",
                 "osm_id": 4242, "lat": f"{lat:.7f}", "lon": f"{lon:.7f}",
                 "category": category, "type": kind, "addresstype": addresstype,
                 "place_rank": rank, "display_name": f"{query} ({self.name})",
                 "address": {"road": "Städtle", "house_number": "38", "town": "Vaduz",
                             "postcode": "9490", "country_code": "li"},
                 "boundingbox": [f"{lat - 0.001:.7f}", f"{lat + 0.001:.7f}",
                                 f"{lon - 0.001:.7f}", f"{lon + 0.001:.7f}"]}]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        gazetteer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query).get("q", [""])[0]
                with gazetteer._lock:
                    gazetteer.queries.append(normalise_address(query))
                failing = normalise_address(query) in gazetteer.failing
                answer = gazetteer.answer(query)
                if urlsplit(self.path).path == "/api":  # Photon's GeoJSON
                    answer = {"type": "FeatureCollection", "features": [_feature(a) for a in answer]}
                body = json.dumps({"error": "boom"} if failing else answer).encode()
                self.send_response(500 if failing else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> Gazetteer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _feature(item: Mapping[str, object]) -> dict[str, object]:
    """A Nominatim answer as Photon says it (street level and finer only)."""
    kind = "house" if item["addresstype"] == "building" else "street"
    return {"type": "Feature", "geometry": {"type": "Point", "coordinates": [
        float(item["lon"]), float(item["lat"])]},  # type: ignore[arg-type]
        "properties": {"osm_type": "N", "osm_id": item["osm_id"], "type": kind,
                       "osm_key": "place", "osm_value": kind, "name": item["display_name"],
                       "countrycode": "LI"}}


@contextmanager
def gazetteers(*tables: Mapping[str, Answer]) -> Iterator[list[Gazetteer]]:
    """Several servers at once, named ``first``, ``second``, ..."""
    names = ("first", "second", "third")
    servers = [Gazetteer(t, name=n) for t, n in zip(tables, names, strict=False)]
    for s in servers:
        s.__enter__()
    try:
        yield servers
    finally:
        for s in servers:
            s.__exit__()


#: A table with one answer per precision level (lon, lat inside Liechtenstein).
PLACES: dict[str, Answer] = {
    "Städtle 38, 9490 Vaduz": (9.52195, 47.13974, "address"),
    "Städtle, Vaduz": (9.5213, 47.1385, "street"),
    "9490 Vaduz": (9.5209, 47.1410, "postcode"),
    "Vaduz": (9.5215, 47.1415, "locality"),
    "Oberland": (9.53, 47.12, "region"),
    "Liechtenstein": (9.55, 47.16, "country"),
    "Some ruin": (9.51, 47.17, "unknown"),
}
