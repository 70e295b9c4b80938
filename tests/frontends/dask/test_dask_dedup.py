"""Each distinct address is sent once per run, whichever partitions its rows fall in.

On the directory's LocalCluster (two worker processes), against the simulator on
loopback, counting the requests it received. ``cache=False`` where a test counts
requests, so a shared cache cannot hide a second send.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from geotoolkit import dask as gdask
from geotoolkit.results import normalise_address
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

dd = pytest.importorskip("dask.dataframe")

pytestmark = pytest.mark.dask

UA = "geotoolkit-tests/1.0 (tests@example.org)"
NOWHERE = "Nowhere Street 999, 0000 Atlantis"  # the simulator finds nothing for it
UNIQUE = [*(k.address for k in KNOWN_ADDRESSES[:8]), NOWHERE, "Teststrasse 1, 9490 Vaduz #status=400"]


def _options(sim: ProviderSimulator, tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {"provider": "nominatim", "base_url": sim.url, "user_agent": UA, "rate": 200.0,
            "gate": f"sqlite:///{tmp_path}/gate.sqlite", "cache": False, **more}


def _sent(sim: ProviderSimulator) -> Counter[str]:
    return Counter(normalise_address(r.params["q"]) for r in sim.requests)


def test_duplicates_in_different_partitions_are_sent_once(client: Any, tmp_path: Path) -> None:
    # Every address three times, spread over five partitions; the second spelling differs
    # only in case and spaces (the same cache key).
    addresses = [*UNIQUE, *(a.upper() for a in UNIQUE), *(f"  {a}" for a in reversed(UNIQUE))]
    frame = pd.DataFrame({"address": addresses, "n": range(len(addresses))},
                         index=pd.Index([f"r{i:02d}" for i in range(len(addresses))], name="id"))
    ddf = dd.from_pandas(frame, npartitions=5)  # a sorted index: known divisions
    with ProviderSimulator() as sim:
        lazy = gdask.geocode(ddf, "address", **_options(sim, tmp_path))
        assert sim.requests == []  # building it sends nothing
        out = lazy.compute()
        sent = _sent(sim)
        matched = lazy[lazy["geocode_status"] == "matched"].compute()  # derived: same partitions
        alone = frame.geocode.run("address", progress=False, **{**_options(sim, tmp_path),
                                                               "gate": "memory://"})
    assert sent == Counter(normalise_address(a) for a in UNIQUE)  # each once, across partitions
    assert list(out.index) == list(frame.index) and list(out["n"]) == list(frame["n"])
    assert lazy.npartitions == 5 and lazy.known_divisions and lazy.divisions == ddf.divisions
    assert list(matched.index) == [i for i, s in out["geocode_status"].items() if s == "matched"]
    columns = ["lon", "lat", "geocode_status", "geocode_label", "geocode_reason"]
    assert out[columns].astype(object).fillna("-").to_numpy().tolist() == \
        alone[columns].astype(object).fillna("-").to_numpy().tolist()
    assert Counter(out["geocode_status"]) == {"matched": 24, "no_match": 3, "failed": 3}
