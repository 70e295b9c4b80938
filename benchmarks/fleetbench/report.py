"""Tables of figures: a text line per cell as it finishes, then a table per gate (text or
Markdown) and the issue's targets, met or not."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fleetbench.measure import Figures, why

__all__ = ["COLUMNS", "line", "markdown", "targets", "text_tables"]


def _opt(value: float | int | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _pause(f: Figures) -> str:
    return "-" if f.k == 0 else f"{f.in_pause} ({f.arrived_in_pause})"


def _other(f: Figures) -> str:
    return "-" if not f.other_share else f"{f.other_429}/{f.other_sent}"


def _met(f: Figures) -> str:
    cut = "CUT " if f.cut else ""
    if f.met is None:
        return cut.strip()
    return cut + ("met" if f.met else "MISSED " + ",".join(f.misses))


#: (heading, width, value) per column.
COLUMNS: list[tuple[str, int, Callable[[Figures], str]]] = [
    ("limiter", 11, lambda f: f.limiter),
    ("variant", 24, lambda f: f.variant if f.k else "reference pacer" + (
        f", other {f.other_share:.0%}" if f.other_share else "")),
    ("K", 3, lambda f: str(f.k) if f.k else "-"),
    ("rows", 4, lambda f: str(f.rows)),
    ("util", 6, lambda f: f"{f.util:.4f}"),
    ("e2e", 6, lambda f: f"{f.util_e2e:.4f}"),
    ("late", 6, lambda f: f"{f.util_late:.4f}"),
    ("win", 6, lambda f: _opt(f.util_window, ".4f")),
    ("429/ok", 6, lambda f: f"{f.per_ok:.4f}"),
    ("sent", 4, lambda f: str(f.sent)),
    ("lost", 4, lambda f: str(f.lost)),
    ("fail", 4, lambda f: str(f.failed) if f.k else "-"),
    ("in pause", 8, _pause),
    ("unused", 6, lambda f: str(f.unused_slots) if f.k else "-"),
    ("cold s", 6, lambda f: _opt(f.cold_start, ".2f")),
    ("join s", 6, lambda f: _opt(f.join_max, ".2f")),
    ("edge", 4, lambda f: _opt(f.edge_429, "d")),
    ("other 429", 9, _other),
    ("pauses", 10, lambda f: f"{f.pauses} {f.paused_seconds:.1f}s" if f.k else "-"),
    ("min R", 5, lambda f: _opt(f.min_allowed, ".1f")),
    ("end R", 5, lambda f: _opt(f.end_allowed, ".1f")),
    ("jit ms", 6, lambda f: _opt(f.jitter_ms, ".1f")),
    ("load", 4, lambda f: f"{f.load:.1f}"),
    ("target", 6, _met),
]


def header() -> str:
    return " ".join(f"{name:>{width}}" if i > 1 else f"{name:<{width}}"
                    for i, (name, width, _) in enumerate(COLUMNS))


def line(f: Figures) -> str:
    return " ".join(f"{value(f):>{width}}" if i > 1 else f"{value(f):<{width}}"
                    for i, (_, width, value) in enumerate(COLUMNS))


def _groups(figures: Sequence[Figures]) -> dict[str, list[Figures]]:
    groups: dict[str, list[Figures]] = {}
    for f in figures:
        groups.setdefault("reference (no gate)" if f.k == 0 else f.gate, []).append(f)
    return groups


def text_tables(figures: Sequence[Figures]) -> str:
    out = []
    for gate, rows in _groups(figures).items():
        out += [f"\n## {gate}", header(), *(line(f) for f in rows)]
    return "\n".join(out)


def markdown(figures: Sequence[Figures]) -> str:
    """A Markdown table per gate, every column."""
    out = []
    for gate, rows in _groups(figures).items():
        out += [f"#### {gate}", "", "| " + " | ".join(name for name, _, _ in COLUMNS) + " |",
                "|" + " --- |" * len(COLUMNS)]
        out += ["| " + " | ".join(value(f) for _, _, value in COLUMNS) + " |" for f in rows]
        out.append("")
    return "\n".join(out)


def targets(figures: Sequence[Figures]) -> str:
    """The cells that have a target (K = 16, cold), met or not; for each, what its
    utilisation went to (``measure.why``)."""
    rows = [f for f in figures if f.target is not None]
    if not rows:
        return ""
    out = ["| gate | limiter | variant | target | util | late | 429/ok | edge | lost | in pause | "
           "| why |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    out += [f"| {f.gate} | {f.limiter} | {f.variant} | {f.target} | {f.util:.4f} | "
            f"{f.util_late:.4f} | {f.per_ok:.4f} | "
            f"{_opt(f.edge_429, 'd')} | {f.lost} | {f.in_pause} | {_met(f)} | {why(f)} |" for f in rows]
    return "\n".join(out)
