"""Chapter 08's picture of a live 3D run: the measured timeline of one step on every rank, phase
by phase (pipeline schedule, tied-embedding sum, DP all-reduce, optimizer), one row per rank
labelled with its (tp, dp, pp) coordinates. The phases and their seconds come from the trainer's
step logs (``parlab.parallel.trainer.StepLog.phases``); this module only draws them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .figures import new_figure

#: one colour per phase of a step, the same in every figure of the chapter
PHASE_COLORS = {"pipeline": "#4c72b0", "tied embedding": "#ccb974", "dp all-reduce": "#55a868",
                "optimizer": "#8172b3", "checkpoint": "#937860"}
FONT = 9


def step_timeline_figure(phases: Sequence[Mapping[str, float]], coords: Sequence[Sequence[int]],
                         title: str = ""):
    """One row per rank: its step's phases laid end to end in the order measured (seconds from
    the step's start, shown in ms). ``phases[r]`` maps phase -> seconds for rank r (phases of 0 s
    are skipped); ``coords[r]`` is its (tp, dp, pp)."""
    if len(phases) != len(coords):
        raise ValueError(f"one coordinate per rank: {len(phases)} ranks of phases, {len(coords)} coordinates")
    unknown = {p for ph in phases for p in ph} - set(PHASE_COLORS)
    if unknown:
        raise ValueError(f"unknown phase {sorted(unknown)[0]!r}; allowed: {', '.join(PHASE_COLORS)}")
    n = len(phases)
    height = 1.45 + 0.26 * n  # inches: the legend's two rows and the title above, the axis below
    fig = new_figure(6.6, height, left=0.17, right=0.97, bottom=0.5 / height, top=1 - 0.85 / height)
    ax = fig.add_subplot()
    seen = set()
    for r, ph in enumerate(phases):
        start = 0.0
        for name, seconds in ph.items():
            if seconds <= 0:
                continue
            ax.barh(n - 1 - r, seconds * 1e3, left=start * 1e3, height=0.7, color=PHASE_COLORS[name],
                    edgecolor="white", linewidth=0.5, label=name if name not in seen else None)
            seen.add(name)
            start += seconds
    ax.set_yticks([n - 1 - r for r in range(n)], [f"{r}: {tuple(c)}" for r, c in enumerate(coords)],
                  fontsize=FONT)
    ax.set_ylabel("rank: (tp, dp, pp)", fontsize=FONT)
    ax.set_xlabel("time from the step's start (ms)", fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, fontsize=FONT, frameon=False,
              borderaxespad=0.2, handlelength=1.2, columnspacing=1.0)
    if title:
        ax.set_title(title, fontsize=FONT + 1, loc="left", pad=34)
    return fig
