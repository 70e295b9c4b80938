"""A plain pacing loop on one key, without geotoolkit: the reference pacer and the other client.

``python -m fleetbench.loop ARGS.json`` sends Nominatim-style searches with httpx at
exactly ``rate`` requests per second, on a ``time.monotonic`` schedule
(``t0 + i / rate``; a late request does not make the next one early). It does not
read ``Retry-After`` and publishes nothing: a 429 is counted and its row is sent again
at the next slot.

- The **reference pacer** (``rows`` > 0) stops after ``rows`` successes (or three
  times as many attempts): the best a single, gate-free process can do at exactly the
  limit, measured against the same limiter in the same run as the fleet.
- The **other client** (``rows`` = 0) runs until it is terminated (SIGTERM), or for
  ``seconds``: an uncoordinated program taking its share of the same key.
- One of an **ideal fleet** (``stride`` > 1, ``benchmarks/ideal_fleet.py``): ``stride``
  loops share one schedule at ``rate``, each sending every ``stride``-th slot from
  ``slot`` on, all from one ``start_at`` (a ``time.monotonic`` instant, shared by every
  process of the machine): what a fleet that knew the limit and needed no gate would do.

Both open their connection before the schedule starts (a ``/status`` request, which is
neither keyed nor limited), so their first request is not late.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import httpx

__all__ = ["LoopArgs", "run_loop"]


@dataclass
class LoopArgs:
    url: str
    api_key: str
    rate: float
    prefix: str  #: the address text, e.g. "Reference road" (tells the senders apart in logs)
    rows: int = 0  #: successes to reach; 0: until terminated
    niceness: int = 0
    seconds: float = 0.0  #: stop once this long after the schedule starts; 0: no deadline
    slot: int = 0  #: this loop's first slot of the schedule
    stride: int = 1  #: every ``stride``-th slot of the schedule at ``rate`` is this loop's
    start_at: float = 0.0  #: the schedule's start, a ``time.monotonic`` instant (0: at once)


class _Stop(Exception):
    pass


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def run_loop(args: LoopArgs) -> tuple[int, int]:
    """Send on the schedule; returns ``(successes, sent)``."""
    ok = sent = row = 0
    limit = 3 * args.rows if args.rows else None
    with httpx.Client(timeout=20.0, headers={"user-agent": "plain-loop/1.0"}) as client:
        client.get(f"{args.url}/status")
        start = args.start_at or time.monotonic()
        try:
            while (not args.rows or ok < args.rows) and (limit is None or sent < limit):
                at = (args.slot + sent * args.stride) / args.rate  # this send's slot
                if args.seconds and at >= args.seconds:
                    break  # the next slot is past the deadline
                delay = start + at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                params = {"q": f"{args.prefix} {row}, 9490 Vaduz", "format": "jsonv2",
                          "key": args.api_key}
                sent += 1
                status = client.get(f"{args.url}/search", params=params).status_code
                if status == 200:
                    ok, row = ok + 1, row + 1
        except _Stop:
            pass
    return ok, sent


def main(argv: list[str]) -> int:
    args = LoopArgs(**json.loads(Path(argv[0]).read_text()))
    os.nice(args.niceness - os.nice(0))  # absolute: the benchmark itself runs at -10
    signal.signal(signal.SIGTERM, _stop)
    run_loop(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
