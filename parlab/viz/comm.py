"""Pictures for chapter 02: who holds what before and after a collective, the ring step by step,
and time against message size in the alpha-beta model."""

from __future__ import annotations

import math

import numpy as np

from parlab.comm.algorithms import ring_schedule
from parlab.costmodel import alphabeta
from parlab.viz.figures import new_figure

RANK_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
# one colour per algorithm in every figure of the course (ring is always the same teal)
ALGORITHM_COLORS = {"ring": "#1b9e77", "double_binary_tree": "#d95f02", "recursive_doubling": "#7570b3",
                    "binomial_tree": "#e7298a", "naive": "#666666", "pairwise": "#66a61e",
                    "dissemination": "#a6761d", "direct": "#1f78b4"}
LETTERS = "ABCDEFGH"
FONT = 9  # points: the smallest text in any figure


def labelled(rank: int, n: int) -> np.ndarray:
    """Rank ``rank``'s input for the pictures: element j is (j + 1) * 10**rank, so any sum of such
    elements still says which ranks (the digits' places) and which block (the digits) it holds."""
    return np.array([(j + 1) * 10**rank for j in range(n)], dtype=np.int64)


def decode(value: int, n: int) -> tuple[frozenset[int], int]:
    """(ranks that contributed, block index) of an element built from ``labelled`` inputs."""
    digits = [(int(value) // 10**r) % 10 for r in range(n)]
    ranks = frozenset(r for r, d in enumerate(digits) if d)
    return ranks, (max(digits) - 1 if ranks else -1)


def who(ranks: frozenset[int], n: int) -> str:
    """'B' for rank 1's own value, 'AB' for a partial sum of ranks 0 and 1, 'Σ' for all n."""
    return "Σ" if len(ranks) == n else "".join(LETTERS[r] for r in sorted(ranks))


def cell_text(ranks: frozenset[int], block: int, n: int) -> str:
    """'B2' for rank 1's block 2; 'Σ2' for the sum of every rank's block 2; 'AB2' for a partial sum."""
    return f"{who(ranks, n)}{block}"


def cell_color(ranks: frozenset[int], n: int) -> tuple[str, str]:
    """(fill, ink) of a value: the rank's colour for its own, greys darkening as a partial sum
    grows, near-black for the sum over every rank."""
    if len(ranks) == 1:
        return RANK_COLORS[next(iter(ranks)) % len(RANK_COLORS)], "white"
    if len(ranks) == n:
        return "#222222", "white"
    grey = 0.88 - 0.45 * (len(ranks) - 1) / max(n - 2, 1)
    return str(round(grey, 3)), "black"


def draw_grid(ax, x0: float, rows: list, n: int, width: int) -> None:
    """One row of cells per rank at x offset x0; a row that is None is drawn as 'nothing'."""
    from matplotlib.patches import Rectangle

    for r, row in enumerate(rows):
        y = len(rows) - 1 - r
        if row is None:
            ax.text(x0 + width / 2, y + 0.5, "(none)", ha="center", va="center", fontsize=FONT,
                    color="#777777")
            continue
        for j, v in enumerate(np.asarray(row).reshape(-1)):
            ranks, block = decode(v, n)
            face, ink = cell_color(ranks, n)
            ax.add_patch(Rectangle((x0 + j, y), 1, 1, facecolor=face, edgecolor="white", lw=1))
            ax.text(x0 + j + 0.5, y + 0.5, cell_text(ranks, block, n), ha="center", va="center",
                    fontsize=FONT, color=ink)


def plot_before_after(ax, title: str, before: list, after: list, n: int) -> None:
    """A collective as two grids (ranks x elements): what each rank holds before and after."""
    wb = max(len(np.asarray(b).reshape(-1)) for b in before)
    wa = max((len(np.asarray(a).reshape(-1)) for a in after if a is not None), default=1)
    draw_grid(ax, 0, before, n, wb)
    draw_grid(ax, wb + 1.5, after, n, wa)
    ax.annotate("", xy=(wb + 1.3, n / 2), xytext=(wb + 0.2, n / 2),
                arrowprops={"arrowstyle": "->", "color": "#444444"})
    for r in range(n):
        ax.text(-0.2, n - 1 - r + 0.5, f"rank {r}", ha="right", va="center", fontsize=FONT)
    ax.set_xlim(-2.2, wb + 1.5 + wa + 0.1)
    ax.set_ylim(-0.1, n + 0.1)
    ax.set_title(title, fontsize=FONT + 1)
    ax.axis("off")


def collectives_figure(runs: list[dict], fig=None):
    """Every collective of a live run: ``runs`` is the per-rank list of {name: (input, output)}."""
    n, names = len(runs), list(runs[0])
    rows = -(-len(names) // 2)
    height = 0.36 * rows * (max(n, 2) + 1.3)
    fig = fig or new_figure(8.0, height, left=0.01, right=0.99, bottom=0.01, top=1 - 0.3 / height,
                            hspace=0.4, wspace=0.08)
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
        out.append((f"{phase} {step + 1}/{n - 1}", [row[:] for row in state]))
    return out


def _ring_positions(n: int, radius: float) -> list[tuple[float, float]]:
    """Centres of the ranks on a circle, the ring running clockwise from rank 0 (for 4 ranks:
    the corners of a square, rank 0 top left)."""
    angles = [math.pi / 2 + math.pi / n - 2 * math.pi * r / n for r in range(n)]
    return [(radius * math.cos(a), radius * math.sin(a)) for a in angles]


RING_CELL = (0.55, 0.27)  # width, height of one block in a ring panel (data units)
RING_INCH = 0.82  # inches per data unit in a ring panel: a block is 0.45 x 0.22 in


def _ring_radius(n: int) -> float:
    return 1.15 if n <= 4 else 1.5


def _ring_limits(n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """x and y limits of a ring panel: every rank's column, its label and the arrows."""
    w, h = RING_CELL
    centres = _ring_positions(n, _ring_radius(n))
    xs = [abs(x) + w / 2 + 0.2 for x, _ in centres]
    top = max(y + n * h / 2 + 0.3 for _, y in centres)
    bottom = min(y - n * h / 2 - 0.3 for _, y in centres)
    return (-max(xs), max(xs)), (bottom, top)


def _ring_panel(ax, n: int, caption: str, state: list, moves: list | None) -> None:
    """One step: every rank's n blocks as a column (block 0 on top) at its place on the ring,
    an arrow to the right neighbour labelled with the block it sent, the received cell outlined."""
    from matplotlib.patches import FancyArrowPatch, Rectangle

    w, h = RING_CELL
    centres = _ring_positions(n, _ring_radius(n))
    boxes = []
    received = {(dst, b) for _, dst, b in moves or ()}
    for r, (cx, cy) in enumerate(centres):
        x0, y_top = cx - w / 2, cy + n * h / 2
        box = Rectangle((x0 - 0.02, y_top - n * h - 0.02), w + 0.04, n * h + 0.04, fill=False, lw=0)
        ax.add_patch(box)
        boxes.append(box)
        for b in range(n):
            face, ink = cell_color(state[r][b], n)
            y = y_top - (b + 1) * h
            ax.add_patch(Rectangle((x0, y), w, h, facecolor=face, edgecolor="white", lw=0.8))
            ax.text(cx, y + h / 2, who(state[r][b], n), ha="center", va="center", fontsize=FONT, color=ink)
            if (r, b) in received:
                ax.add_patch(Rectangle((x0, y), w, h, fill=False, edgecolor="black", lw=1.8, zorder=3))
        above = cy >= 0
        ax.text(cx, y_top + 0.06 if above else y_top - n * h - 0.06, f"rank {r}", ha="center",
                va="bottom" if above else "top", fontsize=FONT)
    for src, dst, b in moves or ():
        (x1, y1), (x2, y2) = centres[src], centres[dst]
        rad = -0.25
        ax.add_patch(FancyArrowPatch((x1, y1), (x2, y2), patchA=boxes[src], patchB=boxes[dst],
                                     connectionstyle=f"arc3,rad={rad}", arrowstyle="-|>",
                                     mutation_scale=12, lw=1.4, color=ALGORITHM_COLORS["ring"]))
        mx, my = (x1 + x2) / 2 + rad * (y2 - y1) / 2, (y1 + y2) / 2 - rad * (x2 - x1) / 2
        ax.text(mx, my, f"b{b}", ha="center", va="center", fontsize=FONT, color=ALGORITHM_COLORS["ring"],
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": ALGORITHM_COLORS["ring"], "lw": 0.8},
                zorder=4)
    (x_lo, x_hi), (y_lo, y_hi) = _ring_limits(n)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_aspect("equal")
    ax.set_title(caption, fontsize=FONT + 1)
    ax.axis("off")


def _ring_legend(ax, n: int) -> None:
    from matplotlib.patches import Rectangle

    ring = ALGORITHM_COLORS["ring"]
    entries = [(RANK_COLORS[0], "white", "white", 0.8, "A", "a rank's own block"),
               (cell_color(frozenset({0, 1}), n)[0], "black", "white", 0.8, "AB", "partial sum"),
               ("#222222", "white", "white", 0.8, "Σ", "sum over all ranks"),
               ("white", ring, ring, 0.8, "b2", "block 2 moves"),
               ("white", "black", "black", 1.8, "", "just received")]
    ax.text(0.0, 1.0, f"blocks 0-{n - 1} top to bottom;\n{', '.join(LETTERS[:n])}: ranks 0-{n - 1}",
            fontsize=FONT, va="center", transform=ax.transAxes)
    for i, (face, ink, edge, lw, label, text) in enumerate(entries):
        y = 0.82 - 0.15 * i
        ax.add_patch(Rectangle((0.0, y - 0.045), 0.17, 0.09, facecolor=face, edgecolor=edge, lw=lw,
                               transform=ax.transAxes))
        ax.text(0.085, y, label, ha="center", va="center", fontsize=FONT, color=ink, transform=ax.transAxes)
        ax.text(0.21, y, text, ha="left", va="center", fontsize=FONT, transform=ax.transAxes)
    ax.axis("off")


def ring_figure(n: int = 4):
    """The ring all-reduce on n ranks (2 to 5), one panel per step of ``ring_schedule``: the
    ranks on a ring, each with its n blocks (block 0 on top), an arrow per transfer labelled
    with its block, the blocks just received outlined, and a legend for the partial sums."""
    if not 2 <= n <= 5:
        raise ValueError(f"ring_figure draws 2 to 5 ranks, got n={n}")
    states, schedule = ring_states(n), [None] + [moves for _, moves in ring_schedule(n)]
    cols = -(-(len(states) + 1) // 2)
    (x_lo, x_hi), (y_lo, y_hi) = _ring_limits(n)
    panel_w, panel_h = (x_hi - x_lo) * RING_INCH, (y_hi - y_lo) * RING_INCH
    height = 2 * panel_h * 1.12 + 0.45
    fig = new_figure(panel_w * cols * 1.03, height, left=0.01, right=0.99, bottom=0.01,
                     top=1 - 0.6 / height, wspace=0.03, hspace=0.12)
    for i, (caption, state) in enumerate(states):
        _ring_panel(fig.add_subplot(2, cols, i + 1), n, caption, state, schedule[i])
    _ring_legend(fig.add_subplot(2, cols, len(states) + 1), n)
    fig.suptitle(f"Ring all-reduce on {n} ranks: after {n - 1} reduce-scatter steps rank r holds "
                 f"block r summed; {n - 1} all-gather steps share it", fontsize=FONT + 2)
    return fig


def plot_time_vs_size(ax, op: str, ranks: int, alpha: float, bandwidth: float, size: float,
                      chosen: str | None = None) -> None:
    """Modelled time (log-log) of every algorithm of ``op`` against message size, a marker at
    ``size``, and the latency floor (steps x alpha) of each as a dotted line. The shared-memory
    algorithms (``alphabeta.ONE_HOST_ONLY``) are left out as ``alphabeta.compare`` leaves them
    out of the ranking, unless one is ``chosen``."""
    sizes = np.logspace(2, 11, 60)
    for algo in [a for a in alphabeta.algorithms_of(op) if a not in alphabeta.ONE_HOST_ONLY or a == chosen]:
        color = ALGORITHM_COLORS.get(algo, "#333333")
        times = [alphabeta.time(op, algo, ranks, s, alpha, bandwidth).seconds for s in sizes]
        ax.loglog(sizes, times, color=color, lw=2.4 if algo == chosen else 1.2, label=algo)
        t = alphabeta.time(op, algo, ranks, size, alpha, bandwidth)
        ax.plot([size], [t.seconds], "o", color=color, ms=4)
        if t.latency > 0:
            ax.axhline(t.latency, color=color, ls=":", lw=0.8)
    ax.axvline(size, color="grey", lw=0.6)
    ax.set_xlabel("message size (bytes)", fontsize=FONT)
    ax.set_ylabel("time (s)", fontsize=FONT)
    ax.tick_params(labelsize=FONT)
    ax.set_title(f"{op} on {ranks} ranks, α = {alpha * 1e6:.3g} µs, {bandwidth / 1e9:.3g} GB/s "
                 "(dotted: latency floors)", fontsize=FONT)
    ax.legend(fontsize=FONT, loc="upper left", frameon=False)
    ax.minorticks_off()
