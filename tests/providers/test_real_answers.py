"""Answers in the form the real APIs send them, over loopback. A throttle is read as a
429 (paused, paced down, never a row's failure) whatever shape it takes (a status in a
200, rate headers about another quota, a header sent twice); what stops the run says
why, in the provider's words."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest
from loopback_support import Quiet, serving

from geotoolkit import FakeClock, Match, MemoryGate, Query, RatePolicy
from geotoolkit.engine import Engine
from geotoolkit.errors import AuthenticationError, RateLimitError
from geotoolkit.progress import Event, Throttled
from geotoolkit.providers import Google, Here, Nominatim, OpenCage
from geotoolkit.testing import ProviderSimulator

from .provider_support import load, make, response_of

KEY = "sk-sim-0123456789"
ADDRESSES = [Query(text=f"Landstrasse {n}, 9490 Vaduz") for n in range(1, 4)]


def run_throttled(factory: Any) -> tuple[list[Any], list[Throttled], int, float]:
    """Three queries at 5/s against a key the simulator lets send two per 10 s, refused
    without a hint (Google never gives one): the outcomes, the throttles, the refusals
    the simulator counted and the fleet's rate factor after the run."""
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    events: list[Event] = []
    with ProviderSimulator(clock=clock.now) as sim:
        sim.configure(rate_limit=0.2, window_seconds=10.0, retry_after="missing")
        provider = factory(sim.url, api_key=KEY)
        engine = Engine(provider, gate=gate, rate=RatePolicy(rate=5.0), clock=clock, concurrency=1,
                        rng=random.Random(3))
        outcomes = asyncio.run(engine.run(ADDRESSES, events.append))
        refused = sim.count(outcome="rate_limited")
    throttles = [e for e in events if isinstance(e, Throttled)]
    return outcomes, throttles, refused, gate.stats(provider.gate_key).rate_factor


def test_an_in_body_throttle_paces_the_fleet_down_as_a_429_does() -> None:
    """Google says OVER_QUERY_LIMIT in an HTTP 200 where HERE answers 429: the fleet must
    do the same with both (its pace cut, the same refusals), not retry at the refused
    pace."""
    google, here = run_throttled(Google), run_throttled(Here)
    for outcomes, throttles, refused, factor in (google, here):
        assert all(isinstance(o, Match) for o in outcomes)
        assert refused == len(throttles) and {t.status_code for t in throttles} == {429}
        assert factor < 1.0  # the pace was cut
    assert google[2] == here[2]


def test_google_over_query_limit_is_its_429() -> None:
    with pytest.raises(RateLimitError) as caught:
        make("google").parse_response(ADDRESSES[0], response_of(load("google", "rate_limited")))
    assert caught.value.status_code == 429 and caught.value.retry_after is None


class Loopback:
    """A threading HTTP server on 127.0.0.1 for ``handler``, serving inside ``with``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._serving = serving(self.server)

    def __enter__(self) -> Self:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(None, None, None)


class Scripted(Loopback):
    """A loopback server answering each GET with the next ``(status, headers, body)``, then
    the last one again (header values sent as UTF-8); the path and query are recorded."""

    def __init__(self, answers: list[tuple[int, dict[str, str] | list[tuple[str, str]], bytes]]
                 ) -> None:
        self.answers, self.seen = answers, []
        script = self

        class Handler(Quiet):
            def do_GET(self) -> None:
                script.seen.append(self.path)
                status, headers, body = script.answers[min(len(script.seen), len(script.answers)) - 1]
                pairs = headers.items() if isinstance(headers, dict) else headers
                self.reply(status, [(name, value.encode().decode("latin-1"))  # as UTF-8 bytes
                                    for name, value in pairs], body)

        super().__init__(Handler)


@pytest.fixture
def opencage_trial_429() -> Iterator[Scripted]:
    """OpenCage's free trial requested too quickly: 429 and its body, with the trial's
    X-RateLimit trio about the day's quota (2,500, most of it left, resetting at midnight
    UTC, half a day away), then its answer."""
    throttled = load("opencage", "rate_limited")["json"]
    match = load("opencage", "match")["json"]
    trio = {"X-RateLimit-Limit": "2500", "X-RateLimit-Remaining": "2412",
            "X-RateLimit-Reset": str(int(time.time()) + 43_200)}
    json_type = {"Content-Type": "application/json; charset=utf-8"}
    with Scripted([(429, {**json_type, **trio}, json.dumps(throttled).encode()),
                   (200, {**json_type, **trio}, json.dumps(match).encode())]) as server:
        yield server


def test_a_429_for_speed_does_not_wait_for_the_days_quota_to_reset(
        opencage_trial_429: Scripted) -> None:
    """The reset of a quota that is not spent is not when to retry: the 429 was about the
    pace, so the wait is the backoff's, not the five minutes the cap allows."""
    clock = FakeClock(start=0.0)
    events: list[Event] = []
    engine = Engine(OpenCage(opencage_trial_429.url, api_key=KEY), gate=MemoryGate(clock=clock),
                    rate=RatePolicy(rate=1.0), clock=clock, concurrency=1, rng=random.Random(3))
    outcomes = asyncio.run(engine.run(ADDRESSES[:1], events.append))
    assert isinstance(outcomes[0], Match) and len(opencage_trial_429.seen) == 2
    throttle, = (e for e in events if isinstance(e, Throttled))
    assert (throttle.status_code, throttle.cause, throttle.retry_after) == (429, "backoff", None)


def test_retry_after_sent_twice_is_honoured() -> None:
    """``Retry-After: 30`` twice (a proxy adding its own to the server's): httpx joins them
    as ``30, 30``, still a wait of 30 s, not a header to ignore (then a bare backoff)."""
    match = json.dumps(load("nominatim", "match")["json"]).encode()
    json_type = ("Content-Type", "application/json; charset=utf-8")
    twice = [json_type, ("Retry-After", "30"), ("Retry-After", "30")]
    with Scripted([(429, twice, b"<html>Too Many Requests</html>"), (200, [json_type], match)]
                  ) as server:
        outcomes, throttles = nominatim_run(server)
    assert isinstance(outcomes[0], Match) and len(server.seen) == 2
    throttle, = throttles
    assert (throttle.cause, throttle.retry_after) == ("retry-after", 30.0)
    assert throttle.wait_seconds >= 30.0


def test_a_refusal_that_stops_the_run_says_why() -> None:
    """OpenCage's 403 for a key restricted to other IP addresses: the run stops, and says
    so in OpenCage's words, not only "refused the credentials" (a disabled key, a rejected
    IP and a wrong key are fixed differently); the key is in no message."""
    body = {**load("opencage", "forbidden")["json"],
            "status": {"code": 403, "message": "IP address rejected"}}
    answer = (403, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(body).encode())
    with Scripted([answer]) as server:
        clock = FakeClock(start=0.0)
        engine = Engine(OpenCage(server.url, api_key=KEY), gate=MemoryGate(clock=clock),
                        rate=RatePolicy(rate=1.0), clock=clock, concurrency=1, rng=random.Random(3))
        with pytest.raises(AuthenticationError) as caught:
            asyncio.run(engine.run(ADDRESSES))
    assert len(server.seen) == 1 and KEY in server.seen[0]  # sent once, with its key
    assert "HTTP 403" in str(caught.value) and "IP address rejected" in str(caught.value)
    assert KEY not in str(caught.value)


def nominatim_run(server: Scripted) -> tuple[list[Any], list[Throttled]]:
    clock = FakeClock(start=0.0)
    events: list[Event] = []
    engine = Engine(Nominatim(server.url, user_agent="geotoolkit-tests/1.0 (tests@example.org)"),
                    gate=MemoryGate(clock=clock), rate=RatePolicy(rate=1.0), clock=clock,
                    concurrency=1, rng=random.Random(3))
    outcomes = asyncio.run(engine.run(ADDRESSES[:1], events.append))
    return outcomes, [e for e in events if isinstance(e, Throttled)]


NON_ASCII = [("X-Served-By", "Kartverket sørvis"), ("Server", "nginx (ünïcode)")]


def test_a_header_that_is_not_ascii_does_not_lose_the_answer() -> None:
    """Servers do send Latin-1 or UTF-8 in a header (a server name, a note, a Location):
    the answer is read, not the row failed with a UnicodeEncodeError before a request."""
    match = json.dumps(load("nominatim", "match")["json"]).encode()
    with Scripted([(200, [("Content-Type", "application/json"), *NON_ASCII], match)]) as server:
        outcomes, _ = nominatim_run(server)
    assert isinstance(outcomes[0], Match)


@pytest.mark.parametrize(("retry_after", "expected"), [
    ("30", 30.0), ("\uff13\uff10", None), ("30 sekündlich", None)])  # full-width "30"
def test_a_429_with_headers_that_are_not_ascii_is_still_a_throttle(
        retry_after: str, expected: float | None) -> None:
    """The 429 pauses and the row is answered after it, whatever else its headers hold;
    a Retry-After that is not ASCII digits is no hint (a backoff), never a crash."""
    match = json.dumps(load("nominatim", "match")["json"]).encode()
    throttled = [("Retry-After", retry_after), *NON_ASCII]
    with Scripted([(429, throttled, b"<html>Too Many Requests</html>"),
                   (200, [("Content-Type", "application/json")], match)]) as server:
        outcomes, throttles = nominatim_run(server)
    assert isinstance(outcomes[0], Match) and len(server.seen) == 2
    assert [t.retry_after for t in throttles] == [expected]


def test_a_429_saying_its_reset_in_the_drafts_dictionary_form_waits_for_it() -> None:
    """A self-hosted instance behind a gateway that says its limit in the RateLimit field's
    7th-revision form (``limit=60, remaining=0, reset=30``, express-rate-limit's "draft-7")
    and no Retry-After: the fleet waits the 30 s, not a bare backoff."""
    match = json.dumps(load("nominatim", "match")["json"]).encode()
    limited = [("RateLimit", "limit=60, remaining=0, reset=30"), ("RateLimit-Policy", "60;w=60")]
    with Scripted([(429, limited, b'{"message": "Too many requests"}'),
                   (200, [("Content-Type", "application/json")], match)]) as server:
        outcomes, throttles = nominatim_run(server)
    assert isinstance(outcomes[0], Match) and len(server.seen) == 2
    assert [(t.cause, t.retry_after) for t in throttles] == [("retry-after", 30.0)]
    assert throttles[0].wait_seconds >= 30.0


#: nginx's own page for a request ``limit_req`` refuses when no ``limit_req_status`` is set.
NGINX_503 = (b"<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n"
             b"<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n"
             b"<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n")


class LimitReq(Loopback):
    """nginx ``limit_req`` with no burst in front of Nominatim, on loopback and on a fake
    clock: a request sooner than ``1 / rate`` after the last one passed is refused (a
    refusal does not count), with ``status`` (nginx's default, 503, its HTML page and no
    Retry-After; ``limit_req_status 429``: the same page with 429); the others get a match."""

    def __init__(self, clock: FakeClock, rate: float, status: int = 503) -> None:
        match = json.dumps(load("nominatim", "match")["json"]).encode()
        self.statuses: list[int] = []
        passed: list[float] = []
        limiter = self

        class Handler(Quiet):
            def do_GET(self) -> None:
                now = clock.now()
                ok = not passed or now - passed[-1] >= 1.0 / rate - 1e-9
                if ok:
                    passed.append(now)
                code, kind, body = ((200, "application/json", match) if ok else
                                    (status, "text/html", NGINX_503))
                limiter.statuses.append(code)
                self.reply(code, [("Server", "nginx/1.22.1"), ("Content-Type", kind)], body)

        super().__init__(Handler)


def run_against_limit_req(status: int) -> tuple[list[Any], list[int], float]:
    """30 rows configured at 2/s against nginx limiting to 1/s: the outcomes, the statuses
    nginx answered and the fleet's rate factor after the run."""
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    with LimitReq(clock, rate=1.0, status=status) as nginx:
        provider = Nominatim(nginx.url, user_agent="geotoolkit-tests/1.0 (tests@example.org)")
        engine = Engine(provider, gate=gate, rate=RatePolicy(rate=2.0, safety_margin=0.0),
                        clock=clock, concurrency=1, rng=random.Random(3))
        queries = [Query(text=f"Landstrasse {n}, 9490 Vaduz") for n in range(30)]
        outcomes = asyncio.run(engine.run(queries))
    return outcomes, nginx.statuses, gate.stats(provider.gate_key).rate_factor


def test_nginx_limit_req_as_it_ships_paces_the_fleet_down_as_its_429_does() -> None:
    """nginx ``limit_req`` without ``limit_req_status`` (how it ships, and how self-hosted
    Nominatim instances run it) refuses with 503 and its HTML page, no Retry-After. Read
    as an outage's 503 (a pause, the pace kept), a fleet configured at twice the limit
    was refused every other send for ever: measured, 16 workers on a real nginx got 8 %
    of the limit and lost 140 of 300 rows to the deadline. It is the limiter's refusal:
    the pace is cut as after the 429 the same nginx sends with ``limit_req_status 429``."""
    for status in (503, 429):
        outcomes, statuses, factor = run_against_limit_req(status)
        assert all(isinstance(o, Match) for o in outcomes)
        refused = statuses.count(status)
        assert refused <= 5 and factor <= 0.55, (status, refused, factor)  # cut to the limit


@pytest.mark.parametrize("status", [408, 425])
def test_a_request_timeout_or_too_early_is_retried_not_the_rows_failure(status: int) -> None:
    """A 408 (a server or proxy that gave up waiting for the request: Go's net/http and
    Apache send one on a keep-alive connection they close) and a 425 say "not now", not
    "not this query": the row is sent again and matches, not failed as a query refused."""
    match = json.dumps(load("nominatim", "match")["json"]).encode()
    with Scripted([(status, {"Content-Type": "text/plain", "Connection": "close"}, b"Request Timeout"),
                   (200, {"Content-Type": "application/json"}, match)]) as server:
        outcomes, throttles = nominatim_run(server)
    assert isinstance(outcomes[0], Match) and len(server.seen) == 2
    assert outcomes[0].attempts == 2 and throttles == []


@pytest.mark.parametrize("header", ["X-RateLimit-Reset", "RateLimit-Reset"])
def test_a_429_saying_its_reset_in_unix_milliseconds_waits_until_then(header: str) -> None:
    """Some gateways send the reset as a Unix time in milliseconds: read as seconds it was
    about 56 000 years ahead, and the fleet paused for the whole cap (300 s), not 20 s."""
    match = json.dumps(load("nominatim", "match")["json"]).encode()
    reset = str(int(time.time() * 1000) + 20_000)  # measured from the answer's own Date
    with Scripted([(429, {"X-RateLimit-Remaining": "0", header: reset}, b"Too Many Requests"),
                   (200, {"Content-Type": "application/json"}, match)]) as server:
        outcomes, throttles = nominatim_run(server)
    assert isinstance(outcomes[0], Match) and len(server.seen) == 2
    throttle, = throttles
    assert throttle.retry_after is not None and 15.0 < throttle.retry_after <= 21.0
    assert throttle.wait_seconds < 60.0


def test_a_retry_after_with_a_fraction_is_waited_out() -> None:
    """``Retry-After: 1.5`` is not RFC 9110's integer, but servers send it: ignored, the
    retry went after a bare backoff (0.76 s here), before the server would take it."""
    match = json.dumps(load("nominatim", "match")["json"]).encode()
    with Scripted([(429, {"Retry-After": "1.5"}, b"Too Many Requests"),
                   (200, {"Content-Type": "application/json"}, match)]) as server:
        outcomes, throttles = nominatim_run(server)
    assert isinstance(outcomes[0], Match) and len(server.seen) == 2
    throttle, = throttles
    assert (throttle.cause, throttle.retry_after) == ("retry-after", 1.5)
    assert throttle.wait_seconds >= 1.5


CHALLENGE = (b'<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title></head>'
             b"<body><h1>Checking if the site connection is secure</h1><script>var x = 1;</script>"
             b"</body></html>")


def test_a_403_to_a_request_without_a_key_stops_the_run_without_speaking_of_credentials() -> None:
    """A bot challenge or a block page in front of a keyless provider (Nominatim, Photon)
    ended the run with "refused the credentials (HTTP 403)": there were none to fix."""
    challenge = (403, {"Content-Type": "text/html; charset=UTF-8"}, CHALLENGE)
    with Scripted([challenge]) as server, pytest.raises(AuthenticationError) as caught:
        nominatim_run(server)
    message = str(caught.value)
    assert "credentials" not in message and "carried no API key" in message
    assert "HTTP 403" in message and "Checking if the site connection is secure" in message
