"""Watch the fleet: ``geotoolkit gate status`` on a terminal, ``geotoolkit.fleet_panel`` in a
notebook.

Both show, for every key on a gate (or a provider's keys only), the pace against the
allowed rate, the adaptive factor, throttled answers (429s, 503s) per success over the stats window, a running
pause with its remaining seconds and cause, a fleet stop (a provider said the key's quota
is spent) with its cause and end, the workers active and the sends counted
toward the day's and the month's caps: the data of
:func:`geotoolkit.gate.status.fleet_status`, rendered by
:mod:`geotoolkit.display.fleet_panel`. Neither runs a batch.

The allowed rate is the rate times the adaptive factor. The rate is the one given
(``rate=``, ``--rate``, or a provider instance's own), else one the fleet learned and
kept on the gate, else the provider's published rate (by host); otherwise "unknown".
Gate keys are hashes of the API keys and gate URLs are shown redacted: no secret is
ever printed. ``geotoolkit gate resume`` ends a fleet stop before its time.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from geotoolkit.display.environment import widgets_available
from geotoolkit.display.fleet_text import FleetText, StatusSource, status_text
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import Gate, open_gate
from geotoolkit.gate.sqlite import default_gate_path
from geotoolkit.gate.status import KeyStatus, fleet_status, host_of
from geotoolkit.gate.stop import STOP_VALUE
from geotoolkit.orchestration.options import GATE_URL_ENV
from geotoolkit.periods import check_zone
from geotoolkit.providers import POLICIES, PROVIDERS, get_provider
from geotoolkit.redact import redact
from geotoolkit.urls import backend_of, sqlite_path

if TYPE_CHECKING:
    from geotoolkit.display.fleet_panel import FleetPanel

__all__ = [
    "WATCH_SECONDS",
    "Selection",
    "add_resume_parser",
    "add_status_parser",
    "env_value",
    "fleet_panel",
    "provider_hosts",
    "published_rates",
    "run_resume",
    "run_status",
    "select",
    "status_source",
]

#: Seconds between two refreshes of ``--watch`` without a number.
WATCH_SECONDS = 2.0
#: Every store call of ``gate status`` gives up after this long (an unreachable gate: exit 2).
TIMEOUT_SECONDS = 3.0
#: Names the application when a provider is built only to learn its gate key's host.
_PROBE_AGENT = "geotoolkit-gate-status/1.0 (sends no request)"


# -- which keys, at which rate ------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """Which keys to show (``key``, or the keys of ``hosts``, or all) and the rate given."""

    key: str | None = None
    hosts: frozenset[str] | None = None
    rate: float | None = None
    label: str | None = None
    #: Published rates by host (``published_rates()``), looked up once.
    published: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    #: The time zone of the cap periods shown (an IANA name, checked).
    cap_tz: str = "UTC"


def _key_host(name: str) -> set[str]:
    """The host in the gate key of provider ``name`` at its default address, if it builds."""
    accepted = inspect.signature(PROVIDERS[name]).parameters
    probe = {k: v for k, v in (("user_agent", _PROBE_AGENT), ("api_key", "probe"))
             if k in accepted}
    try:
        provider = get_provider(name, **probe)
    except ConfigurationError:
        return set()
    return {host_of(provider.gate_key)} - {""}


def provider_hosts(name: str) -> frozenset[str]:
    """The hosts of the gate keys a provider's public service uses.

    >>> sorted(provider_hosts("locationiq"))
    ['eu1.locationiq.com', 'locationiq.com', 'us1.locationiq.com']
    """
    policy = POLICIES.get(name)
    return frozenset({*(policy.hosts if policy else ()), *_key_host(name)})


def published_rates() -> dict[str, float]:
    """Every provider's published rate (requests/s) by the hosts of its gate keys."""
    return {host: policy.rate_per_second for name, policy in POLICIES.items()
            if policy.rate_per_second is not None for host in provider_hosts(name)}


def select(provider: object = None, rate: float | None = None, cap_tz: str = "UTC") -> Selection:
    """What ``provider`` selects: ``None`` (every key), a registered name (its public
    service's keys), a host (its keys), or a provider instance (its own key, at its rate);
    cap counts in the periods of ``cap_tz``."""
    return replace(_select(provider, rate), cap_tz=check_zone(cap_tz))


def _select(provider: object, rate: float | None) -> Selection:
    if rate is not None and not (isinstance(rate, int | float) and rate > 0 and rate < float("inf")):
        raise ConfigurationError(f"rate must be a number of requests/s > 0, got {rate!r}")
    published = MappingProxyType(published_rates())
    if provider is None:
        return Selection(rate=rate, published=published)
    if isinstance(provider, str):
        name = provider.strip().lower()
        if name in PROVIDERS:
            return Selection(hosts=provider_hosts(name), rate=rate, label=name, published=published)
        if _is_host(name):
            return Selection(hosts=frozenset({name}), rate=rate, label=name, published=published)
        raise ConfigurationError(f"unknown provider {provider!r}: use one of "
                                 f"{', '.join(sorted(PROVIDERS))}, or a provider host")
    key = getattr(provider, "gate_key", None)
    if not isinstance(key, str):
        raise ConfigurationError(f"provider must be a name, a host or a provider, got "
                                 f"{type(provider).__name__}")
    own = getattr(provider, "default_rate", None)
    return Selection(key=key, rate=rate if rate is not None else own,
                     label=str(getattr(provider, "name", "")) or None, published=published)


def _is_host(text: str) -> bool:
    """``geo.example.org``, ``localhost``, ``127.0.0.1:8080``: a host (and port), no URL.

    >>> _is_host("127.0.0.1:8080"), _is_host("geo.internal"), _is_host("https://x.org/")
    (True, True, False)
    """
    return bool(text) and not any(c in text for c in "/@ \t") and (
        "." in text or ":" in text or text == "localhost")


def _statuses(gate: Gate, selection: Selection) -> list[KeyStatus]:
    return fleet_status(gate, selection.key, hosts=selection.hosts, rate=selection.rate,
                        published=selection.published, tz=selection.cap_tz)


def status_source(gate: Gate, selection: Selection) -> StatusSource:
    """A callable returning the selected keys' status data (what the panel renders)."""
    return lambda: [s.as_dict() for s in _statuses(gate, selection)]


# -- the notebook panel -------------------------------------------------------------------------


def fleet_panel(gate: str | Gate | None = None, provider: object = None,
                refresh_seconds: float = 1.0, *, rate: float | None = None,
                cap_tz: str = "UTC", display: bool = True) -> FleetPanel | FleetText:
    """A live panel of the fleet on every key of ``gate`` (or ``provider``'s), in a notebook.

    Parameters
    ----------
    gate
        The gate URL (``redis://...``, ``postgresql://...``, ``sqlite:///path``) or a
        ``Gate``; ``None``: the default SQLite file, as a run uses. A SQLite file that
        does not exist (no run wrote it yet, or a wrong path) is refused, not created.
    provider
        Only this provider's keys: a registered name (``"opencage"``: its public
        service), a host (a self-hosted instance), or a provider instance (its own
        key, at its own rate).
    refresh_seconds
        Seconds between two refreshes (a background thread; the kernel stays free).
    rate
        The rate the fleet is configured with (requests/s), if the gate's learned
        rate or the provider's published one is not the right one.
    cap_tz
        The time zone of the caps' days and months shown (an IANA name such as
        ``"America/Los_Angeles"``: the zone the fleet's ``Cap(n, tz=...)`` counts in).
    display
        Show the panel (inside a notebook).

    Returns
    -------
    FleetPanel or FleetText
        Inside a notebook, the panel, refreshing until ``stop()`` (or the end of a
        ``with`` block; ``close()`` also removes its widgets). Elsewhere (no ipywidgets
        front end) the fleet is printed once as text and a stopped ``FleetText`` is
        returned.

    Examples
    --------
    >>> import geotoolkit
    >>> from geotoolkit.clock import FakeClock
    >>> from geotoolkit.gate import MemoryGate, Report, gate_key
    >>> gate = MemoryGate(clock=FakeClock(start=1_709_251_200.0))
    >>> key = gate_key("photon.komoot.io")
    >>> gate.reserve(key, 1.0, report=Report(1, 1, 0)).reserved
    True
    >>> _ = gate.record(key, Report(), worker="w1")
    >>> shown = geotoolkit.fleet_panel(gate, provider="photon")   # not in a notebook: text
    gate memory | 1 key | 2024-03-01 00:00:00 UTC
    geotoolkit:photon.komoot.io:anonymous
      pace 1/1 req/s (100% of allowed: 1 req/s x factor 1, published)
      factor 1 | throttled per success 0 (1 success over 1 s) | 1 worker active
      counted toward caps: 0 on 2024-03-01 (UTC day), 0 in 2024-03 (UTC month)
      the day resets at 2024-03-02 00:00 UTC
    >>> shown.stop()
    """
    selection = select(provider, rate, cap_tz)
    given = isinstance(gate, Gate)
    opened = gate if isinstance(gate, Gate) else _open(gate or f"sqlite:///{default_gate_path()}")
    title = redact(gate) if isinstance(gate, str) else opened.backend
    source = status_source(opened, selection)
    close = None if given else opened.close  # a gate we opened is closed by stop()
    if display and widgets_available():
        from geotoolkit.display.fleet_panel import FleetPanel  # ipywidgets: only in a notebook

        return FleetPanel(source, title=title, refresh_seconds=refresh_seconds, on_stop=close)
    return FleetText(source, title=title, on_stop=close)


# -- geotoolkit gate status ---------------------------------------------------------------------


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"seconds must be > 0, got {text!r}")
    return value


def _rate(text: str) -> float:
    try:
        return _seconds(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"a rate must be requests/s > 0, got {text!r}") from None


def _add_gate_keys(cmd: argparse.ArgumentParser) -> None:
    """The arguments naming a gate and which of its keys: ``URL``, ``--gate-env``,
    ``--provider`` (``gate status`` and ``gate resume`` alike)."""
    cmd.add_argument("url", nargs="?", metavar="URL",
                     help="the gate: sqlite:///path, redis://..., postgresql://... (default: "
                          f"--gate-env, else ${GATE_URL_ENV}, else the SQLite file in your "
                          "cache dir)")
    cmd.add_argument("--gate-env", metavar="VAR",
                     help="read the gate URL from this environment variable (keeps a password "
                          "off the command line)")
    cmd.add_argument("--provider", metavar="NAME",
                     help="only the keys of this provider's public service (a name such as "
                          "opencage), or of a host (default: every key)")


def add_status_parser(actions: Any) -> None:
    """Add ``status`` to the ``geotoolkit gate`` sub-commands."""
    cmd = actions.add_parser(
        "status", help="show the fleet on every key of a gate (pace, pauses, workers, caps)",
        description="Show, for every key on a gate, the pace against the allowed rate, the "
                    "adaptive factor, throttled answers (429s, 503s) per success, a running "
                    "pause and its cause, the workers active and the requests counted toward "
                    "daily and monthly caps. "
                    "Keys are hashes of the API keys; the gate URL is shown redacted.")
    _add_gate_keys(cmd)
    cmd.add_argument("--rate", type=_rate, metavar="R",
                     help="the rate the fleet is configured with, in requests/s (default: a "
                          "rate learned on the gate, else the provider's published rate, else "
                          "unknown)")
    cmd.add_argument("--cap-tz", metavar="ZONE", default="UTC",
                     help="the time zone of the caps' days and months shown, an IANA name such "
                          "as America/Los_Angeles: the zone a run's --cap-tz counts in "
                          "(default UTC)")
    cmd.add_argument("--watch", type=_seconds, nargs="?", const=WATCH_SECONDS, metavar="SECONDS",
                     help=f"refresh every SECONDS (default {WATCH_SECONDS:g}) until Ctrl-C: in "
                          "place on a terminal, one block after another otherwise (default: "
                          "show once)")
    cmd.add_argument("--json", action="store_true",
                     help="one JSON document (with --watch: one per line) instead of text")
    cmd.add_argument("--count", type=int, help=argparse.SUPPRESS)  # --watch: stop after N


def add_resume_parser(actions: Any) -> None:
    """Add ``resume`` to the ``geotoolkit gate`` sub-commands: end fleet stops sooner."""
    cmd = actions.add_parser(
        "resume", help="end a fleet stop (a provider said a key's quota is spent) before its time",
        description="End the fleet stop on a gate's keys: after a provider said a key's quota is "
                    "spent (HTTP 402), every worker on the key stops until the reset the provider "
                    "stated, else for an hour. Resume sooner when the quota came back (a plan "
                    "upgraded, a new day). Only the stop ends: pauses, caps and counts stay.")
    _add_gate_keys(cmd)


def run_resume(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """``geotoolkit gate resume``: delete the fleet stop of every selected key; say which."""
    out = out or sys.stdout
    url = _gate_url(args)
    password = _password(url)
    selection = select(args.provider)
    try:
        gate = _open(url)
    except GateError as exc:
        raise ConfigurationError(redact(f"gate {redact(url, [password])} unreachable: {exc}",
                                        [password])) from None
    try:
        ended = [s for s in _statuses(gate, selection)
                 if s.stop_cause and gate.delete_value(s.key, STOP_VALUE)]
    except GateError as exc:
        raise ConfigurationError(redact(str(exc), [password])) from None
    finally:
        gate.close()
    for status in ended:
        out.write(f"ended the fleet stop on {status.key} ({status.stop_cause})\n")
    if not ended:
        out.write("no fleet stop on " + (f"the keys of {selection.label}" if selection.label
                                         else "this gate") + "\n")
    out.flush()
    return 0


#: What an environment variable's name looks like (POSIX); anything else given to a
#: ``--*-env`` flag is most likely the value itself, a key or a URL with a password.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_value(flag: str, var: str, what: str) -> str:
    """The value of the environment variable ``var`` that ``flag`` names, holding ``what``.

    ``ConfigurationError`` when it is not set or empty; a ``var`` that is no variable's
    name (the key or the URL given in its place), or that may be a key (letters and digits
    in mixed or lower case, such as a hex key), is not repeated in the message.

    >>> env_value("--api-key-env", "sk-live-0123-abcd", "the API key")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: --api-key-env takes the name of an environment \
variable (letters, digits and _), not the API key itself; the value given is not shown, \
in case it is a secret
    >>> env_value("--api-key-env", "GEOCODER_KEY_UNSET_HERE", "the API key")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: environment variable GEOCODER_KEY_UNSET_HERE (the API \
key) is not set or empty
    >>> env_value("--api-key-env", "a3f9c1d2e7b4a5f8c6d0e1f2a3b4c5d9", "the API key")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: the environment variable --api-key-env names (the API \
key) is not set or empty
    """
    if not _ENV_NAME.fullmatch(var):
        raise ConfigurationError(f"{flag} takes the name of an environment variable (letters, "
                                 f"digits and _), not {what} itself; the value given is not "
                                 "shown, in case it is a secret")
    value = os.environ.get(var, "").strip()
    if not value:
        # A variable's name is shown as given when it reads as one (upper case, or no digits);
        # a string of letters and digits in mixed or lower case may be a key given in its place.
        named = f"environment variable {var}" if var.isupper() or not any(
            c.isdigit() for c in var) else f"the environment variable {flag} names"
        raise ConfigurationError(f"{named} ({what}) is not set or empty")
    return value


def _gate_url(args: argparse.Namespace) -> str:
    if args.url and args.gate_env:
        raise ConfigurationError("give the gate URL or --gate-env, not both")
    if args.gate_env:
        return env_value("--gate-env", args.gate_env, "the gate URL")
    if args.url:
        return str(args.url)
    return os.environ.get(GATE_URL_ENV, "").strip() or f"sqlite:///{default_gate_path()}"


def _open(url: str) -> Gate:
    """The gate at ``url``, without a local fallback: an unreachable gate is an error."""
    backend = backend_of(url)
    if backend == "sqlite":
        path = Path(sqlite_path(url) or default_gate_path())
        if not path.is_file():
            default = (" (no run on this machine has used the default gate yet: give the URL "
                       "of the gate your runs use)" if path == default_gate_path() else "")
            raise ConfigurationError(f"no gate at {redact(url)}: {path} does not exist{default}")
    elif backend not in ("redis", "postgres", "memory"):
        raise ConfigurationError(f"not a gate URL: {redact(url)} (use sqlite:///path, "
                                 "redis://host:6379/0 or postgresql://...)")
    return open_gate(url, fallback=False, timeout_seconds=TIMEOUT_SECONDS)


@dataclass
class _Screen:
    """Writes each reading: text blocks (in place on a terminal when watching) or JSON."""

    out: TextIO
    url: str
    backend: str
    label: str | None
    json: bool
    in_place: bool

    def document(self, statuses: list[KeyStatus]) -> dict[str, Any]:
        return {"gate": self.url, "backend": self.backend, "provider": self.label,
                "keys": [s.as_dict() for s in statuses]}

    def show(self, statuses: list[KeyStatus], first: bool) -> None:
        if self.json:
            self.out.write(json.dumps(self.document(statuses)) + "\n")
        else:
            clear = "\x1b[H\x1b[2J" if self.in_place else ("" if first else "\n")
            empty = ("no key on this gate has a pacing state yet" if self.label is None else
                     f"no key of {self.label} on this gate has a pacing state yet")
            self.out.write(clear + status_text([s.as_dict() for s in statuses],
                                               header=self.heading(statuses), empty=empty) + "\n")
        self.out.flush()

    def heading(self, statuses: list[KeyStatus]) -> str:
        from datetime import UTC, datetime

        when = max((s.now for s in statuses), default=0.0)
        stamp = datetime.fromtimestamp(when, UTC).strftime(" | %Y-%m-%d %H:%M:%S UTC") if when else ""
        only = f" | provider {self.label}" if self.label else ""
        keys = f"{len(statuses)} key{'s' if len(statuses) != 1 else ''}"
        return f"gate {self.url} ({self.backend}){only} | {keys}{stamp}"


def run_status(args: argparse.Namespace, *, sleep: Callable[[float], None],
               out: TextIO | None = None) -> int:
    """``geotoolkit gate status``: show the fleet once, or every ``--watch`` seconds."""
    out = out or sys.stdout
    url = _gate_url(args)
    password = _password(url)
    shown = redact(url, [password])
    selection = select(args.provider, args.rate, args.cap_tz)
    try:
        gate = _open(url)
    except GateError as exc:  # a SQLite file opens at once: not a database, locked, ...
        raise ConfigurationError(redact(f"gate {shown} unreachable: {exc}", [password])) from None
    screen = _Screen(out, shown, gate.backend, selection.label, args.json,
                     in_place=args.watch is not None and not args.json and out.isatty())
    try:
        return _loop(args, gate, selection, screen, sleep, password)
    finally:
        gate.close()


def _loop(args: argparse.Namespace, gate: Gate, selection: Selection, screen: _Screen,
          sleep: Callable[[float], None], password: str | None) -> int:
    shown = rounds = 0
    try:
        while True:
            rounds += 1
            try:
                statuses = _statuses(gate, selection)
            except GateError as exc:
                message = redact(f"gate {screen.url} unreachable: {exc}", [password])
                if shown == 0:  # nothing to watch: a bad or unreachable gate
                    raise ConfigurationError(message) from None
                print(f"geotoolkit: {message} (retrying)", file=sys.stderr)
            else:
                screen.show(statuses, first=shown == 0)
                shown += 1
            if args.watch is None or (args.count is not None and rounds >= args.count):
                return 0
            sleep(args.watch)
    except KeyboardInterrupt:
        return 0


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None
