"""A cell's dump (``--dump``) as a timeline: what the limiter answered, bin by bin, beside
the fleet's pauses, its factor and the 429 events the gate applied (why it cut).

    python3 benchmarks/fleet_timeline.py DUMP.json [--bin 0.5]

Times are seconds from the first arrival at the limiter.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["bins", "lines", "main"]


def bins(arrivals: Iterable[dict[str, Any]], start: float,
         width: float) -> dict[int, list[int]]:
    """Per bin of ``width`` seconds from ``start``: fleet ok, fleet refused, other ok,
    other refused (the reference pacer counts as the fleet's neighbour, as "other").

    >>> arrivals = [{"time": 0.1, "status": 200, "who": "fleet"},
    ...             {"time": 0.6, "status": 429, "who": "fleet"},
    ...             {"time": 0.7, "status": 200, "who": "other"}]
    >>> bins(arrivals, 0.0, 0.5)
    {0: [1, 0, 0, 0], 1: [0, 1, 1, 0]}
    """
    counts: dict[int, list[int]] = {}
    for arrival in arrivals:
        index = int((arrival["time"] - start) // width)
        column = (0 if arrival["status"] == 200 else 1) + (0 if arrival["who"] == "fleet" else 2)
        counts.setdefault(index, [0, 0, 0, 0])[column] += 1
    return dict(sorted(counts.items()))


def lines(dump: dict[str, Any], width: float = 0.5) -> list[str]:
    """The timeline's lines: the pauses, one line per bin, then every 429 event.

    >>> dump = {"arrivals": [{"time": 10.0, "status": 200, "who": "fleet"},
    ...                      {"time": 10.6, "status": 429, "who": "fleet"}],
    ...         "workers": [{"pauses": [[10.6, 11.6]], "factors": [[10.7, 0.5]],
    ...                      "events": [[10.6, "429 event on k: factor 1 -> 0.5"]]}]}
    >>> print("\\n".join(lines(dump)))
    pauses: 0.60-1.60
       0.0 s  fleet   1 ok   0 429 | other   0 ok   0 429 | factor -
       0.5 s  fleet   0 ok   1 429 | other   0 ok   0 429 | factor 0.5
       0.60 s 429 event on k: factor 1 -> 0.5
    """
    arrivals: Sequence[dict[str, Any]] = dump["arrivals"]
    if not arrivals:
        return ["no arrivals"]
    start = min(a["time"] for a in arrivals)
    workers = dump["workers"]
    pauses = sorted({(round(s - start, 2), round(e - start, 2))
                     for w in workers for s, e in w.get("pauses", [])})
    out = ["pauses: " + ", ".join(f"{s:.2f}-{e:.2f}" for s, e in pauses)]
    factors = sorted((t - start, f) for w in workers for t, f in w.get("factors", []))
    seen, factor = 0, None
    for index, (ok, refused, other_ok, other_refused) in bins(arrivals, start, width).items():
        while seen < len(factors) and factors[seen][0] < (index + 1) * width:
            factor = factors[seen][1]
            seen += 1
        shown = "-" if factor is None else f"{factor:.4g}"
        out.append(f"{index * width:6.1f} s  fleet {ok:3d} ok {refused:3d} 429 | "
                   f"other {other_ok:3d} ok {other_refused:3d} 429 | factor {shown}")
    events = sorted((t - start, line) for w in workers for t, line in w.get("events", []))
    out.extend(f"{t:7.2f} s {line}" for t, line in events)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump", type=Path, nargs="+", help="a cell's dump, written by --dump")
    parser.add_argument("--bin", type=float, default=0.5, help="seconds per line (default 0.5)")
    args = parser.parse_args(argv)
    for path in args.dump:
        print(f"# {path}")
        print("\n".join(lines(json.loads(path.read_text()), args.bin)))
    return 0
