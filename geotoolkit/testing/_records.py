"""The simulator's small parts: the request log's entries and its settings' descriptors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from geotoolkit.testing._decide import OUTCOMES
from geotoolkit.testing._places import Hit, resolve

if TYPE_CHECKING:
    from geotoolkit.testing.simulator import ProviderSimulator

__all__ = ["Inspection", "Recovery", "Setting", "SimulatedRequest"]

_T = TypeVar("_T")
_ANY: Any = object()  # sentinel for "no filter"


@dataclass(frozen=True)
class SimulatedRequest:
    """One request as the simulator saw it."""

    time: float  #: ``clock()`` at arrival, before any latency
    key: str | None  #: the API key as sent in the provider's own parameter, or ``None``
    path: str
    params: dict[str, str] = field(hash=False)
    #: normalised free text, ``street=…|city=…``, or ``reverse:lon,lat``; ``None`` if
    #: absent (and for a batch)
    query: str | None
    status: int  #: HTTP status served (``RESET_STATUS`` when the connection was dropped)
    provider: str | None = None  #: whose API the request spoke (``None``: no such endpoint)
    rows: int | None = None  #: records in a batch request (``None``: not a batch)
    #: what it came to: ``ok``, ``fault``, ``outage``, or the refusal (``missing_key``,
    #: ``invalid_key``, ``rate_limited``, ``quota``, ``unavailable``, ``bad_request``,
    #: ``not_found``, ``method``): Google and ArcGIS refuse inside an HTTP 200
    outcome: str = "ok"


class Setting(Generic[_T]):
    """A configuration attribute: reads the current config, assigns through ``_update``."""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Setting[_T]: ...
    @overload
    def __get__(self, obj: ProviderSimulator, owner: type[Any]) -> _T: ...
    def __get__(self, obj: ProviderSimulator | None, owner: type[Any]) -> Setting[_T] | _T:
        if obj is None:
            return self
        value: _T = getattr(obj._config, self._name)
        return value

    def __set__(self, obj: ProviderSimulator, value: _T) -> None:
        obj.configure(**{self._name: value})


class Recovery:
    """Returned by ``outage()``: ``with sim.outage("refuse"): ...`` recovers at the end."""

    def __init__(self, simulator: ProviderSimulator) -> None:
        self._simulator = simulator

    def __enter__(self) -> ProviderSimulator:
        return self._simulator

    def __exit__(self, *exc_info: object) -> None:
        self._simulator.outage(None)


class Inspection:
    """What a test asks a simulator: its log, filtered and counted, and what it would serve."""

    @property
    def requests(self) -> list[SimulatedRequest]:
        raise NotImplementedError

    def requests_for(self, key: str | None) -> list[SimulatedRequest]:
        """The logged requests sent with API key ``key`` (``None``: sent without a key)."""
        return [r for r in self.requests if r.key == key]

    def count(self, status: int | None = None, *, key: str | None = _ANY,
              outcome: str | None = None, provider: str | None = None) -> int:
        """How many logged requests had ``status`` (and ``key``, ``outcome``, ``provider``,
        when given). ``count(outcome="rate_limited")`` also counts Google's and ArcGIS's
        throttling, which they say inside an HTTP 200."""
        if outcome is not None and outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        return sum(
            1
            for r in self.requests
            if (status is None or r.status == status) and (key is _ANY or r.key == key)
            and (outcome is None or r.outcome == outcome)
            and (provider is None or r.provider == provider)
        )

    @staticmethod
    def _hit(address: str | Mapping[str, str]) -> Hit | None:
        return resolve(address) if isinstance(address, str) else resolve(None, address)

    def expected(self, address: str | Mapping[str, str]) -> tuple[float, float] | None:
        """The ``(lon, lat)`` served for ``address`` (free text, or Nominatim's structured
        fields). ``None`` when the simulator finds nothing. Magic tokens are ignored.
        """
        hit = self._hit(address)
        return None if hit is None else (hit.lon, hit.lat)

    def expected_precision(self, address: str | Mapping[str, str]) -> str | None:
        """The level found for ``address``: ``address``, ``street``, ``postcode``,
        ``locality`` or ``country`` (``None``: nothing). Geonorge and the Census find
        addresses only, and the Census calls them ``interpolated``.

        >>> from geotoolkit.testing import ProviderSimulator
        >>> ProviderSimulator().expected_precision("Duxweg 999, 9494 Schaan")
        'street'
        """
        hit = self._hit(address)
        return None if hit is None else hit.level
