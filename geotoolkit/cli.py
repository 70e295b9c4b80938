"""The command line: ``geotoolkit geocode``, ``geotoolkit demo``, ``geotoolkit gate init``.

Jobs go through the ``df.geocode`` accessor, so they get its cache and resume:
rerunning a job (or running it again after it was killed) sends only the rows
that are not settled yet. Environment variables are read here (the API key, by the name given in
``--api-key-env``), never deeper in the package. The key never appears on the
command line, in output or in files.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pandas as pd

from geotoolkit import accessor as _accessor  # noqa: F401  (registers df.geocode)
from geotoolkit.errors import ConfigurationError, GeotoolkitError, RateLimitError
from geotoolkit.export import write_results
from geotoolkit.progress import Event, ProgressSink, Tally
from geotoolkit.providers import PROVIDERS, Provider, get_provider
from geotoolkit.providers.nominatim import PUBLIC_NOMINATIM, Nominatim
from geotoolkit.render import JsonLinesProgress, TextProgress, summary_line

__all__ = ["main"]

EX_TEMPFAIL = 75  # sysexits.h: try again later


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="geotoolkit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("geocode", "geocode a CSV column into a GeoPackage"),
                            ("demo", "the same job offline, against the built-in simulator")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("input", type=Path, help="CSV file with an address column")
        cmd.add_argument("-o", "--output", type=Path, required=True,
                         help="output: .gpkg, .parquet or .geoparquet")
        cmd.add_argument("--column", default="address", help="address column (default: address)")
        cmd.add_argument("--rate", type=float, help="requests/s for the whole fleet on this key")
        cmd.add_argument("--gate", help="gate URL (default: the SQLite file in your cache dir)")
        cmd.add_argument("--concurrency", type=int, default=4)
        cmd.add_argument("--max-wait-seconds", type=float,
                         help="non-blocking: exit 75 instead of waiting longer than this")
        cmd.add_argument("--progress", choices=("auto", "text", "json", "none"), default="auto")
        cmd.add_argument("--country", metavar="CC",
                         help="flag points outside this country (ISO alpha-2 code, or a column of codes)")
    geo = sub.choices["geocode"]
    geo.add_argument("--provider", default="nominatim", choices=sorted(PROVIDERS),
                     help="geocoding service (default: nominatim)")
    geo.add_argument("--user-agent", help="identifies your application (required by Nominatim)")
    geo.add_argument("--base-url", help=f"another instance (default for nominatim: {PUBLIC_NOMINATIM})")
    geo.add_argument("--api-key-env", metavar="VAR",
                     help="name of the environment variable holding the API key")
    geo.add_argument("--cache", metavar="URL|none",
                     help="result cache: sqlite:///path, postgresql://..., memory:// or none "
                          "(default: the SQLite file in your cache dir)")
    demo = sub.choices["demo"]
    demo.add_argument("--cache", metavar="URL|none", default="none",
                      help="result cache (default none: the simulator's answers are not kept)")
    demo.add_argument("--limit", type=float, default=2.0,
                      help="the simulator's own rate limit, requests/s (default 2)")
    gate = sub.add_parser("gate", help="manage a shared gate").add_subparsers(
        dest="gate_command", required=True)
    gate.add_parser("init", help="create the gate's tables (PostgreSQL)").add_argument("url")
    return parser


def _progress(choice: str) -> tuple[ProgressSink, Tally]:
    tally = Tally()
    renderer: ProgressSink | None = None
    if choice == "json":
        renderer = JsonLinesProgress()
    elif choice == "text" or (choice == "auto" and sys.stderr.isatty()):
        renderer = TextProgress()

    def sink(event: Event) -> None:
        tally.update(event)
        if renderer is not None:
            renderer(event)

    return sink, tally


def _read_csv(path: Path, column: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype=str)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc
    if column not in frame.columns:
        raise ConfigurationError(
            f"{path} has no column {column!r}; available: {', '.join(map(str, frame.columns))}")
    return frame


def _api_key(var: str | None) -> str | None:
    if var is None:
        return None
    value = os.environ.get(var)
    if not value:
        raise ConfigurationError(f"environment variable {var} is not set or empty")
    return value


def _run_job(args: argparse.Namespace, provider: Provider) -> int:
    frame = _read_csv(args.input, args.column)
    sink, tally = _progress(args.progress)
    try:
        result = frame.geocode.run(
            args.column, provider=provider, gate=args.gate, rate=args.rate,
            concurrency=args.concurrency, cache=args.cache, progress=sink,
            max_wait_seconds=args.max_wait_seconds, country=args.country)
    except RateLimitError as exc:
        if exc.retry_after is None:
            raise
        print(f"retry_after={exc.retry_after:.1f}", file=sys.stderr)
        return EX_TEMPFAIL
    geocoded, letters = write_results(result, args.output)
    flagged = tally.matched - geocoded  # matches whose coordinates failed validation
    note = f", {flagged} flagged by validation" if flagged > 0 else ""
    print(f"{summary_line(tally)} -> {args.output} (geocoded: {geocoded}, dead_letters: {letters}"
          f"{note})")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from geotoolkit.testing import ProviderSimulator

    with ExitStack() as stack:
        sim = stack.enter_context(ProviderSimulator(rate_limit=args.limit))
        print(f"simulator at {sim.url}, limited to {args.limit:g} requests/s per key",
              file=sys.stderr)
        provider = Nominatim(sim.url, user_agent="geotoolkit-demo/0.1")
        if args.rate is None:
            args.rate = args.limit
        return _run_job(args, provider)


def _gate_init(url: str) -> int:
    if url.split(":", 1)[0] not in ("postgresql", "postgres"):
        print(f"nothing to initialise for {url.split(':', 1)[0]}: created on first use")
        return 0
    from geotoolkit.gate.postgres import init_schema

    init_schema(url)
    print("gate tables ready")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``geotoolkit`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ConfigurationError as exc:
        print(f"geotoolkit: {exc}", file=sys.stderr)
        return 2
    except GeotoolkitError as exc:
        print(f"geotoolkit: stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _dispatch(args: Any) -> int:
    if args.command == "demo":
        return _demo(args)
    if args.command == "gate":
        return _gate_init(args.url)
    provider = get_provider(args.provider, base_url=args.base_url, user_agent=args.user_agent,
                            api_key=_api_key(args.api_key_env))
    return _run_job(args, provider)
