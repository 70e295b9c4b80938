"""Record a real Nominatim's answers to the cases of ``tests/providers/nominatim_cases.py``.

Each case's request is built by geotoolkit (``Nominatim.build_request``), sent to a
loopback Nominatim (``benchmarks/nominatim/lab.sh``), and the answer (status, content
type, body) written to ``tests/providers/fixtures/nominatim_lab/recorded/<case>.json``.
The ``timeout`` case needs a second server whose every query times out::

    bash benchmarks/nominatim/lab.sh &                                  # :8088
    (cd /opt/nominatim-project && NOMINATIM_QUERY_TIMEOUT=0 \\
        /opt/nominatim-venv/bin/nominatim serve --server 127.0.0.1:8089 --engine falcon) &
    python benchmarks/nominatim/record.py --timeout-url http://127.0.0.1:8089
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO)]

from geotoolkit.providers import Nominatim  # noqa: E402
from tests.providers.nominatim_cases import CASES, RECORDED, envelope_of  # noqa: E402

AGENT = "geotoolkit-tests/1.0 (tests@example.org)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8088", help="the lab Nominatim")
    p.add_argument("--timeout-url", help="a Nominatim run with NOMINATIM_QUERY_TIMEOUT=0")
    args = p.parse_args(argv)
    for url in (args.url, args.timeout_url):
        if url and urlsplit(url).hostname not in ("127.0.0.1", "localhost"):
            p.error(f"not a loopback Nominatim: {url}")
    RECORDED.mkdir(parents=True, exist_ok=True)
    with httpx.Client(timeout=30.0) as client:
        for case in CASES:
            url = args.timeout_url if case.server == "timeout" else args.url
            if url is None:
                print(f"{case.name}: skipped (no --timeout-url)")
                continue
            request = Nominatim(url + case.base_path, user_agent=AGENT).build_request(case.query)
            envelope = envelope_of(client.send(request))
            path = RECORDED / f"{case.name}.json"
            path.write_text(json.dumps(envelope, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
            print(f"{case.name}: HTTP {envelope['status']} -> {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
