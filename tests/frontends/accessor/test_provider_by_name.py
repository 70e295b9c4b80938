"""A provider chosen by name through the accessor, with its key and user agent."""

import pandas as pd
import pytest

from geotoolkit.testing import ProviderSimulator


def test_provider_by_name_with_key_and_base_url() -> None:
    df = pd.DataFrame({"address": ["Städtle 38, 9490 Vaduz"]})
    with ProviderSimulator(valid_keys={"sk-live-123"}) as sim:
        out = df.geocode.run(provider="locationiq", api_key="sk-live-123", base_url=sim.url,
                             user_agent="geotoolkit-tests/1.0", gate="memory://", cache=False,
                             progress=False, rate=50)
        sent = sim.requests
    assert list(out["geocode_status"]) == ["matched"]
    assert (out["lon"][0], out["lat"][0]) == sim.expected("Städtle 38, 9490 Vaduz")
    assert sent[0].key == "sk-live-123"
    assert "sk-live-123" not in out.to_csv()


def test_provider_name_without_its_key_is_a_clear_error() -> None:
    df = pd.DataFrame({"address": ["Vaduz"]})
    with pytest.raises(ValueError, match=r"(?i)key"):
        df.geocode.run(provider="opencage", gate="memory://", cache=False, progress=False)
