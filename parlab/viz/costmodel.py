"""Pictures of the cost model: one plan's memory and time by term, memory vs DP size per ZeRO
stage, ZeRO-3 vs 3D as GPUs grow, communication vs bandwidth, and predicted vs measured."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from parlab.costmodel.answers.scenarios import ScalingPoint
from parlab.costmodel.answers.validation import MegatronRow
from parlab.costmodel.plan.estimate import Estimate

MEMORY_COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer states": "#c44e52",
                 "activations": "#8172b3", "buffers + fragmentation (allowance)": "#aaaaaa"}
TIME_COLORS = {"compute: matmuls": "#4c72b0", "compute: elementwise": "#64b5cd",
               "TP communication": "#dd8452", "PP communication": "#ccb974", "pipeline bubble": "#c44e52",
               "DP/ZeRO communication (exposed)": "#55a868", "optimizer step": "#8172b3",
               "offload transfers": "#937860", "CP communication (exposed)": "#da8bc3", "EP all-to-all": "#8c8c3c"}
ZERO_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]


def stacked_bar(ax, terms: dict[str, float], colors: dict[str, str], scale: float,
                y: float = 0, height: float = 0.5) -> float:
    """One horizontal bar at ``y`` stacking the positive ``terms`` (divided by ``scale``), each
    labelled for the legend; returns the bar's length."""
    left = 0.0
    for name, value in terms.items():
        if value > 0:
            ax.barh(y, value / scale, left=left, color=colors[name], label=name, height=height)
            left += value / scale
    return left


def plot_memory_breakdown(ax, est: Estimate) -> None:
    """One stacked bar (GB) of the most loaded GPU's memory, with the GPU's capacity as a line."""
    total = stacked_bar(ax, est.memory_terms(), MEMORY_COLORS, 1e9)
    ax.set_yticks([])
    cap = est.memory_capacity / 1e9
    ax.axvline(cap, color="black", lw=1.2, ls="--")
    ax.text(cap, 0, f" {est.cluster.gpu.name}\n {cap:.0f} GB", fontsize=9, va="center")
    ax.set_xlim(0, max(total, cap) * 1.3)
    ax.set_xlabel("memory per GPU (GB = 1e9 bytes)", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.set_title(f"memory of the most loaded GPU: {total:,.1f} GB "
                 f"({'fits' if est.fits else 'does not fit'})", fontsize=9)
    ax.legend(loc="center left", fontsize=9, bbox_to_anchor=(1.01, 0.5), frameon=False)


def plot_time_breakdown(ax, est: Estimate) -> None:
    """One stacked bar (seconds) of the step time by term."""
    total = stacked_bar(ax, est.time_terms(), TIME_COLORS, 1.0)
    ax.set_yticks([])
    ax.set_xlim(0, total * 1.15)
    ax.set_xlabel("time per step (s)", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.set_title(f"step time {total:,.3g} s, MFU {est.mfu:.0%}", fontsize=9)
    ax.legend(loc="center left", fontsize=9, bbox_to_anchor=(1.01, 0.5), frameon=False)


def plan_figure(est: Estimate):
    """The two bars of a plan, memory above time: the PlanDashboard's picture."""
    from parlab.viz.figures import new_figure

    fig = new_figure(7.5, 2.9, left=0.03, right=0.6, bottom=0.15, top=0.92, hspace=1.1)
    plot_memory_breakdown(fig.add_subplot(2, 1, 1), est)
    plot_time_breakdown(fig.add_subplot(2, 1, 2), est)
    return fig


def plot_memory_vs_dp(ax, series: dict[int, list[Estimate]], dp_sizes: Sequence[int]) -> None:
    """Memory per GPU (GB) against the data-parallel size, one line per ZeRO stage."""
    for stage, ests in series.items():
        ax.plot(dp_sizes, [e.memory_total / 1e9 for e in ests], "o-", ms=3, color=ZERO_COLORS[stage],
                label=f"ZeRO-{stage}")
    cap = next(iter(series.values()))[0].memory_capacity / 1e9
    ax.axhline(cap, color="black", lw=0.8, ls="--")
    ax.text(dp_sizes[0], cap, " GPU memory", fontsize=9, va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(dp_sizes), [str(d) for d in dp_sizes])
    ax.set_yscale("log")
    ax.set_xlabel("data-parallel GPUs")
    ax.set_ylabel("memory per GPU (GB)")
    ax.legend(fontsize=9)


def plot_zero3_vs_3d(ax, points: Sequence[ScalingPoint]) -> None:
    """Model TFLOP/s per GPU against GPU count: the best ZeRO-3 plan and the best 3D plan."""
    for attr, label, color in (("zero3", "ZeRO-3 (tp = pp = 1)", "#c44e52"), ("three_d", "3D (TP+PP+DP)", "#4c72b0")):
        xs = [p.gpus for p in points if getattr(p, attr) is not None]
        ys = [getattr(p, attr).model_tflops_per_gpu for p in points if getattr(p, attr) is not None]
        ax.plot(xs, ys, "o-", ms=3, color=color, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks([p.gpus for p in points], [str(p.gpus) for p in points])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("GPUs (global batch fixed)")
    ax.set_ylabel("model TFLOP/s per GPU")
    ax.legend(fontsize=9, loc="lower right")


def plot_comm_vs_bandwidth(ax, gbits: Sequence[float], seconds: Sequence[float], label: str = "") -> None:
    """Seconds of a collective against network speed (Gb/s), both on log axes."""
    ax.loglog(gbits, seconds, "o-", ms=3, label=label or None)
    ax.minorticks_off()
    ax.set_xticks(list(gbits), [f"{g:g}" for g in gbits])
    ax.set_xlabel("network speed per node (Gb/s)")
    ax.set_ylabel("time (s)")
    if label:
        ax.legend(fontsize=9)


def plot_validation(ax, rows: Sequence[MegatronRow]) -> None:
    """Predicted against measured TFLOP/s per GPU for Megatron-LM 2021 Table 1, with a +-15% band."""
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r.measured for r in rows], 0.4, color="#999999", label="measured (Table 1)")
    ax.bar(x + 0.2, [r.predicted for r in rows], 0.4, color="#4c72b0", label="predicted")
    ax.fill_between(x, [0.85 * r.measured for r in rows], [1.15 * r.measured for r in rows],
                    color="#55a868", alpha=0.15, step="mid", label="measured +-15%")
    ax.set_xticks(x, [f"{r.params_b:g}B" for r in rows], fontsize=9)  # unrotated: the x label fits
    ax.set_ylabel("TFLOP/s per GPU")
    ax.set_xlabel("model (Megatron-LM 2021, Table 1)")
    ax.set_ylim(0, 1.4 * max(r.measured for r in rows))
    ax.legend(fontsize=9, loc="upper left", ncol=3, frameon=False)


def family(est: Estimate) -> str:
    """How a plan splits the model: 'ZeRO-3', '3D', 'PP + DP', 'TP + DP' or 'DP only'."""
    p = est.plan
    if p.zero == 3:
        return "ZeRO-3"
    if p.tp > 1 and p.pp > 1:
        return "3D"
    if p.pp > 1:
        return "PP + DP"
    return "TP + DP" if p.tp > 1 else "DP only"


FAMILY_COLORS = {"ZeRO-3": "#c44e52", "3D": "#4c72b0", "PP + DP": "#ccb974", "TP + DP": "#dd8452",
                 "DP only": "#55a868"}


def plot_search(ax, ranked: Sequence[Estimate]) -> None:
    """Every fitting plan as a dot: step time (s) against memory per GPU (GB), by family; the
    fastest circled. The legend sits right of the axes (leave ~25% of the figure for it)."""
    for name, color in FAMILY_COLORS.items():
        pts = [(e.memory_total / 1e9, e.step_time) for e in ranked if family(e) == name]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, s=6, color=color, label=f"{name} ({len(pts)})", alpha=0.7)
    if ranked:
        best = ranked[0]
        ax.scatter([best.memory_total / 1e9], [best.step_time], s=80, facecolors="none", edgecolors="black")
        ax.set_yscale("log")
    ax.set_xlabel("memory per GPU (GB)")
    ax.set_ylabel("step time (s)")
    ax.legend(fontsize=9, markerscale=2, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


def png(fig):
    """A notebook-displayable picture of a Figure built with ``new_figure``: rendered at 2x,
    shown at its natural width (``parlab.viz.figures.figure_image``; no pyplot needed)."""
    from parlab.viz.figures import figure_image

    return figure_image(fig)
