"""``python -m geotoolkit.testing``: run the provider simulator in the foreground."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from geotoolkit.testing._config import RETRY_AFTER_MODES
from geotoolkit.testing.faults import FAULTS, parse_fault
from geotoolkit.testing.limiters import LIMITERS
from geotoolkit.testing.simulator import FORMATS, ProviderSimulator, RetryAfterMode


def _retry_after(value: str) -> RetryAfterMode:
    if value in RETRY_AFTER_MODES:
        return value  # type: ignore[return-value]
    try:
        seconds = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(RETRY_AFTER_MODES)} or a whole number of seconds"
        ) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError("Retry-After seconds must be >= 0")
    return seconds


def _fault(value: str) -> str:
    try:
        return parse_fault(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _whole(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError("expected a whole number >= 0")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m geotoolkit.testing",
        description="A local geocoding server on 127.0.0.1 that speaks every provider's API "
        f"({', '.join(FORMATS)}), forward, reverse and in batches, for offline tests. Script "
        "failures with tokens in the address, optionally with xN (e.g. #503x2): "
        + " ".join("#" + name for name in FAULTS) + ".",
    )
    parser.add_argument("--port", type=int, default=8080,
                        help="the port on 127.0.0.1 (default 8080; 0: any free port)")
    parser.add_argument("--rate-limit", type=float, default=None,
                        help="requests/s per key (default: no limit)")
    parser.add_argument("--window-seconds", type=float, default=1.0,
                        help="the window of --rate-limit, in seconds (default 1)")
    parser.add_argument(
        "--limiter", choices=sorted(LIMITERS), default="sliding-window",
        help="how the per-key rate limit is enforced (default: sliding-window)",
    )
    parser.add_argument(
        "--burst", type=_whole, default=None,
        help="gcra/leaky-bucket: requests allowed ahead of the rate (default 0); "
        "token-bucket: its capacity (default: the rate)",
    )
    parser.add_argument(
        "--retry-after", type=_retry_after, default="auto",
        help=" | ".join((*RETRY_AFTER_MODES, "N (fixed seconds)")) + " (default auto)",
    )
    parser.add_argument("--latency-seconds", type=float, default=0.0,
                        help="delay every answer by this long (default 0)")
    parser.add_argument("--error-503-rate", type=float, default=0.0,
                        help="the share of requests answered 503 at random, 0 to 1 (default 0)")
    parser.add_argument(
        "--key", action="append", dest="keys", metavar="KEY",
        help="an accepted API key (repeatable); without it, no authentication",
    )
    parser.add_argument("--daily-cap", type=int, default=None,
                        help="successful requests per key per day, then 402 (default: no cap)")
    parser.add_argument("--hang-seconds", type=float, default=30.0,
                        help="how long #timeout stays silent (default 30)")
    parser.add_argument(
        "--fault", type=_fault, default=None,
        help="a fault for every search, e.g. trickle, huge, status=502 (default: none)",
    )
    parser.add_argument("--trickle-interval-seconds", type=float, default=0.5,
                        help="seconds between two chunks of #trickle (default 0.5)")
    parser.add_argument(
        "--batch-cost", choices=("request", "row"), default="request",
        help="what a batch takes from the rate limit and the daily cap (default: request)",
    )
    parser.add_argument(
        "--batch-hang-over", type=_whole, default=None, metavar="N",
        help="a batch of more than N records stays silent for --hang-seconds",
    )
    parser.add_argument("--seed", type=int, default=0,
                        help="the seed of --error-503-rate's draws (default 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sim = ProviderSimulator(
        args.rate_limit,
        window_seconds=args.window_seconds,
        limiter=args.limiter,
        burst=args.burst,
        retry_after=args.retry_after,
        latency_seconds=args.latency_seconds,
        error_503_rate=args.error_503_rate,
        valid_keys=args.keys,
        daily_cap=args.daily_cap,
        hang_seconds=args.hang_seconds,
        fault=args.fault,
        trickle_interval_seconds=args.trickle_interval_seconds,
        batch_cost=args.batch_cost,
        batch_hang_over=args.batch_hang_over,
        seed=args.seed,
        port=args.port,
    )
    try:
        sim.start()
    except OSError as exc:  # the port is taken (or not ours to bind)
        print(f"python -m geotoolkit.testing: cannot listen on 127.0.0.1:{args.port}: "
              f"{exc.strerror or exc}; choose another --port (0: any free port)",
              file=sys.stderr)
        return 1
    try:
        print(f"geotoolkit provider simulator listening on {sim.url}", flush=True)
        print(f"  try: curl '{sim.url}/search?q=St%C3%A4dtle+38,+Vaduz&format=jsonv2'")
        print(f"       curl '{sim.url}/maps/api/geocode/json?latlng=47.1397,9.5219&key=any'")
        print(f"  every provider answers at its own paths, or under {sim.url}/<provider>")
        print("  press Ctrl-C to stop", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping", flush=True)
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
