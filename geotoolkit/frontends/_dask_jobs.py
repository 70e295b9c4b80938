"""The job factories of the dask front end: what each partition's job is, forward or reverse.

A factory travels to the workers (it is pickled with its options) and makes the checked
job of one partition there. Both settle their items through
:func:`~geotoolkit.orchestration.job.settle`, so the graph of
:mod:`geotoolkit.frontends._dask_graph` regroups either kind by key and settles each
distinct query once; :class:`Alone` hides that, for a run partition by partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import pandas as pd

from geotoolkit.orchestration.job import Columns, FrameJob, settle
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.redact import redact
from geotoolkit.results import REVERSE_DECIMALS

if TYPE_CHECKING:
    from geotoolkit.frontends._dask_graph import Job, JobFactory
    from geotoolkit.orchestration.reverse import ReverseJob
    from geotoolkit.results import Outcome, Query, ReverseQuery

__all__ = ["Alone", "Forward", "Reverse"]


@dataclass(frozen=True, repr=False)
class _Factory:
    """What both factories share: the options, settling items, a repr without secrets."""

    options: GeocodeOptions

    async def settle(self, items: list[Query | ReverseQuery | str]) -> list[Outcome]:
        # settle() is annotated for addresses; the engine settles ReverseQuery items alike.
        return await settle(cast("list[Query | str]", items), self.options)

    def __repr__(self) -> str:
        return redact(f"{type(self).__name__}({self.options.provider!r}, gate={self.options.gate}, "
                      f"cache={self.options.cache})")


@dataclass(frozen=True, repr=False)
class Forward(_Factory):
    """Makes the forward-geocoding job of one frame: its ``columns`` (a ``KeyedFactory``)."""

    columns: Columns

    def __call__(self, frame: pd.DataFrame) -> FrameJob:
        return FrameJob(frame, self.columns, self.options)


@dataclass(frozen=True, repr=False)
class Reverse(_Factory):
    """Makes the reverse-geocoding job of one frame (a ``KeyedFactory``): its geometry, or
    its ``lon``/``lat`` columns in ``crs``, as :func:`~geotoolkit.orchestration.reverse.reverse_job`."""

    lon: str | None = None
    lat: str | None = None
    crs: object = None
    decimals: int = REVERSE_DECIMALS
    country: str | None = None

    def __call__(self, frame: pd.DataFrame) -> ReverseJob:
        from geotoolkit.orchestration.reverse import reverse_job

        return reverse_job(frame, self.options, lon=self.lon, lat=self.lat, crs=self.crs,
                           decimals=self.decimals, country=self.country)


@dataclass(frozen=True, repr=False)
class Alone:
    """A job factory without ``settle``: its partitions are geocoded one by one."""

    make_job: JobFactory

    def __call__(self, frame: pd.DataFrame) -> Job:
        return self.make_job(frame)

    def __repr__(self) -> str:
        return f"Alone({self.make_job!r})"
