"""A provider or options object given to a Prefect flow as a parameter keeps its key out of
the flow run's record.

Prefect stores a flow run's parameters (its database, the UI, the API) after encoding each
with FastAPI's ``jsonable_encoder``, which reads an object's ``vars()``: the provider's
``_api_key`` was stored there in plain text. This calls the method Prefect itself uses,
``Flow.serialize_parameters``; no server is needed.
"""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.providers import Mapbox, OpenCage

prefect = pytest.importorskip("prefect")

KEY = "s3cret-flow-key-4242"


def test_a_flow_run_records_its_provider_and_options_without_the_key() -> None:
    @prefect.flow
    def geocode(provider: object, options: object, by_name: object) -> None:
        """A flow whose parameters are a provider and options (never run here)."""

    provider = OpenCage(base_url="http://127.0.0.1:9", api_key=KEY)
    by_name = GeocodeOptions(provider="mapbox", api_key=KEY, base_url="http://127.0.0.1:9",
                             gate="memory://", cache=False)
    options = GeocodeOptions(provider=provider, gate="memory://", cache=False)
    recorded = geocode.serialize_parameters(
        {"provider": provider, "options": options, "by_name": by_name})
    text = json.dumps(recorded)
    assert KEY not in text
    assert recorded["provider"]["base_url"] == "http://127.0.0.1:9"  # the rest is still there


@pytest.mark.parametrize("copied", [lambda p: pickle.loads(pickle.dumps(p)), copy.deepcopy, copy.copy])
def test_a_provider_still_carries_its_key_when_pickled_or_copied(copied: object) -> None:
    """Dask sends the provider to its workers pickled: the key must travel with it."""
    for provider in (OpenCage(api_key=KEY), Mapbox(api_key=KEY)):
        again = copied(provider)  # type: ignore[operator]
        assert again.secrets == (KEY,) and again.gate_key == provider.gate_key
        assert KEY not in repr(again) and KEY not in str(vars(again))
