"""Opt-in live checks against the real services: skipped unless ``GEOTOOLKIT_LIVE=1``.

Never in CI (only the offline check of the live call's options runs there). Keyless
providers run as is; a keyed one runs when
``GEOTOOLKIT_LIVE_<NAME>_KEY`` is set (for example ``GEOTOOLKIT_LIVE_OPENCAGE_KEY``).
Public Nominatim runs when ``GEOTOOLKIT_LIVE_USER_AGENT`` names your application.
One request per provider, paced by the registry's rate.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from geotoolkit import Match, geocode
from geotoolkit.orchestration.job import gate_backend
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.providers import PROVIDERS, check_usage_policy

from .provider_support import KEYED

#: The run's options besides the provider's: a cache, as public Nominatim's terms ask.
RUN = {"gate": "memory://", "cache": "memory://"}

ADDRESSES = {"census": "4600 Silver Hill Rd, Washington, DC 20233"}
OSLO = "Karl Johans gate 1, 0154 Oslo, Norway"


def _options(name: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if name in KEYED:
        key = os.environ.get(f"GEOTOOLKIT_LIVE_{name.upper()}_KEY")
        if not key:
            pytest.skip(f"GEOTOOLKIT_LIVE_{name.upper()}_KEY is not set")
        options["api_key"] = key
    if name == "nominatim":
        agent = os.environ.get("GEOTOOLKIT_LIVE_USER_AGENT")
        if not agent:
            pytest.skip("GEOTOOLKIT_LIVE_USER_AGENT is not set")
        options["user_agent"] = agent
    return options


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_the_live_call_is_a_valid_run(name: str) -> None:
    """Offline, no request: the options the live lookup passes build a run, and the usage
    check has nothing to say (warnings are errors). It passed ``cached=True``, which no
    option is: every live lookup stopped at 'unknown option' before its request."""
    agent = {"user_agent": "geotoolkit-tests/1.0 (tests@example.org)"} if name == "nominatim" else {}
    key = {"api_key": "not-a-key"} if name in KEYED else {}
    settings = GeocodeOptions.from_env(provider=name, **RUN, **agent, **key)
    for provider in settings.providers:
        check_usage_policy(provider, rows=1, gate_backend=gate_backend(settings.gate),
                           cached=settings.cache is not False)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
@pytest.mark.live
@pytest.mark.skipif(os.environ.get("GEOTOOLKIT_LIVE") != "1", reason="set GEOTOOLKIT_LIVE=1")
def test_one_live_lookup(name: str) -> None:
    address = ADDRESSES.get(name, OSLO)
    (outcome,) = geocode([address], provider=name, **RUN, **_options(name))
    assert isinstance(outcome, Match), outcome
    expected = (-76.93, 38.85) if name == "census" else (10.75, 59.91)
    assert (outcome.lon, outcome.lat) == pytest.approx(expected, abs=0.05)
