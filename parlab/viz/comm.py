"""Pictures for chapter 02: who holds what before and after a collective, the ring step by step,
and time against message size in the alpha-beta model."""

from __future__ import annotations

import numpy as np

from parlab.comm.algorithms import ring_schedule
from parlab.costmodel import alphabeta

RANK_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
LETTERS = "ABCDEFGH"


def labelled(rank: int, n: int) -> np.ndarray:
    """Rank ``rank``'s input for the pictures: element j is (j + 1) * 10**rank, so any sum of such
    elements still says which ranks (the digits' places) and which block (the digits) it holds."""
    return np.array([(j + 1) * 10**rank for j in range(n)], dtype=np.int64)


def decode(value: int, n: int) -> tuple[frozenset[int], int]:
    """(ranks that contributed, block index) of an element built from ``labelled`` inputs."""
    digits = [(int(value) // 10**r) % 10 for r in range(n)]
    ranks = frozenset(r for r, d in enumerate(digits) if d)
    return ranks, (max(digits) - 1 if ranks else -1)


def cell_text(ranks: frozenset[int], block: int, n: int) -> str:
    """'B2' for rank 1's block 2; 'Σ2' for the sum of every rank's block 2; 'AB2' for a partial sum."""
    who = "Σ" if len(ranks) == n else "".join(LETTERS[r] for r in sorted(ranks))
    return f"{who}{block}"


def _cell_color(ranks: frozenset[int], n: int) -> tuple[str, str]:
    if len(ranks) == 1:
        return RANK_COLORS[next(iter(ranks)) % len(RANK_COLORS)], "white"
    if len(ranks) == n:
        return "#222222", "white"
    grey = 0.85 - 0.5 * len(ranks) / n
    return str(grey), "black"


def draw_grid(ax, x0: float, rows: list, n: int, width: int) -> None:
    """One row of cells per rank at x offset x0; a row that is None is drawn as 'nothing'."""
    from matplotlib.patches import Rectangle

    for r, row in enumerate(rows):
        y = len(rows) - 1 - r
        if row is None:
            ax.text(x0 + width / 2, y + 0.5, "(none)", ha="center", va="center", fontsize=6, color="#777777")
            continue
        for j, v in enumerate(np.asarray(row).reshape(-1)):
            ranks, block = decode(v, n)
            face, ink = _cell_color(ranks, n)
            ax.add_patch(Rectangle((x0 + j, y), 1, 1, facecolor=face, edgecolor="white", lw=1))
            text = cell_text(ranks, block, n)
            ax.text(x0 + j + 0.5, y + 0.5, text, ha="center", va="center",
                    fontsize=6 if len(text) <= 3 else 4.5, color=ink)


def plot_before_after(ax, title: str, before: list, after: list, n: int) -> None:
    """A collective as two grids (ranks x elements): what each rank holds before and after."""
    wb = max(len(np.asarray(b).reshape(-1)) for b in before)
    wa = max((len(np.asarray(a).reshape(-1)) for a in after if a is not None), default=1)
    draw_grid(ax, 0, before, n, wb)
    draw_grid(ax, wb + 1.5, after, n, wa)
    ax.annotate("", xy=(wb + 1.3, n / 2), xytext=(wb + 0.2, n / 2),
                arrowprops={"arrowstyle": "->", "color": "#444444"})
    for r in range(n):
        ax.text(-0.2, n - 1 - r + 0.5, f"rank {r}", ha="right", va="center", fontsize=6)
    ax.set_xlim(-1.6, wb + 1.5 + wa + 0.1)
    ax.set_ylim(-0.1, n + 0.1)
    ax.set_title(title, fontsize=8)
    ax.axis("off")


def collectives_figure(runs: list[dict], fig=None):
    """Every collective of a live run: ``runs`` is the per-rank list of {name: (input, output)}."""
    from parlab.widgets.base import new_figure

    n, names = len(runs), list(runs[0])
    rows = -(-len(names) // 2)
    fig = fig or new_figure(7.5, 1.25 * rows * max(n, 2) / 2.5, left=0.06, right=0.99, bottom=0.02, top=0.95,
                            hspace=0.45, wspace=0.25)
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, 2, i + 1)
        plot_before_after(ax, name, [runs[r][name][0] for r in range(n)],
                          [runs[r][name][1] for r in range(n)], n)
    return fig


def ring_states(n: int) -> list[tuple[str, list[list[frozenset[int]]]]]:
    """Who contributed to each rank's copy of each block, after each step of the ring
    (the textbook, unfused view): [(caption, state[rank][block])], starting with the input."""
    state = [[frozenset({r}) for _ in range(n)] for r in range(n)]
    out = [("before", [row[:] for row in state])]
    for i, (phase, moves) in enumerate(ring_schedule(n)):
        sent = {(src, b): state[src][b] for src, _, b in moves}
        for src, dst, b in moves:
            state[dst][b] = state[dst][b] | sent[(src, b)] if phase == "reduce-scatter" else sent[(src, b)]
        step = i if phase == "reduce-scatter" else i - (n - 1)
        out.append((f"{phase} step {step + 1}", [row[:] for row in state]))
    return out


def ring_figure(n: int = 4):
    """The ring all-reduce on n ranks, one panel per step: each rank's blocks (rows = ranks),
    with the blocks sent in that step outlined."""
    from matplotlib.patches import Rectangle

    from parlab.widgets.base import new_figure

    states = ring_states(n)
    schedule = [None] + ring_schedule(n)
    cols = len(states)
    fig = new_figure(1.05 * cols, 2.0, left=0.02, right=0.99, bottom=0.03, top=0.72, wspace=0.15)
    for i, (caption, state) in enumerate(states):
        ax = fig.add_subplot(1, cols, i + 1)
        values = [[sum((b + 1) * 10**c for c in state[r][b]) for b in range(n)] for r in range(n)]
        draw_grid(ax, 0, values, n, n)
        if schedule[i] is not None:
            for src, _, b in schedule[i][1]:  # outline what each rank receives in this step
                dst = (src + 1) % n
                ax.add_patch(Rectangle((b, n - 1 - dst), 1, 1, fill=False, edgecolor="black", lw=1.4))
        ax.set_xlim(0, n)
        ax.set_ylim(0, n)
        ax.set_title(caption.replace(" step", "\nstep"), fontsize=6)
        ax.axis("off")
    fig.suptitle(f"Ring all-reduce on {n} ranks (rows: ranks 0-{n - 1}; columns: blocks; outlined: "
                 "just received)", fontsize=7, y=0.98)
    return fig


def plot_time_vs_size(ax, op: str, ranks: int, alpha: float, bandwidth: float, size: float,
                      chosen: str | None = None) -> None:
    """Modelled time (log-log) of every algorithm of ``op`` against message size, a marker at
    ``size``, and the latency floor (steps x alpha) of each as a dotted line."""
    sizes = np.logspace(2, 11, 60)
    for i, algo in enumerate(alphabeta.ALGORITHMS[op]):
        color = RANK_COLORS[i]
        times = [alphabeta.time(op, algo, ranks, s, alpha, bandwidth).seconds for s in sizes]
        ax.loglog(sizes, times, color=color, lw=2.2 if algo == chosen else 1.0, label=algo)
        t = alphabeta.time(op, algo, ranks, size, alpha, bandwidth)
        ax.plot([size], [t.seconds], "o", color=color, ms=4)
        if t.latency > 0:
            ax.axhline(t.latency, color=color, ls=":", lw=0.8)
    ax.axvline(size, color="grey", lw=0.6)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("time (s)")
    ax.set_title(f"{op} on {ranks} ranks: alpha = {alpha * 1e6:g} us, {bandwidth / 1e9:g} GB/s "
                 "(dotted: latency floor)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left")
    ax.minorticks_off()
