"""The command line: ``geotoolkit geocode``, ``geotoolkit reverse``, ``geotoolkit demo``,
``geotoolkit gate init``, ``geotoolkit gate status``, ``geotoolkit gate resume`` (see
``frontends.fleet_watch``).

``--provider census,nominatim`` runs a fallback chain (one ``--user-agent`` for all,
``--base-url NAME=URL`` per provider; an API key from ``--api-key-env`` only for a
single provider). ``geotoolkit geocode out.gpkg --only-dead-letters -o next.gpkg``
is the review loop: it geocodes only the (possibly corrected) dead letters of an
earlier output and writes the whole merged result. ``geotoolkit reverse points.gpkg -o
addresses.gpkg`` turns points (any vector file GDAL reads, GeoParquet, or a CSV with
``--lon``/``--lat`` columns named explicitly, in ``--crs``) into the addresses there,
with the same provider, gate, cache and run options.

A thin front end: the flags become one GeocodeOptions (the flags of its options are
generated from the options' own documentation), the CSV one FrameJob. Everything is
checked before anything is sent: the column (with a hint when only the case differs),
the options, what the output file could not hold. Environment variables are read
here (the API key by the name given in ``--api-key-env``; gate and cache URLs by
``--gate-env``/``--cache-env`` or ``GEOTOOLKIT_GATE_URL``/``GEOTOOLKIT_CACHE_URL``),
never deeper in the package. The key never appears on the command line, in output or
in files.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geotoolkit import __version__
from geotoolkit.display.model import summary_line
from geotoolkit.display.sinks import progress_sink
from geotoolkit.errors import ConfigurationError, ExportError, GeotoolkitError, RateLimitError
from geotoolkit.export import FORMATS, check_exportable, read_results, write_results
from geotoolkit.frontends.fleet_watch import (
    add_resume_parser,
    add_status_parser,
    env_value,
    run_resume,
    run_status,
)
from geotoolkit.gate.base import Cap
from geotoolkit.gate.fallback import GateUnavailableWarning
from geotoolkit.orchestration.frame import retry
from geotoolkit.orchestration.job import Columns, FrameJob
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.orchestration.reverse_input import read_csv_text, reverse_job_from_file
from geotoolkit.progress import Event, ProgressSink, Tally
from geotoolkit.providers import PROVIDERS, get_provider
from geotoolkit.providers.nominatim import PUBLIC_NOMINATIM
from geotoolkit.redact import redact
from geotoolkit.results import REVERSE_DECIMALS
from geotoolkit.urls import backend_of, check_userinfo, client_of

if TYPE_CHECKING:
    import geopandas as gpd

__all__ = ["EX_TEMPFAIL", "EX_TERMINATED", "OPTION_FLAGS", "main"]

EX_TEMPFAIL = 75  # sysexits.h: try again later
EX_TERMINATED = 128 + signal.SIGTERM  # what a shell reports for a run that SIGTERM ended

DESCRIPTION = """\
Rate-aware, fleet-polite batch geocoding: a CSV of addresses in, a GeoPackage
(or GeoParquet) out, with every worker on one API key paced by a shared gate."""

EPILOG = """\
examples:
  geotoolkit demo addresses.csv -o out.gpkg
  geotoolkit geocode addresses.csv -o out.gpkg --user-agent "my-app/1.0 (me@example.org)"
  geotoolkit geocode addresses.csv -o out.gpkg --provider census,nominatim \\
      --user-agent "my-app/1.0 (me@example.org)" --min-precision street
  geotoolkit geocode out.gpkg --only-dead-letters -o next.gpkg --user-agent "..."
  geotoolkit reverse fixes.gpkg -o addresses.gpkg --user-agent "my-app/1.0 (me@example.org)"
  geotoolkit reverse fixes.csv --lon x --lat y --crs EPSG:2056 -o addresses.gpkg --user-agent "..."
  GEOCODER_KEY=... geotoolkit geocode in.csv -o out.gpkg --provider opencage \\
      --api-key-env GEOCODER_KEY --gate redis://gate.internal:6379/0
  geotoolkit gate status redis://gate.internal:6379/0 --provider opencage --watch

exit status: 0 done, 1 stopped (authentication, quota, ...), 2 bad arguments,
75 non-blocking mode asked to retry later (retry_after=<seconds> on stderr), 130 interrupted
(Ctrl-C), 143 terminated (SIGTERM); finished rows are in the cache: a rerun resumes."""

#: Options whose flags are written by hand (the rest come from GeocodeOptions).
_SPECIAL = {"provider", "api_key", "gate", "cache"}


def _option_fields() -> list[dataclasses.Field[Any]]:
    every = GeocodeOptions.__dataclass_fields__.values()  # InitVars too
    return [f for f in every if f.metadata.get("cli") is not None and f.name not in _SPECIAL]


#: The GeocodeOptions fields that have a generated flag, by name.
OPTION_FLAGS = tuple(f.name for f in _option_fields())


#: Help for the flags whose option doc speaks of Python (a ``Cap``, an exception raised).
_CLI_HELP = {
    "cap": "At most N requests a day on the key, for the whole fleet, the day starting at "
           "midnight in --cap-tz (default UTC); reaching it stops the run (exit 1) and says "
           "when it resets; default: no cap.",
    "max_wait_seconds": "Non-blocking mode: instead of waiting longer than S seconds, exit 75 "
                        "with retry_after=<seconds> on stderr (finished rows are in the cache); "
                        "default: wait as long as asked.",
}


def _help(f: dataclasses.Field[Any]) -> str:
    text: str = _CLI_HELP.get(f.name, f.metadata["doc"])
    flag = isinstance(f.default, bool)  # an on/off flag: off unless given, no default to say
    if not flag and "default" not in text and f.default not in (None, dataclasses.MISSING):
        text += f" (default {f.default:g})" if isinstance(f.default, float) else \
            f" (default {f.default})"
    return text.replace("%", "%%")


def _add_options(cmd: argparse.ArgumentParser) -> None:
    group = cmd.add_argument_group("run options")
    for f in _option_fields():
        group.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None,
                           help=_help(f), **f.metadata["cli"])
    group.add_argument("--cap-tz", metavar="ZONE",
                       help="the time zone whose midnight starts --cap's day, an IANA name: "
                            "where the provider's quota resets, e.g. America/Los_Angeles for "
                            "Google Maps Platform (default UTC)")


def _add_common(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("input", type=Path,
                     help="CSV file with an address column (with --only-dead-letters: an earlier "
                          "output, .gpkg or .parquet)")
    cmd.add_argument("--only-dead-letters", action="store_true",
                     help="geocode only the dead letters of INPUT, an earlier output (edit its "
                          "dead_letters layer first, e.g. in QGIS), and write the whole merged "
                          "result to --output (the file keeps no earlier address to compare "
                          "with: geocode_fixed is not set here, geocode_attempts adds up)")
    _add_output(cmd)
    cmd.add_argument("--column", default="address",
                     help="the column holding the addresses (default: address)")
    cmd.add_argument("--country", metavar="CC",
                     help="flag points outside this country: an ISO alpha-2 code, or the name "
                          "of a column of codes (default: no check)")
    _add_run(cmd)


def _add_output(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("-o", "--output", type=Path, required=True,
                     help="output file: .gpkg (layers geocoded and dead_letters), .parquet or "
                          ".geoparquet; an existing file is replaced whole, other layers and "
                          "all, once the run has ended (never appended to; a run that stops "
                          "leaves it as it was)")


def _add_run(cmd: argparse.ArgumentParser) -> None:
    """--progress, the gate and cache environment flags, and the generated run options."""
    cmd.add_argument("--progress", choices=("auto", "text", "json", "none"), default="auto",
                     help="auto (default): a live line when stderr is a terminal, nothing "
                          "otherwise; text: the line even when stderr is a file or CI log (a "
                          "plain line every 10 s); json: one JSON object per event on stderr; "
                          "none: nothing (the summary still ends the run on stdout)")
    stores = cmd.add_argument_group("gate and cache")
    stores.add_argument("--gate", metavar="URL",
                        help="the fleet gate: sqlite:///path, redis://..., postgresql://..., "
                             "memory:// (default: $GEOTOOLKIT_GATE_URL, else a SQLite file in "
                             "your cache dir)")
    stores.add_argument("--gate-env", metavar="VAR",
                        help="read the gate URL from this environment variable (keeps a "
                             "password off the command line)")
    stores.add_argument("--cache-env", metavar="VAR",
                        help="read the cache URL from this environment variable")
    _add_options(cmd)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="geotoolkit", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"geotoolkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    geo = sub.add_parser("geocode", help="geocode a CSV column into a GeoPackage",
                         description="Geocode the addresses of a CSV file into a GeoPackage.")
    _add_provider(geo)
    _add_common(geo)
    _add_reverse(sub)
    demo = sub.add_parser("demo", help="the same job offline, against the built-in simulator",
                          description="Geocode a CSV offline against the built-in provider "
                                      "simulator (a real HTTP server on 127.0.0.1).")
    demo.add_argument("--cache", metavar="URL|none",
                      help="result cache (default: none; the simulator's answers are not kept)")
    demo.add_argument("--limit", type=float, default=2.0,
                      help="the simulator's own rate limit in requests/s (default 2)")
    _add_common(demo)
    gate = sub.add_parser("gate", help="manage a shared gate",
                          description="Manage a shared gate.").add_subparsers(
        dest="gate_command", required=True, metavar="ACTION")
    init = gate.add_parser("init", help="create the gate's tables (PostgreSQL)",
                           description="Create the gate's tables ahead of time (PostgreSQL).")
    init.add_argument("url", help="the gate URL")
    add_status_parser(gate)
    add_resume_parser(gate)
    return parser


def _add_provider(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--provider", default="nominatim", type=_chain, metavar="NAME[,NAME...]",
                     help="the geocoding service (default: nominatim), or a fallback chain such as "
                          "census,nominatim: rows the first leaves (see --fallback-on) go to the "
                          f"next, each at its own rate; one of {', '.join(sorted(PROVIDERS))}")
    cmd.add_argument("--user-agent", help="names your application and a contact (required by "
                                          "Nominatim; default: geotoolkit/<version> elsewhere); "
                                          "with a chain, for every provider")
    cmd.add_argument("--base-url", metavar="URL|NAME=URL", action="append",
                     help=f"a self-hosted or compatible instance (default for nominatim: "
                          f"{PUBLIC_NOMINATIM}); with a chain, NAME=URL, once per provider")
    cmd.add_argument("--api-key-env", metavar="VAR",
                     help="name of the environment variable holding the API key (default: none); "
                          "a single provider only: give keyed providers of a chain in Python")
    cmd.add_argument("--fallback-on", metavar="STATUS[,STATUS...]", type=_statuses,
                     help="with a chain: which rows go on to the next provider, of no_match, "
                          "too_coarse, failed (default: no_match,too_coarse)")
    cmd.add_argument("--cache", metavar="URL|none",
                     help="settled rows persist here, so a rerun sends only the rest: "
                          "sqlite:///path, postgresql://..., memory:// or none (default: "
                          "$GEOTOOLKIT_CACHE_URL, else a SQLite file in your cache dir)")


def _add_reverse(sub: Any) -> None:
    rev = sub.add_parser(
        "reverse", help="reverse geocode points into the addresses there",
        description="Reverse geocode the points of a file (GeoPackage, any vector file GDAL "
                    "reads, GeoParquet, or a CSV with --lon/--lat) into a GeoPackage: each "
                    "row gets the address found at its point and how far away that is "
                    "(geocode_distance_m); the geometry stays the input point, in EPSG:4326.")
    rev.add_argument("input", type=Path,
                     help="the points: a vector file (.gpkg, .geojson, .shp, ...), .parquet, or "
                          "a CSV (.csv, .tsv, .txt) with --lon and --lat")
    _add_output(rev)
    where = rev.add_argument_group("where the points are")
    where.add_argument("--lon", metavar="COLUMN",
                       help="CSV: the column of longitudes (or eastings in --crs); required, "
                            "never guessed")
    where.add_argument("--lat", metavar="COLUMN",
                       help="CSV: the column of latitudes (or northings in --crs); required")
    where.add_argument("--crs", metavar="CRS",
                       help="CSV: the CRS of --lon/--lat (default EPSG:4326); a vector file "
                            "without a CRS: its CRS")
    where.add_argument("--layer", help="the layer of a file with several")
    where.add_argument("--country", metavar="CC",
                       help="an ISO alpha-2 code: a point outside that country is a dead letter, "
                            "never sent, and says so when its lat and lon look swapped "
                            "(default: no check)")
    where.add_argument("--decimals", type=int, default=REVERSE_DECIMALS,
                       help="points are sent and cached rounded to this many decimals of a "
                            f"degree (default {REVERSE_DECIMALS}, about 0.1 m; 4 is about 10 m)")
    _add_provider(rev)
    _add_run(rev)


def _chain(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROVIDERS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown provider {(unknown or [text])[0]!r}: use {', '.join(sorted(PROVIDERS))}")
    return names


def _statuses(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _providers(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The provider argument and the naming options: one name, or a chain of instances."""
    names: list[str] = args.provider
    urls: list[str] = args.base_url or []
    if len(names) == 1:
        if len(urls) > 1 or any("=" in u.split("://", 1)[0] for u in urls):
            raise ConfigurationError("--base-url takes one URL for a single provider")
        return names[0], {"api_key": _env("--api-key-env", args.api_key_env, "the API key"),
                          "user_agent": args.user_agent, "base_url": urls[0] if urls else None}
    if args.api_key_env:
        raise ConfigurationError("--api-key-env works with a single --provider only: a key must "
                                 "never reach the wrong provider; build a keyed chain in Python")
    by_name = dict(_named_url(u, names) for u in urls)
    return [get_provider(n, user_agent=args.user_agent, base_url=by_name.get(n)) for n in names], {}


def _named_url(text: str, names: list[str]) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or name.strip().lower() not in names:
        raise ConfigurationError(f"with a chain, give --base-url as NAME=URL for one of "
                                 f"{', '.join(names)}, got {text!r}")
    return name.strip().lower(), url.strip()


def _env(flag: str, var: str | None, what: str) -> str | None:
    return None if var is None else env_value(flag, var, what)


def _options(args: argparse.Namespace, provider: Any, **given: Any) -> GeocodeOptions:
    """One GeocodeOptions from the flags (absent flags keep the options' defaults)."""
    flags = {name: getattr(args, name) for name in OPTION_FLAGS if getattr(args, name, None) is not None}
    if getattr(args, "fallback_on", None):
        flags["fallback_on"] = args.fallback_on
    if getattr(args, "cap_tz", None) is not None:
        if "cap" not in flags:
            raise ConfigurationError("--cap-tz is the zone of --cap's day: give --cap N too")
        flags["cap"] = Cap(flags["cap"], tz=args.cap_tz)
    for flag, value, env_flag, env in (("--gate", args.gate, "--gate-env", args.gate_env),
                                       ("--cache", args.cache, "--cache-env", args.cache_env)):
        if value is not None and env:
            raise ConfigurationError(f"give {flag} or {env_flag}, not both")
    gate = args.gate if args.gate is not None else _env("--gate-env", args.gate_env, "the gate URL")
    cache = _env("--cache-env", args.cache_env, "the cache URL") if args.cache_env else args.cache
    return GeocodeOptions.from_env(provider=provider, gate=gate, cache=cache, **{**flags, **given})


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _progress(choice: str) -> tuple[ProgressSink, Tally]:
    tally = Tally()
    # On a terminal the result line (stdout) is the summary: the progress line, on the
    # same screen, is cleared at the end instead of saying it all again.
    renderer = progress_sink(choice, summary=not _isatty(sys.stdout))

    def sink(event: Event) -> None:
        tally.update(event)
        if renderer is not None:
            renderer(event)

    return sink, tally


def _run_job(args: argparse.Namespace, options: GeocodeOptions, *, announce: str = "") -> int:
    """Check the input and the output, then run (``announce``, if any, goes to stderr
    between the two: the demo's simulator, once the arguments are known to be good)."""
    columns = Columns.from_arguments(args.column, country=args.country)
    sink, tally = _progress(args.progress)
    job, previous = None, None
    if args.only_dead_letters:
        with _input_file():
            previous = read_results(args.input)
        check_exportable(previous, args.output)
    else:
        _require_csv(args.input)
        job = FrameJob(read_csv_text(args.input), columns, options)
        check_exportable(job.frame, args.output)  # before anything is sent
    if announce:
        print(announce, file=sys.stderr)
    result = _unless_deferred(lambda: job.run_sync(sink) if job is not None else retry(
        previous, None, columns, options, sink), options)
    if result is None:
        return EX_TEMPFAIL
    geocoded, letters = write_results(result, args.output)
    if args.only_dead_letters:
        print(f"{summary_line(tally)} (the dead letters of {args.input}) -> {args.output} "
              f"(geocoded: {geocoded}, dead_letters: {letters})")
        return 0
    _report(tally, args.output, geocoded, letters, _flagged(result))
    return 0


def _require_csv(path: Path) -> None:
    """Refuse an earlier output given as the CSV (it was read as text, "not UTF-8")."""
    if path.suffix.lower() in FORMATS:
        raise ConfigurationError(
            f"{path} is a {FORMATS[path.suffix.lower()]} file, and geocode reads a CSV; to "
            "geocode the dead letters of an earlier output, add --only-dead-letters")


def _flagged(result: gpd.GeoDataFrame) -> int:
    """Answers whose coordinates failed validation: failed rows with a precision."""
    return int(((result["geocode_status"] == "failed") & result["geocode_precision"].notna()).sum())


def _report(tally: Tally, output: Path, geocoded: int, letters: int, flagged: int) -> None:
    note = f", {flagged} flagged by validation" if flagged > 0 else ""
    print(f"{summary_line(tally)} -> {output} (geocoded: {geocoded}, dead_letters: {letters}"
          f"{note})")


def _unless_deferred(run: Callable[[], gpd.GeoDataFrame],
                     options: GeocodeOptions) -> gpd.GeoDataFrame | None:
    """The result of ``run()``; ``None`` when non-blocking mode asked to retry later: stderr
    says why and what to do, then ends with ``retry_after=<seconds>`` (the line scripts read),
    rounded up to the tenth: a wrapper that waits that long finds the wait over, not a few
    milliseconds short."""
    try:
        return run()
    except RateLimitError as exc:
        if exc.retry_after is None:
            raise
        cache = options.cache
        name = cache.strip().lower() if isinstance(cache, str) else ""
        kept = cache is not False and name != "none" and not name.startswith("memory:")
        rows = ("the rows finished so far are kept in the cache and not sent again" if kept else
                "without a lasting cache, the rows finished so far are sent again")
        after = exc.retry_after
        after = math.ceil(after * 10) / 10 if math.isfinite(after) else after
        print(f"geotoolkit: deferred, not failed: {exc}. Run the same command again in "
              f"{after:.1f} s or later ({rows}).", file=sys.stderr)
        print(f"retry_after={after:.1f}", file=sys.stderr)
        return None


def _reverse(args: argparse.Namespace, options: GeocodeOptions) -> int:
    if args.input.resolve() == args.output.resolve():
        raise ConfigurationError(f"--output {args.output} would overwrite the input")
    with _input_file():
        job = reverse_job_from_file(args.input, options, lon=args.lon, lat=args.lat,
                                    crs=args.crs, layer=args.layer, decimals=args.decimals,
                                    country=args.country)
    check_exportable(job.frame, args.output, reverse=True)  # before anything is sent
    sink, tally = _progress(args.progress)
    result = _unless_deferred(lambda: job.run_sync(sink), options)
    if result is None:
        return EX_TEMPFAIL
    geocoded, letters = write_results(result, args.output)
    _report(tally, args.output, geocoded, letters, _flagged(result))
    return 0


@contextlib.contextmanager
def _input_file() -> Iterator[None]:
    """An input file that cannot be read is a bad argument (exit 2, as a bad CSV is), not a
    run that stopped."""
    try:
        yield
    except ExportError as exc:
        raise ConfigurationError(str(exc)) from exc


def _demo(args: argparse.Namespace) -> int:
    from geotoolkit.providers.nominatim import Nominatim
    from geotoolkit.testing import ProviderSimulator

    with ProviderSimulator(rate_limit=args.limit) as sim:
        provider = Nominatim(sim.url, user_agent="geotoolkit-demo/0.1")
        rate = args.rate if args.rate is not None else args.limit
        if args.cache is None and not args.cache_env:
            args.cache = "none"
        return _run_job(args, _options(args, provider, rate=rate), announce=(
            f"simulator at {sim.url}, limited to {args.limit:g} requests/s per key"))


def _gate_init(url: str) -> int:
    backend = backend_of(url)
    if backend is None:  # a key=value DSN, another database: shown redacted, as every URL
        raise ConfigurationError(f"not a gate URL: {redact(url)} (use postgresql://...; "
                                 "sqlite:///path, redis://... and memory:// need no init)")
    check_userinfo(url, "gate")
    if backend != "postgres":
        print(f"nothing to initialise for {backend}: created on first use")
        return 0
    with client_of(backend, "PostgreSQL gate"):
        from geotoolkit.gate.postgres import init_schema

    init_schema(url)
    print("gate tables ready")
    return 0


def main(argv: Sequence[str] | None = None, *, sleep: Callable[[float], None] = time.sleep) -> int:
    """Entry point of the ``geotoolkit`` command; returns the exit status.

    ``sleep`` is how ``gate status --watch`` waits between refreshes (tests inject one).
    """
    parser = _parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unrecognized(parser, args, extras)
    terminated: list[int] = []
    try:
        with warnings.catch_warnings(), _sigterm_as_interrupt(terminated):
            # its log line says it (logging's last resort prints warnings to stderr)
            warnings.simplefilter("ignore", GateUnavailableWarning)
            return _dispatch(args, sleep)
    except KeyboardInterrupt:
        print("terminated" if terminated else "interrupted", file=sys.stderr)
        return EX_TERMINATED if terminated else 130
    except asyncio.CancelledError:
        if not terminated:
            raise
        print("terminated", file=sys.stderr)  # see _cancel_batch
        return EX_TERMINATED
    except (ConfigurationError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"geotoolkit: {message}", file=sys.stderr)
        return 2
    except GeotoolkitError as exc:
        print(f"geotoolkit: stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace,
                  extras: list[str]) -> None:
    """argparse's "unrecognized arguments" error, from the command's own parser (its usage),
    naming the nearest flag for a misspelt one: ``--concurency`` -> ``--concurrency``."""
    import difflib

    for dest in ("command", "gate_command"):
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        sub = actions[0].choices.get(str(getattr(args, dest, ""))) if actions else None
        if sub is None:
            break
        parser = sub
    flags = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    hints = []
    for flag in (e.split("=", 1)[0] for e in extras if e.startswith("--")):
        close = difflib.get_close_matches(flag, flags, n=1)
        hints += [f"{flag} (did you mean {close[0]}?)"] if close else []
    parser.error(f"unrecognized arguments: {' '.join(extras)}"
                 + (f"; {', '.join(hints)}" if hints else ""))


@contextlib.contextmanager
def _sigterm_as_interrupt(received: list[int]) -> Iterator[None]:
    """While the command runs, SIGTERM (a scheduler stopping the job, ``kill``, systemd)
    stops it the way Ctrl-C does: the batch is cancelled, finished rows stay in the
    cache, no half-written output is left. Python's default would end the process
    on the spot, mid-write, without a word. The signal is noted in ``received``."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        received.append(signum)
        interrupt = signal.getsignal(signal.SIGINT)  # asyncio.run's own while a batch runs
        if callable(interrupt):
            interrupt(signal.SIGINT, frame)
        else:  # SIGINT ignored (started in a script's background, nohup): no asyncio handler
            _cancel_batch()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cancel_batch() -> None:
    """Cancel the running batch as asyncio.run's SIGINT handler does (its tasks end, the
    loop wakes, ``asyncio.run`` raises CancelledError), or raise KeyboardInterrupt where no
    loop runs: raised inside the loop, it left a 'Task exception was never retrieved'."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon_threadsafe(lambda: None)


def _dispatch(args: argparse.Namespace, sleep: Callable[[float], None]) -> int:
    if args.command == "demo":
        return _demo(args)
    if args.command == "gate":
        if args.gate_command == "status":
            return run_status(args, sleep=sleep)
        return run_resume(args) if args.gate_command == "resume" else _gate_init(args.url)
    provider, naming = _providers(args)
    if args.command == "reverse":
        return _reverse(args, _options(args, provider, **naming))
    return _run_job(args, _options(args, provider, **naming))
