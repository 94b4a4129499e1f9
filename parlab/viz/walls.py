"""Pictures for chapter 01: where the bytes go against what a GPU holds; days against GPU count."""

from __future__ import annotations

import math

import numpy as np

from parlab.costmodel.answers.walls import WALL_GPUS, ComputeWall, MemoryWall, compute_wall
from parlab.costmodel.specs.hardware import get_gpu

from .costmodel import stacked_bar

COLORS = {"weights": "#4c72b0", "gradients": "#dd8452", "fp32 master weights": "#55a868",
          "optimizer states": "#c44e52", "activations": "#8172b3"}


def gpu_capacities() -> dict[str, float]:
    """Distinct GPU memory sizes in bytes, labelled by the presets that have them (two names
    a line)."""
    groups: dict[float, list[str]] = {}
    for g in map(get_gpu, WALL_GPUS):
        groups.setdefault(g.memory_bytes, []).append(g.name)
    return {"/\n".join("/".join(names[i:i + 2]) for i in range(0, len(names), 2)): cap
            for cap, names in sorted(groups.items())}


def nice_ceiling(x: float) -> float:
    """The smallest of 1, 2, 5 x 10^k that is >= ``x`` (x > 0): an axis limit that changes only
    when a value crosses a step (at most three times a decade), so most knob changes leave the
    axis, and the eye's comparison, where they were."""
    k = math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * 10**k >= x * (1 - 1e-12):
            return m * 10**k
    return 10 ** (k + 1)


def days_label(days: float) -> str:
    """Training time in days, the one unit of chapter 01's compute wall (table and plot)."""
    if days >= 100:
        return f"{days:,.0f} days"
    return "1 day" if f"{days:.3g}" == "1" else f"{days:.3g} days"


def is_inference(wall: MemoryWall) -> bool:
    return wall.states.optimizer == "none"


def plot_memory_wall(ax, wall: MemoryWall) -> None:
    """A stacked bar (GB) of the memory a job needs on one GPU, above one bar per GPU size.

    The x-axis ends at ``nice_ceiling`` of the largest bar, so it holds still while a knob moves."""
    caps = gpu_capacities()
    job = "inference" if is_inference(wall) else "train"
    labels = [f"{job} {wall.model.name}"] + list(caps)
    y = np.arange(len(labels))[::-1]
    left = stacked_bar(ax, wall.terms(), COLORS, 1e9, y=y[0], height=0.6)
    ax.barh(y[1:], [c / 1e9 for c in caps.values()], color="#999999", height=0.6)
    ax.set_yticks(y, labels, fontsize=9)
    ax.tick_params(axis="x", labelsize=9)
    ax.set_xlim(0, nice_ceiling(max(left, *(c / 1e9 for c in caps.values()))))
    ax.set_xlabel("memory (GB = 1e9 bytes)", fontsize=9)
    what = "for inference" if is_inference(wall) else "to train"
    ax.set_title(f"{left:,.0f} GB {what} {wall.model.name} on one GPU, against what GPUs hold",
                 fontsize=10)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)


def plot_compute_wall(ax, wall: ComputeWall) -> None:
    """Training days against GPU count (perfect scaling), one line per distinct GPU peak."""
    counts = np.logspace(0, 14, 15, base=2)
    lines: dict[float, list[str]] = {}
    for g in dict.fromkeys([*map(get_gpu, WALL_GPUS), wall.gpu]):  # the chosen GPU's line too
        try:
            days = compute_wall(wall.model, wall.tokens, g, 1, wall.utilisation, wall.dtype).days
        except ValueError:  # e.g. bf16 on a V100
            continue
        lines.setdefault(days, []).append(g.name)
    for days, names in sorted(lines.items(), reverse=True):
        chosen = wall.gpu.name in names
        ax.loglog(counts, days / counts, lw=2.2 if chosen else 0.9, label="/".join(names))
    ax.minorticks_off()
    ax.tick_params(labelsize=9)
    ax.plot([wall.n_gpus], [wall.days], "ko")
    ax.annotate(days_label(wall.days), (wall.n_gpus, wall.days), textcoords="offset points",
                xytext=(6, 6), fontsize=9)
    for label, days in (("1 month", 30), ("1 year", 365)):
        ax.axhline(days, color="grey", lw=0.6, ls=":")
        ax.text(1, days, label, fontsize=9, va="bottom")
    ax.set_xlabel("GPUs (perfect scaling)", fontsize=9)
    ax.set_ylabel("training time (days)", fontsize=9)
    ax.set_title(f"{wall.model.name} on {wall.tokens / 1e9:,.0f}B tokens at "
                 f"{wall.utilisation:.0%} of peak ({wall.dtype})", fontsize=10)
    ax.legend(fontsize=8, loc="upper right", frameon=False)
