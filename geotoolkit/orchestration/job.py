"""One way through: check a frame, open the gate and the cache, run the engine, build the result.

Every front end goes through here: the accessor and the command line (a frame), the
dask front end (one frame per partition), background jobs and :func:`settle` for
plain lists of addresses. Checks come first and open nothing: a bad column, a frame
whose own ``lon``/``lat``/``geometry`` would be overwritten, a usage policy the run
would break. The gate and the cache are opened by :func:`settle` only for the run,
and closed when it ends, however it ends (objects passed in are left open); a run with
nothing to send (no rows, or only rows that cannot be sent) opens neither.

With a provider chain (``provider=[first, second, ...]``) each stage is its own engine
batch under that provider's gate key, rate and usage policy; the rows that come back in
``fallback_on`` go on to the next stage (announced by a
:class:`~geotoolkit.progress.StageStarted` event), and so do the rows a stage had not
settled when its provider's quota ran out or its circuit timed out (only the last
provider's stop ends the run). A row keeps the best answer any stage gave (a match, the
finest too-coarse match, a no-match, a failure; the earlier stage on a tie). Too coarse
is decided here, not in the engine: the cache keeps the match, so a rerun with another
``min_precision`` sends nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import unicodedata
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from geotoolkit.clock import SystemClock
from geotoolkit.engine import Engine, run_sync
from geotoolkit.errors import ConfigurationError, ProviderUnavailableError, QuotaExceededError
from geotoolkit.gate import Gate, open_gate
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.progress import ProgressSink, StageSink, StageStarted
from geotoolkit.providers.base import Provider
from geotoolkit.providers.policies import check_usage_policy
from geotoolkit.redact import redact
from geotoolkit.results import (
    PRECISIONS,
    STRUCTURED_FIELDS,
    Failure,
    Match,
    NoMatch,
    Outcome,
    Query,
    query_from_value,
)
from geotoolkit.schema import STATUSES, final_status, passes_on, result_columns
from geotoolkit.store import ResultStore, open_store
from geotoolkit.store.base import AttemptLog, Attempts
from geotoolkit.urls import backend_of
from geotoolkit.validate import check_point, country_code, require_country, row_countries

if TYPE_CHECKING:
    import geopandas as gpd

__all__ = ["COLUMN_ARGUMENTS", "Columns", "FrameJob", "gate_backend", "refused_point", "settle",
           "stage_names"]

#: Keyword arguments naming structured-address columns (``country`` may also be a code).
COLUMN_ARGUMENTS = STRUCTURED_FIELDS


def gate_backend(gate: str | Gate | None) -> str:
    """The backend a gate argument selects, without opening it (``None``: sqlite)."""
    if gate is None:
        return "sqlite"
    if isinstance(gate, str):
        return backend_of(gate) or ""
    return str(getattr(gate, "backend", ""))


# -- where the addresses are ---------------------------------------------------------------


@dataclass(frozen=True)
class Columns:
    """Which columns of a frame hold the addresses.

    ``text`` is a free-text column, or ``structured`` maps Query fields (street,
    housenumber, city, county, state, postalcode) to column names. ``country`` is an
    ISO 3166-1 alpha-2 code (every point must lie in that country), or the name of a
    column with a code or an English country name per row (sent as the structured
    ``country`` field too).
    """

    text: str | None = None
    structured: Mapping[str, str] = field(default_factory=dict)
    country: str | None = None

    @classmethod
    def from_arguments(cls, column: str | None = None, **named: str | None) -> Columns:
        """From a front end's arguments: ``column`` and ``street=...``, ``country=...``."""
        unknown = sorted(set(named) - set(COLUMN_ARGUMENTS))
        if unknown:
            raise ConfigurationError(f"unknown column arguments: {', '.join(unknown)}")
        for argument, value in {"column": column, **named}.items():
            require_name(argument, value)
        country = named.pop("country", None)
        structured = {k: v for k, v in named.items() if v is not None}
        if structured and column is not None:
            raise ConfigurationError("give either one free-text column or structured columns, "
                                     "not both")
        if not structured and column is None:
            column = "address"
        return cls(column, structured, country)

    @classmethod
    def take(cls, column: str | None, arguments: dict[str, Any]) -> Columns:
        """From ``column`` and the column arguments (``street=...``, ``country=...``) popped
        out of a front end's keyword ``arguments`` (the rest are options)."""
        named = {name: arguments.pop(name) for name in COLUMN_ARGUMENTS if name in arguments}
        return cls.from_arguments(column, **named)

    def names(self, frame_columns: Iterable[Hashable]) -> list[str]:
        """The columns this reads in a frame with ``frame_columns``."""
        names = [self.text] if self.text is not None else list(self.structured.values())
        if self.country is not None and self.country in set(frame_columns):
            names.append(self.country)
        return [n for n in names if n is not None]


def require_name(argument: str, value: object) -> None:
    """Refuse a column argument that is no column name: the column itself (``df["address"]``,
    which pandas cannot tell true or false), or a list of names."""
    try:
        hash(value)
    except TypeError:
        name = getattr(value, "name", None)
        example = repr(name if isinstance(name, str) else
                       "address" if argument == "column" else argument)
        several = " (the parts of an address: street=, city=, postalcode=...)" \
            if argument == "column" and isinstance(value, list | set) else ""
        raise ConfigurationError(
            f"{argument} takes the name of a column, e.g. {argument}={example}, got a "
            f"{type(value).__name__}{several}") from None


def require_columns(frame_columns: Iterable[Hashable], names: Iterable[str]) -> None:
    """Refuse a missing column, with a hint when only the case, the spaces around the name
    or invisible characters in it differ (a spreadsheet's ``"address "``, a zero-width
    space pasted from a web page); a name that does not print is listed as its repr."""
    labels = list(frame_columns)
    available = [str(c) for c in labels]
    for name in names:
        if name in labels:
            continue
        same = [c for c in available if _loosely(c) == _loosely(str(name))]
        hint = f" (did you mean {same[0]!r}?)" if same else ""
        listing = ", ".join(c if c.isprintable() else repr(c) for c in available) or "(none)"
        raise KeyError(f"column {name!r} not in the frame{hint}; available columns: {listing}")


def _loosely(name: str) -> str:
    """``name`` without format characters (zero-width spaces, byte order marks), spaces
    around it, or case."""
    return "".join(c for c in name if unicodedata.category(c) != "Cf").strip().casefold()


def check_frame(frame: pd.DataFrame, columns: Columns, *, overwrite: bool = False) -> None:
    """Refuse a frame geotoolkit cannot geocode without losing or confusing data."""
    duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if duplicated:
        raise ConfigurationError(
            f"the frame has duplicate column names: {', '.join(map(repr, duplicated))}; "
            "give every column a distinct name first (df.columns = [...])")
    require_columns(frame.columns, columns.names(frame.columns))
    ours = "geocode_status" in frame.columns  # an earlier result: its geocode columns are ours
    # otherwise every column a result adds (lon, lat, geocode_label, ...) is the frame's own
    theirs = [] if ours else [str(c) for c in result_columns(frame.columns)]
    active = None if ours else _own_active_geometry(frame)
    if not ours and "geometry" in frame.columns and \
            getattr(frame, "_geometry_column_name", None) != "geometry":
        theirs.append("geometry")  # a plain column of that name (a GeoDataFrame's other one)
    if (theirs or active) and not overwrite:
        raise ConfigurationError(_replaced(theirs, active))


def _own_active_geometry(frame: pd.DataFrame) -> str | None:
    """The name of a GeoDataFrame's active geometry when it holds shapes (an empty one is
    the result's to fill)."""
    name = getattr(frame, "_geometry_column_name", None)
    if name is not None and name in frame.columns and bool((~frame[name].isna()).any()):
        return str(name)
    return None


def _replaced(theirs: list[str], active: str | None) -> str:
    """The refusal of a frame whose own columns the result would replace, with what to do:
    renaming a GeoDataFrame's active geometry keeps it active, so that one is kept by
    making the frame a plain DataFrame."""
    what = [f"its own {', '.join(theirs)} column(s)"] if theirs else []
    fixes = ["rename them"] if theirs else []
    if active is not None:
        what.append(f"its own geometry {active!r} (the GeoDataFrame's active geometry)")
        plain = "pd.DataFrame(gdf)" if active != "geometry" else \
            "pd.DataFrame(gdf).rename(columns={'geometry': 'shape'})"
        fixes.append(f"pass {plain} to keep it as a plain column")
    return (f"the frame already has {' and '.join(what)}, which the result would replace: "
            f"{', '.join(fixes)}, or pass overwrite_columns=True (--overwrite-columns) to "
            "replace them")


# -- the items to send ---------------------------------------------------------------------


def _free_text_items(values: Iterable[Any]) -> list[Query | str]:
    """One Query (or reason string) per cell; equal strings share one Query."""
    memo: dict[Hashable, Query | str] = {}
    items: list[Query | str] = []
    for value in values:
        if isinstance(value, str):
            item = memo.get(value)
            if item is None:
                item = memo[value] = query_from_value(value)
            items.append(item)
        else:
            items.append(query_from_value(value))
    return items


def _structured_items(frame: pd.DataFrame, columns: Mapping[str, str]) -> list[Query | str]:
    names = list(columns)
    cells = zip(*(frame[c].tolist() for c in columns.values()), strict=True)
    return [query_from_value(dict(zip(names, row, strict=True))) for row in cells]


@dataclass
class Plan:
    """What to send (a Query or a reason per row) and the country each row must lie in."""

    items: list[Query | str]
    country: str | list[Any] | None


def plan(frame: pd.DataFrame, columns: Columns) -> Plan:
    """The items of ``frame`` (the columns are assumed checked)."""
    country_column = columns.country if columns.country in set(frame.columns) else None
    checks: str | list[Any] | None = None
    if columns.country is not None and country_column is None:
        checks = _country_code(frame, columns.country)
    if columns.text is not None:
        items = _free_text_items(frame[columns.text].tolist())
    else:
        fields = dict(columns.structured)
        if country_column is not None:
            fields["country"] = country_column
        items = _structured_items(frame, fields)
    if country_column is not None:
        checks = frame[country_column].tolist()
    return Plan(items, checks)


def _country_code(frame: pd.DataFrame, country: str) -> str:
    """``country`` as a code; neither a code nor a column, an error that names both readings
    (a misspelt column is not told only that it is no ISO code)."""
    if country_code(country) is not None:
        return require_country(country)
    same = [str(c) for c in frame.columns if _loosely(str(c)) == _loosely(str(country))]
    hint = f" (did you mean the column {same[0]!r}?)" if same else ""
    raise ConfigurationError(
        f"country {country!r} is neither an ISO 3166-1 alpha-2 code such as 'LI' or 'FR' nor "
        f"a column of the input{hint}")


# -- running: the stages of a chain -----------------------------------------------------------


@contextlib.contextmanager
def opened(options: GeocodeOptions, *, sends: bool = True) -> Iterator[tuple[Gate, ResultStore | None]]:
    """The run's gate and cache; what this opened is closed on exit (objects passed in stay).

    A run that ``sends`` nothing (every row a reason it cannot be sent) opens neither: no
    connection, no file; it gets a memory gate and no cache.
    """
    if not sends:
        yield open_gate("memory://", clock=options.clock), None
        return
    with contextlib.ExitStack() as stack:
        store = open_store(options.cache, clock=options.clock,
                           no_match_ttl_seconds=options.no_match_ttl_seconds)
        if store is not None and store is not options.cache and hasattr(store, "close"):
            stack.callback(store.close)
        gate = open_gate(options.gate, clock=options.clock)
        if gate is not options.gate:
            stack.callback(gate.close)
        yield gate, store


class _Recorder:
    """A store seen through: remembers the outcomes it answered (cache hits), by identity."""

    def __init__(self, store: ResultStore) -> None:
        self.store, self.blocking = store, store.blocking
        self.hits: list[Outcome] = []

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]:
        found = self.store.get_many(keys)
        self.hits.extend(found.values())
        return found

    def put(self, key: str, outcome: Outcome) -> None:
        self.store.put(key, outcome)


class _LoggingRecorder(_Recorder):
    """A recorder over a store that keeps rows' attempts (``AttemptLog``), passed through."""

    def __init__(self, store: ResultStore) -> None:
        super().__init__(store)
        assert isinstance(store, AttemptLog)
        self.log = store

    def get_attempts(self, keys: Sequence[str]) -> Mapping[str, Attempts]:
        return self.log.get_attempts(keys)

    def put_attempts(self, key: str, attempts: Attempts) -> None:
        self.log.put_attempts(key, attempts)

    def clear_attempts(self, keys: Sequence[str]) -> None:
        self.log.clear_attempts(keys)


def _recorder(store: ResultStore | None) -> _Recorder | None:
    if store is None:
        return None
    return _LoggingRecorder(store) if isinstance(store, AttemptLog) else _Recorder(store)


_RANK = {status: rank for rank, status in enumerate(STATUSES)}  # best first


def refused_point(outcome: Outcome, country: str | None) -> str | None:
    """Why a match's point cannot be the row's point (out of range, Null Island, outside
    ``country``), as the result will say; ``None`` for a usable match or no match."""
    return check_point(outcome.lon, outcome.lat, country) if isinstance(outcome, Match) else None


def _status(outcome: Outcome, country: str | None, minimum: str | None) -> str:
    """The status the row ends with: a match whose point is refused is ``failed``."""
    if refused_point(outcome, country) is not None:
        return "failed"
    return final_status(outcome.status, getattr(outcome, "precision", None), minimum)


def _rank(outcome: Outcome, country: str | None, minimum: str | None) -> tuple[int, int]:
    precision = outcome.precision if isinstance(outcome, Match) else "unknown"
    return _RANK[_status(outcome, country, minimum)], PRECISIONS.index(precision)


class _Stages:
    """A run over the providers of ``options``, stage after stage, on one gate and cache."""

    def __init__(self, items: list[Query | str], options: GeocodeOptions,
                 progress: ProgressSink | None, countries: Sequence[str | None] | None = None
                 ) -> None:
        self.items, self.options = items, options
        self.countries = list(countries) if countries is not None else [None] * len(items)
        self.sink = StageSink(progress, min_precision=options.min_precision,
                                          fallback_on=options.fallback_on) if progress is not None else None
        self.best: list[Outcome | None] = [None] * len(items)
        self.trail: list[list[Outcome]] = [[] for _ in items]
        self.sent = [0] * len(items)
        self.names = stage_names(options.providers)
        self.engines: list[Engine] = []

    async def run(self) -> list[Outcome]:
        try:
            return await self._run()
        except BaseException as exc:
            self._ended_by(exc)
            raise

    def _ended_by(self, exc: BaseException) -> None:
        """Tell the sink how the run ended when no engine did (opening the gate or the cache
        failed, or was interrupted): a panel shown before it would say 'waiting' for ever."""
        if self.sink is None or self.sink.ended:
            return
        interrupted = isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
        secrets = [s for p in self.options.providers for s in p.secrets]
        error = None if interrupted else redact(f"{type(exc).__name__}: {exc}", secrets)
        self.sink.sink(self.sink.finished(self._now(), error=error, interrupted=interrupted))

    async def _run(self) -> list[Outcome]:
        providers = self.options.providers
        pending = list(range(len(self.items)))
        with opened(self.options, sends=not all(isinstance(i, str) for i in self.items)) as (gate, store):
            for stage in range(1, len(providers) + 1):
                if self.sink is not None:
                    self.sink.last = stage == len(providers)
                    if len(providers) > 1:
                        self.sink.sink(StageStarted(stage, len(providers), self.names[stage - 1],
                                                    len(pending), at=self._now()))
                pending = await self._stage(stage, pending, gate, store)
                if not pending:
                    break
            for engine in self.engines:  # the batch ran to its end (see Engine.run)
                await engine.tally.forget()
        if self.sink is not None:
            self.sink.ended = True
            self.sink.sink(self.sink.finished(self._now(), self._counts()))
        return [self._final(i) for i in range(len(self.items))]

    async def _stage(self, stage: int, rows: list[int], gate: Gate,
                     store: ResultStore | None) -> list[int]:
        provider, name = self.options.providers[stage - 1], self.names[stage - 1]
        last = stage == len(self.options.providers)
        recorder = _recorder(store)
        engine = Engine(provider, self.options, gate=gate, store=recorder)
        self.engines.append(engine)
        # Not the last provider: its quota spent or an outage ends its part, not the run.
        hand_off = () if last else (QuotaExceededError, ProviderUnavailableError)
        outcomes = await engine.run([self.items[i] for i in rows], self.sink, hand_off=hand_off,
                                    forget_attempts=False, refused=lambda j, match: refused_point(
                                        match, self.countries[rows[j]]) is not None)
        handed_off = {rows[i] for i in engine.handed_off}
        hits = {id(o) for o in recorder.hits} if recorder is not None else set()
        passing = []
        for i, answer in zip(rows, outcomes, strict=True):
            self.sent[i] += 0 if id(answer) in hits else answer.attempts
            outcome = answer if answer.provider == name else dataclasses.replace(answer, provider=name)
            self.trail[i].append(outcome)
            best, country = self.best[i], self.countries[i]
            minimum = self.options.min_precision
            if best is None or _rank(outcome, country, minimum) < _rank(best, country, minimum):
                self.best[i] = outcome
            status = _status(outcome, country, minimum)  # a refused point is a failure here too
            if i in handed_off or (not last and passes_on(status, outcome.attempts,
                                                          self.options.fallback_on)):
                passing.append(i)
        return passing

    def _final(self, i: int) -> Outcome:
        """The best answer, its attempts the sum over the stages, a dead letter's reason
        naming every provider that was asked."""
        best, trail = self.best[i], self.trail[i]
        assert best is not None
        if len(trail) == 1:
            return best
        attempts = sum(o.attempts for o in trail)
        if isinstance(best, NoMatch | Failure):
            reason = "; ".join(f"{o.provider}: {_why(o, self.countries[i])}" for o in trail)
            return dataclasses.replace(best, reason=reason, attempts=attempts)
        return dataclasses.replace(best, attempts=attempts)

    def others(self) -> list[str | None]:
        """For a row whose best answer is a match of one stage among several: what the other
        providers said (for its reason, should it end a dead letter); else ``None``."""
        said: list[str | None] = []
        for best, trail, country in zip(self.best, self.trail, self.countries, strict=True):
            rest = [o for o in trail if o is not best]
            said.append("; ".join(f"{o.provider}: {_why(o, country)}" for o in rest)
                        if isinstance(best, Match) and rest else None)
        return said

    def _counts(self) -> dict[str, int]:
        counts = dict.fromkeys(_RANK, 0)
        for outcome, country in zip(self.best, self.countries, strict=True):
            if outcome is not None:
                counts[_status(outcome, country, self.options.min_precision)] += 1
        return counts

    def _now(self) -> float:
        return (self.options.clock or SystemClock()).now()


def stage_names(providers: Sequence[Provider]) -> list[str]:
    """How each provider of a chain is named in results: its name, with its host when two
    providers of the chain share a name (two Nominatim instances).

    >>> from geotoolkit.providers import Nominatim, Photon
    >>> ua = "docs-example/1.0 (docs@example.org)"
    >>> stage_names([Nominatim("http://10.0.0.1", user_agent=ua), Nominatim(user_agent=ua)])
    ['nominatim@10.0.0.1', 'nominatim@nominatim.openstreetmap.org']
    >>> stage_names([Photon(), Nominatim(user_agent=ua)])
    ['photon', 'nominatim']

    Two providers of the same name on the same host (one API, two keys: the second takes
    the rows left when the first one's quota runs out) are told apart by their place:

    >>> stage_names([Nominatim(user_agent=ua), Nominatim(user_agent=ua), Photon()])
    ['nominatim@nominatim.openstreetmap.org#1', 'nominatim@nominatim.openstreetmap.org#2', 'photon']
    """
    names = [p.name for p in providers]
    hosted = [f"{p.name}@{p.host}" if names.count(p.name) > 1 else p.name for p in providers]
    return [f"{label}#{hosted[:i].count(label) + 1}" if hosted.count(label) > 1 else label
            for i, label in enumerate(hosted)]


def _why(outcome: Outcome, country: str | None) -> str:
    if isinstance(outcome, Match):
        return refused_point(outcome, country) or f"{outcome.precision} match"
    return outcome.reason


def _with_others(frame: gpd.GeoDataFrame, others: Sequence[str | None]) -> gpd.GeoDataFrame:
    """``frame`` whose dead letters that kept one provider's match (too coarse, or its point
    refused) also say what the other providers of the chain said."""
    if not any(others):
        return frame
    reasons = frame["geocode_reason"].astype(object).to_numpy(copy=True)
    status, provider = frame["geocode_status"].to_numpy(), frame["geocode_provider"].to_numpy()
    for i, said in enumerate(others):
        if said and status[i] != "matched":  # as a no-match's: every provider, in order
            reasons[i] = f"{provider[i]}: {reasons[i]}; {said}"
    frame["geocode_reason"] = pd.Series(reasons, index=frame.index, dtype=frame["geocode_reason"].dtype)
    return frame


async def settle(items: list[Query | str], options: GeocodeOptions,
                 progress: ProgressSink | None = None) -> list[Outcome]:
    """Settle ``items`` (a Query, or a reason string for unusable input, each) in order.

    With a provider chain, each row's best answer over the stages it went through.
    """
    return await _Stages(items, options, progress).run()


class FrameJob:
    """A checked geocoding run over one frame: ``await run()``, then ``result(outcomes)``.

    Building it checks the frame and every provider's usage policy and opens nothing.
    After ``run()``, :attr:`sent` holds the requests each row took in this run (0 for
    an answer from the cache).
    """

    def __init__(self, frame: pd.DataFrame, columns: Columns, options: GeocodeOptions) -> None:
        check_frame(frame, columns, overwrite=options.overwrite_columns)
        for provider in options.providers:
            check_usage_policy(provider, rows=len(frame), gate_backend=gate_backend(options.gate),
                               cached=options.cache is not False, rate=options.rate_policy)
        self.columns, self.options = columns, options
        self._plan = plan(frame, columns)
        # Under copy-on-write a shallow copy is a snapshot: later edits to frame do not leak in.
        self.frame = frame.copy(deep=False)
        self.sent: list[int] = []
        self._others: list[str | None] = []

    @property
    def items(self) -> list[Query | str]:
        """One Query (or the reason it cannot be sent) per row."""
        return self._plan.items

    async def run(self, progress: ProgressSink | None = None) -> list[Outcome]:
        """Settle every row (cached rows are not sent)."""
        countries = row_countries(self._plan.country, len(self._plan.items))
        stages = _Stages(self._plan.items, self.options, progress, countries)
        outcomes = await stages.run()
        self.sent, self._others = stages.sent, stages.others()
        return outcomes

    def result(self, outcomes: list[Outcome]) -> gpd.GeoDataFrame:
        """The validated EPSG:4326 GeoDataFrame for ``outcomes``."""
        from geotoolkit.orchestration.frame import outcomes_frame

        frame = outcomes_frame(self.frame, outcomes, country=self._plan.country,
                               min_precision=self.options.min_precision,
                               full_results=self.options.full_results)
        return _with_others(frame, self._others if len(self._others) == len(frame) else [])

    def run_sync(self, progress: ProgressSink | None = None) -> gpd.GeoDataFrame:
        """Run to the end from synchronous code (also inside Jupyter) and build the result."""
        outcomes = run_sync(lambda: self.run(progress))
        return self.result(outcomes)

