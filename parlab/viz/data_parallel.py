"""Figures of data parallelism: a per-rank timeline of a measured DDP step, and the three
curves of guide 1.5 (overlap, bucket size, rank count with and without accumulation), the
measurement beside the cost model's prediction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .figures import log_ticks, new_figure

COLORS = {"forward": "#4c78a8", "backward": "#f58518", "comm": "#54a24b", "optimizer": "#b279a2"}
SERIES = ("#4c78a8", "#e45756", "#54a24b", "#b279a2")

Curve = tuple[Sequence[float], Sequence[float]]


def _kind(label) -> str:
    return label[0] if isinstance(label, tuple) else str(label)


def timeline_figure(per_rank: Sequence[Sequence[tuple]], unit: float = 1e-3, title: str = ""):
    """One row per rank, time on x (``unit`` seconds per tick label: ms by default): forward,
    backward and optimizer spans on the upper lane, each bucket's all-reduce (label
    ``("comm", bucket)``) on the lower lane, so overlap with backward shows as stacked bars.
    ``per_rank``: each rank's ``(label, start, end)`` spans on a common axis (``align``)."""
    n = len(per_rank)
    height = 0.9 + 0.55 * n  # inches; 0.45 in above the axes hold the legend, then the title
    fig = new_figure(6.4, height, left=0.1, bottom=0.3 if n < 3 else 0.2, top=1 - 0.45 / height)
    ax = fig.add_subplot()
    seen = set()
    for r, spans in enumerate(per_rank):
        for label, t0, t1 in spans:
            kind = _kind(label)
            lane = 0.0 if kind == "comm" else 0.42
            ax.barh(n - 1 - r + lane - 0.2, (t1 - t0) / unit, left=t0 / unit, height=0.38,
                    color=COLORS.get(kind, "#999"), edgecolor="white", linewidth=0.4,
                    label=kind if kind not in seen else None)
            seen.add(kind)
    ax.set_yticks([n - 1 - r for r in range(n)], [f"rank {r}" for r in range(n)])
    ax.set_xlabel("time (ms)" if unit == 1e-3 else f"time (x {unit:g} s)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False, fontsize=8,
              borderaxespad=0.2)
    if title:  # above the legend, never over it
        fig.suptitle(title, fontsize=9, y=1 - 0.04 / height, va="top")
    return fig


def curves_figure(xlabel: str, ylabel: str, measured: Mapping[str, Curve],
                  modelled: Mapping[str, Curve], model_ylabel: str = "", xlog: bool = False,
                  titles: tuple[str, str] = ("measured here (CPU processes)", "cost model")):
    """Two panels with the same series: left what was measured here, right the cost model's
    prediction for a real model on real links (the same colour means the same series)."""
    fig = new_figure(7.2, 2.8, left=0.09, right=0.98, bottom=0.2, top=0.88, wspace=0.32)
    for k, (curves, title, yl) in enumerate(((measured, titles[0], ylabel),
                                             (modelled, titles[1], model_ylabel or ylabel))):
        ax = fig.add_subplot(1, 2, k + 1)
        for i, (name, (xs, ys)) in enumerate(curves.items()):
            ax.plot(list(xs), list(ys), marker="o", markersize=3, color=SERIES[i % len(SERIES)],
                    label=name)
        if xlog:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(yl, fontsize=9)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, frameon=False)
    return fig


def step_terms_figure(rows: Sequence[tuple[str, float, float, float]], marker: float | None = None,
                      curve: Curve | None = None):
    """Left: stacked bars of (label, compute s, hidden comm s, exposed comm s) per schedule;
    right (``curve``): step time vs bucket size in MiB, both axes log (the U of too-small and
    too-large buckets stays visible when the smallest costs 100x), the chosen size marked."""
    fig = new_figure(7.2, 2.6, left=0.13, right=0.98, bottom=0.2, top=0.84, wspace=0.35)
    ax = fig.add_subplot(1, 2 if curve else 1, 1)
    labels = [r[0] for r in rows]
    compute = [r[1] * 1e3 for r in rows]
    exposed = [r[3] * 1e3 for r in rows]
    ax.barh(labels, compute, color=COLORS["backward"], label="compute")
    ax.barh(labels, exposed, left=compute, color=COLORS["comm"], label="exposed all-reduce")
    ax.set_xlabel("ms per step", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, 1.2), ncol=2)
    if curve:
        bx = fig.add_subplot(1, 2, 2)
        xs, ys = curve
        bx.plot(list(xs), [y * 1e3 for y in ys], marker="o", markersize=3, color=SERIES[0])
        if marker is not None:
            bx.axvline(marker, color="#888", linestyle=":", linewidth=1)
        bx.set_xscale("log")
        bx.set_yscale("log")  # tiny buckets cost 10-100x: a linear axis flattens the U
        log_ticks(bx.yaxis)
        bx.set_xlabel("bucket size (MiB)", fontsize=9)
        bx.set_ylabel("step (ms, log)", fontsize=9)
        bx.tick_params(labelsize=8)
    return fig
