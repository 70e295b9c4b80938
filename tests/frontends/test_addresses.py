"""``geotoolkit.geocode(addresses, ...)``: the sequence front end takes addresses, not a table."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from geotoolkit import geocode
from geotoolkit.errors import ConfigurationError
from geotoolkit.providers import Nominatim
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(rate_limit=50) as simulator:
        yield simulator


@pytest.mark.parametrize("table", [
    pd.DataFrame({"address": [k.address for k in KNOWN_ADDRESSES[:3]]}),
    pd.DataFrame({"address": [k.address for k in KNOWN_ADDRESSES[:3]]}).set_index("address"),
])
def test_a_data_frame_is_refused_before_anything_is_sent(sim: ProviderSimulator,
                                                         table: pd.DataFrame) -> None:
    """A newcomer passed the DataFrame of getting-started.md to geocode() (providers.md's
    example): iterating a frame gives its column labels, so the word 'address' was geocoded
    (one request, a made-up match) and the addresses never were."""
    provider = Nominatim(sim.url, user_agent=UA)
    with pytest.raises(ConfigurationError, match=r"df\.geocode\.run"):
        geocode(table, provider=provider, gate="memory://", rate=40)
    assert sim.count() == 0


@pytest.mark.parametrize("single", [KNOWN_ADDRESSES[0].address,
                                    {"street": "Städtle 38", "city": "Vaduz"}])
def test_a_single_address_is_refused_not_geocoded_piece_by_piece(sim: ProviderSimulator,
                                                                  single: object) -> None:
    """A string went letter by letter; one structured address (a mapping) went key by key:
    'street' and 'city' were geocoded."""
    provider = Nominatim(sim.url, user_agent=UA)
    with pytest.raises(ConfigurationError, match=r"\[.*\]"):
        geocode(single, provider=provider, gate="memory://", rate=40)  # type: ignore[arg-type]
    assert sim.count() == 0


def test_a_column_and_a_list_are_geocoded_row_by_row(sim: ProviderSimulator) -> None:
    provider = Nominatim(sim.url, user_agent=UA)
    column = pd.DataFrame({"address": [k.address for k in KNOWN_ADDRESSES[:3]]})["address"]
    for addresses in (column, list(column)):
        out = geocode(addresses, provider=provider, gate="memory://", rate=40)
        assert [(o.lon, o.lat) for o in out] == [sim.expected(a) for a in column]  # type: ignore[union-attr]
