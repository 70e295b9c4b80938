"""The policy registry as data, and the usage-policy check (refuse fleets, warn big or uncached)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from geotoolkit import ConfigurationError
from geotoolkit.clock import FakeClock
from geotoolkit.gate import Cap, MemoryGate, gate_key
from geotoolkit.periods import check_zone
from geotoolkit.policy import RatePolicy
from geotoolkit.providers import (
    LARGE_BATCH_ROWS,
    POLICIES,
    PROVIDERS,
    Nominatim,
    OpenCage,
    UsagePolicyWarning,
    check_usage_policy,
    get_policy,
    policy_for,
)

from .provider_support import AGENT, KEYED, make

PUBLIC = Nominatim(user_agent=AGENT)
OWN = Nominatim("http://127.0.0.1:8080", user_agent=AGENT)


def test_every_provider_has_a_policy_with_terms() -> None:
    assert set(POLICIES) == set(PROVIDERS)
    for name, policy in POLICIES.items():
        assert policy.name == name and policy.hosts and policy.notes
        assert policy.terms_url.startswith("https://")
        assert policy.rate_per_second is None or policy.rate_per_second > 0


def test_key_requirements_in_the_registry_match_the_providers() -> None:
    assert {n for n, p in POLICIES.items() if p.key_required} == KEYED


def test_public_nominatim_policy() -> None:
    policy = get_policy(" Nominatim ")
    assert (policy.rate_per_second, policy.user_agent_required, policy.caching_required,
            policy.single_machine_bulk_only) == (1.0, True, True, True)
    assert PUBLIC.default_rate == policy.rate_per_second
    assert [n for n, p in POLICIES.items() if p.single_machine_bulk_only] == ["nominatim"]


def test_free_plan_caps() -> None:
    assert (get_policy("opencage").daily_cap, get_policy("locationiq").daily_cap) == (2500, 5000)
    assert get_policy("mapbox").monthly_cap == 100_000


def test_each_policy_names_the_zone_its_quota_day_starts_in() -> None:
    """Google Maps Platform's daily quotas reset at midnight Pacific time (its usage-limits
    page); OpenCage's at 24:00 UTC; the others publish no zone found: UTC."""
    assert {n: p.cap_tz for n, p in POLICIES.items() if p.cap_tz != "UTC"} == {
        "google": "America/Los_Angeles"}
    assert all(check_zone(p.cap_tz) == p.cap_tz for p in POLICIES.values())
    clock = FakeClock(start=1_796_603_400.0)  # 2026-12-07 00:30 UTC, 16:30 in California
    gate = MemoryGate(clock=clock)
    usage = gate.reserve(gate_key("maps.googleapis.com", "k"), 0.0,
                         cap=Cap(100, tz=get_policy("google").cap_tz)).usage
    assert usage is not None and usage.period == "2026-12-06@America/Los_Angeles"


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        POLICIES["nominatim"] = POLICIES["photon"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        POLICIES["nominatim"].rate_per_second = 100.0  # type: ignore[misc]


def test_unknown_policy_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"geonorge.*google"):
        get_policy("bing")


def test_policy_applies_to_public_hosts_only() -> None:
    assert policy_for(PUBLIC) is POLICIES["nominatim"]
    assert policy_for(OWN) is None
    assert policy_for(make("locationiq", base_url="https://eu1.locationiq.com/v1")) is not None


@pytest.mark.parametrize("backend", ["redis", "postgres", "postgresql", "redis (fallback: local)"])
def test_a_fleet_against_public_nominatim_is_refused(backend: str) -> None:
    with pytest.raises(ConfigurationError, match="single machine"):
        check_usage_policy(PUBLIC, rows=10, gate_backend=backend)


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_fleet_is_fine_elsewhere(backend: str) -> None:
    check_usage_policy(OWN, rows=10**6, gate_backend=backend, cached=False)
    check_usage_policy(make("opencage"), rows=100, gate_backend=backend, cached=False)


@pytest.mark.parametrize(("rate", "shown"), [
    (RatePolicy(rate=5.0), "is 5 requests/s"), (RatePolicy(rate=math.inf), "is unlimited"),
    (RatePolicy(rate=None), "is none, so the fleet would discover one"),
])
def test_a_rate_over_public_nominatims_absolute_maximum_is_refused(rate: RatePolicy,
                                                                   shown: str) -> None:
    # Its policy: "an absolute maximum of 1 request per second"; a rate given was taken as is.
    with pytest.raises(ConfigurationError, match=r"allows 1 request/s at most") as caught:
        check_usage_policy(PUBLIC, rows=1, gate_backend="sqlite", rate=rate)
    assert shown in str(caught.value) and "leave out rate (--rate)" in str(caught.value)


def test_the_providers_own_rate_over_public_nominatims_maximum_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="the rate given is 5 requests/s"):
        check_usage_policy(Nominatim(user_agent=AGENT, rate=5), rows=1)


def test_a_rate_within_the_maximum_or_on_another_host_is_taken() -> None:
    for rate in (RatePolicy(rate=1.0), RatePolicy(rate=0.5), None):
        check_usage_policy(PUBLIC, rows=1, rate=rate)
    check_usage_policy(Nominatim(user_agent=AGENT, rate=0.5), rows=1)
    for rate in (RatePolicy(rate=50.0), RatePolicy(rate=None)):  # your own instance: your rate
        check_usage_policy(OWN, rows=1, rate=rate)
    check_usage_policy(make("opencage"), rows=1, rate=RatePolicy(rate=15.0))  # a paid plan's
    assert [name for name, p in POLICIES.items() if p.rate_is_absolute] == ["nominatim"]


def test_large_batch_against_public_nominatim_warns() -> None:
    check_usage_policy(PUBLIC, rows=LARGE_BATCH_ROWS, gate_backend="sqlite")
    with pytest.warns(UsagePolicyWarning, match=f"{LARGE_BATCH_ROWS + 1} rows"):
        check_usage_policy(PUBLIC, rows=LARGE_BATCH_ROWS + 1, gate_backend="sqlite")


def test_no_cache_against_public_nominatim_warns() -> None:
    # it said "pass a store": no option has that name; the cache is cache= / --cache
    with pytest.warns(UsagePolicyWarning, match=r"cached.*cache=.*--cache") as caught:
        check_usage_policy(PUBLIC, rows=1, gate_backend="memory", cached=False)
    assert "store" not in str(caught[0].message)
    check_usage_policy(make("photon"), rows=1, gate_backend="memory", cached=False)


def test_more_rows_than_the_daily_cap_warns() -> None:
    check_usage_policy(make("opencage"), rows=2500)
    with pytest.warns(UsagePolicyWarning, match="daily cap of 2500"):
        check_usage_policy(make("opencage"), rows=2501)
    check_usage_policy(make("opencage", base_url="http://127.0.0.1:9"), rows=10**6)


def test_usage_policy_warning_is_a_user_warning() -> None:
    assert issubclass(UsagePolicyWarning, UserWarning)


def test_opencage_instance_is_not_single_machine() -> None:
    assert policy_for(OpenCage(api_key="k")) is POLICIES["opencage"]
    assert not POLICIES["opencage"].single_machine_bulk_only
