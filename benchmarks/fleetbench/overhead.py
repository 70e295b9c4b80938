"""The gates' own cost: median and p99 of ``acquire`` (one process, one thread, loopback)."""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path

from fleetbench.cell import gate_url
from geotoolkit.gate import gate_key, open_gate

__all__ = ["overhead"]


def overhead(gate: str, workdir: Path, calls: int = 5000) -> dict[str, float]:
    """Median and p99 of ``acquire`` in milliseconds, as ``open_gate`` returns the gate."""
    g = open_gate(gate_url(gate, workdir))
    key = gate_key(f"overhead-{uuid.uuid4().hex[:8]}.example", "bench")
    try:
        for _ in range(200):  # connect, load scripts, warm caches
            g.acquire(key, 0.0)
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            g.acquire(key, 0.0)
            samples.append(time.perf_counter() - start)
    finally:
        g.close()
    samples.sort()
    return {"median_ms": statistics.median(samples) * 1000,
            "p99_ms": samples[int(0.99 * len(samples)) - 1] * 1000}
