"""The providers package's public names, and its docstring examples (offline)."""

from __future__ import annotations

import doctest
import importlib

import pytest

import geotoolkit.providers

MODULES = ["arcgis", "census", "geonorge", "google", "here", "locationiq", "mapbox", "nominatim",
           "opencage", "pelias", "photon", "policies", "protocol", "registry", "_batch",
           "_census_batch", "_common", "_fields", "_iso3166", "base", "precision"]


def test_public_names_are_pinned() -> None:
    assert sorted(geotoolkit.providers.__all__) == sorted([
        "BATCH_MAX_RECORDS", "LARGE_BATCH_ROWS", "POLICIES", "PROVIDERS", "PUBLIC_NOMINATIM",
        "ArcGIS", "BatchPolicy", "Census", "CensusBatch", "ForwardProvider", "Geonorge", "Google",
        "Here", "LocationIQ", "Mapbox", "Nominatim", "OpenCage", "Pelias", "Photon", "Provider",
        "ProviderPolicy", "UsagePolicyWarning", "batch_policy", "can_reverse", "check_usage_policy",
        "get_policy", "get_provider", "policy_for", "resolve_provider",
    ])
    for name in geotoolkit.providers.__all__:
        assert hasattr(geotoolkit.providers, name), name


@pytest.mark.parametrize("name", [*MODULES, "geotoolkit.frontends.addresses"])
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name if "." in name else f"geotoolkit.providers.{name}")
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0
