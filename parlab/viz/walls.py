"""Pictures for chapter 01: where the bytes go against what a GPU holds; days against GPU count."""

from __future__ import annotations

import numpy as np

from parlab.costmodel.hardware import GPUS
from parlab.costmodel.walls import ComputeWall, MemoryWall, compute_wall

from .costmodel import stacked_bar

COLORS = {"weights": "#4c72b0", "gradients": "#dd8452", "fp32 master weights": "#55a868",
          "optimizer states": "#c44e52", "activations": "#8172b3"}


def gpu_capacities() -> dict[str, float]:
    """Distinct GPU memory sizes in bytes, labelled by the presets that have them."""
    groups: dict[float, list[str]] = {}
    for g in GPUS.values():
        groups.setdefault(g.memory_bytes, []).append(g.name)
    return {"/".join(names): cap for cap, names in sorted(groups.items())}


def plot_memory_wall(ax, wall: MemoryWall) -> None:
    """A stacked bar (GB) of the memory needed to train on one GPU, above one bar per GPU size."""
    caps = gpu_capacities()
    labels = [f"train {wall.model.name}"] + list(caps)
    y = np.arange(len(labels))[::-1]
    left = stacked_bar(ax, wall.terms(), COLORS, 1e9, y=y[0], height=0.6)
    ax.barh(y[1:], [c / 1e9 for c in caps.values()], color="#999999", height=0.6)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("memory (GB = 1e9 bytes)")
    ax.set_title(f"{left:,.0f} GB to train {wall.model.name} on one GPU, against what GPUs hold",
                 fontsize=9)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)


def plot_compute_wall(ax, wall: ComputeWall) -> None:
    """Training days against GPU count (perfect scaling), one line per distinct GPU peak."""
    counts = np.logspace(0, 14, 15, base=2)
    lines: dict[float, list[str]] = {}
    for g in GPUS.values():
        try:
            days = compute_wall(wall.model, wall.tokens, g, 1, wall.utilisation, wall.dtype).days
        except ValueError:  # e.g. bf16 on a V100
            continue
        lines.setdefault(days, []).append(g.name)
    for days, names in sorted(lines.items(), reverse=True):
        chosen = wall.gpu.name in names
        ax.loglog(counts, days / counts, lw=2.2 if chosen else 0.9, label="/".join(names))
    ax.minorticks_off()
    ax.plot([wall.n_gpus], [wall.days], "ko")
    ax.annotate(f"{wall.days:,.3g} days", (wall.n_gpus, wall.days), textcoords="offset points",
                xytext=(6, 6), fontsize=8)
    for label, days in (("1 month", 30), ("1 year", 365)):
        ax.axhline(days, color="grey", lw=0.6, ls=":")
        ax.text(1, days, label, fontsize=7, va="bottom")
    ax.set_xlabel("GPUs (perfect scaling)")
    ax.set_ylabel("training time (days)")
    ax.set_title(f"{wall.model.name} on {wall.tokens / 1e9:,.0f}B tokens at "
                 f"{wall.utilisation:.0%} of peak ({wall.dtype})", fontsize=9)
    ax.legend(fontsize=7)
