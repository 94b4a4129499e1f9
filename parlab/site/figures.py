"""The calculators' figures as SVG strings: where a GPU's bytes go, where a step's time goes, a
pipeline schedule's Gantt chart, and the rank grid with one rank's groups. They draw what the
engines computed (``calc``); nothing is computed here but pixel positions."""

from __future__ import annotations

from collections.abc import Callable

from parlab.layout import Grid
from parlab.schedules import Timeline

from .svg import PALETTE, Svg

WIDTH = 640
KIND_COLOUR = {"F": PALETTE[0], "B": PALETTE[1], "W": PALETTE[2]}
GROUP_COLOUR = {"tp": PALETTE[0], "dp": PALETTE[1], "pp": PALETTE[2]}


def _stacked(terms: dict[str, float], limit: float, fmt: Callable[[float], str], label: str,
             limit_label: str = "") -> str:
    """One horizontal bar of ``terms`` stacked left to right, a legend below it (values written
    by ``fmt``, the format of the table beside it), and, when ``limit`` > 0, a dashed line there."""
    shown = {k: x for k, x in terms.items() if x > 0}
    top = max(sum(shown.values()), limit, 1e-30)
    svg = Svg(WIDTH, 44 + 18 * len(shown), label)
    x0, bar = 10.0, WIDTH - 20.0
    x = x0
    for i, (name, value) in enumerate(shown.items()):
        w = bar * value / top
        svg.rect(x, 10, w, 22, PALETTE[i % len(PALETTE)], f"{name}: {fmt(value)}")
        x += w
        y = 52 + 18 * i
        svg.rect(x0, y - 10, 12, 12, PALETTE[i % len(PALETTE)])
        svg.text(x0 + 18, y, f"{name}: {fmt(value)}", size=12)
    if limit > 0:
        xl = x0 + bar * limit / top
        svg.line(xl, 4, xl, 38, "#000", 2, "4 3")
        svg.text(min(xl, WIDTH - 4), 44, limit_label, size=11, anchor="end")
    return str(svg)


def memory_bar(terms: dict[str, float], capacity: float, fmt: Callable[[float], str]) -> str:
    """The memory terms of the most loaded GPU against its capacity (dashed line)."""
    return _stacked(terms, capacity, fmt, "memory per GPU by term", f"GPU memory {fmt(capacity)}")


def time_bar(terms: dict[str, float], fmt: Callable[[float], str]) -> str:
    """The terms of one training step's time."""
    return _stacked(terms, 0, fmt, "step time by term")


def gantt(timeline: Timeline, title: str) -> str:
    """Stage s's ops as boxes on row s, time left to right (F blue, B orange, W green)."""
    sched = timeline.schedule
    span = float(timeline.makespan) or 1.0
    left, row = 60.0, 24.0
    svg = Svg(WIDTH, 34 + row * sched.p + 20, f"{title} Gantt chart, p={sched.p}, m={sched.m}")
    scale = (WIDTH - left - 10) / span
    svg.text(left, 14, f"{title}: p={sched.p}, m={sched.m}" + (f", v={sched.v}" if sched.v > 1 else ""), bold=True)
    for s, ops in enumerate(timeline.spans):
        y = 24 + row * s
        svg.text(left - 6, y + 16, f"stage {s}", size=11, anchor="end")
        for op, start, end in ops:
            x, w = left + float(start) * scale, float(end - start) * scale
            shade = KIND_COLOUR[op.kind] if op.chunk % 2 == 0 else "#9ecae9" if op.kind == "F" else "#ffbf79"
            svg.rect(x, y, w, row - 3, shade, f"stage {s}: {op.label(sched.v)}, {float(start):g} to {float(end):g}",
                     stroke="#fff")
            if w >= 18:
                svg.text(x + w / 2, y + 15, op.label(sched.v), size=10 if w >= 26 else 8, anchor="middle", fill="#fff")
    y = 34 + row * sched.p
    svg.text(left, y + 6, f"time (units of F), makespan {float(span):g}; idle gaps are the bubble", size=11)
    return str(svg)


def rank_grid(grid: Grid, rank: int, gpus_per_node: int) -> str:
    """Ranks in Megatron order (row = pipeline stage; within a row tp fastest, then dp), nodes as
    alternating backgrounds, and ``rank``'s TP, DP and PP groups coloured."""
    cols = grid.tp * grid.dp
    cell = max(6.0, min(34.0, (WIDTH - 20) / cols))
    rows_shown = min(grid.pp, max(1, int(400 // cell)))
    svg = Svg(WIDTH, 30 + cell * rows_shown + 26, f"rank grid {grid}, rank {rank} and its groups")
    mine = {dim: set(grid.group(dim, rank)) for dim in GROUP_COLOUR}
    for r in range(cols * rows_shown):
        x, y = 10 + (r % cols) * cell, 8 + (r // cols) * cell
        fill = "#e8e8e8" if (r // gpus_per_node) % 2 == 0 else "#cfcfcf"
        for dim in ("pp", "dp", "tp"):
            if r in mine[dim]:
                fill = GROUP_COLOUR[dim]
        svg.rect(x, y, cell - 2, cell - 2, fill, f"rank {r}, node {r // gpus_per_node}, coords {tuple(grid.coords(r))}",
                 stroke="#000" if r == rank else "none")
        if cell >= 20:
            svg.text(x + cell / 2 - 1, y + cell / 2 + 3, str(r), size=9, anchor="middle")
    y = 24 + cell * rows_shown
    more = f" (first {rows_shown} of {grid.pp} stages shown)" if rows_shown < grid.pp else ""
    x = 10.0
    for dim, colour in GROUP_COLOUR.items():
        svg.rect(x, y - 9, 12, 12, colour)
        svg.text(x + 16, y + 1, f"{dim.upper()} group", size=11)
        x += 100
    svg.text(x, y + 1, f"grey bands: nodes of {gpus_per_node} GPUs{more}", size=11)
    return str(svg)
