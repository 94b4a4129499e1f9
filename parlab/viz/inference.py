"""Figures of chapter 11: answer time vs answer length (the guide's measurements beside the decode
model, and the residuals), where one answer's time goes, and epoch time vs the number of nodes.
Every number comes in computed; these functions only draw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .figures import new_figure

GPU_COLORS = {"a800": "#4c78a8", "v100": "#e45756", "a100": "#54a24b", "h100": "#b279a2", "h200": "#f58518"}
TERM_COLORS = {"prefill": "#bab0ac", "weights read": "#4c78a8", "KV cache read": "#72b7b2",
               "per-token overhead": "#f58518"}
LINK_COLORS = ("#e45756", "#4c78a8", "#54a24b", "#b279a2")
FONT = 9

Points = Sequence[tuple[float, float]]


def _color(gpu: str) -> str:
    return GPU_COLORS.get(gpu.split("-")[0], "#555555")


def plot_latency(ax, measured: Mapping[str, Points], modelled: Mapping[str, Points],
                 marker: tuple[float, float] | None = None) -> None:
    """Seconds per answer vs answer characters: measured points and modelled lines, one colour per GPU."""
    for gpu, pts in modelled.items():
        ax.plot([x for x, _ in pts], [y for _, y in pts], color=_color(gpu), lw=1.5, label=f"{gpu} model")
    for gpu, pts in measured.items():
        ax.plot([x for x, _ in pts], [y for _, y in pts], "o", color=_color(gpu), ms=4, mfc="none",
                label=f"{gpu} guide 4.1")
    if marker is not None:
        ax.plot([marker[0]], [marker[1]], "*", color="black", ms=9, label="this setting")
    ax.set_xlabel("answer length (characters)", fontsize=FONT)
    ax.set_ylabel("seconds per answer", fontsize=FONT)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, frameon=False, loc="upper left")


def latency_figure(measured: Mapping[str, Points], modelled: Mapping[str, Points],
                   residuals: Mapping[str, Points], title: str = ""):
    """Left: answer time vs length, guide 4.1's points beside the fitted model; right: the residuals
    (measured minus model, seconds) vs length."""
    fig = new_figure(7.4, 2.9, left=0.08, right=0.98, bottom=0.17, top=0.88, wspace=0.3)
    ax = fig.add_subplot(1, 2, 1)
    plot_latency(ax, measured, modelled)
    if title:
        ax.set_title(title, fontsize=FONT)
    ax2 = fig.add_subplot(1, 2, 2)
    for gpu, pts in residuals.items():
        ax2.plot([x for x, _ in pts], [y for _, y in pts], "o", color=_color(gpu), ms=4, label=gpu)
    ax2.axhline(0, color="#888888", lw=0.8)
    ax2.set_xlabel("answer length (characters)", fontsize=FONT)
    ax2.set_ylabel("measured - model (s)", fontsize=FONT)
    ax2.set_title("residuals", fontsize=FONT)
    ax2.tick_params(labelsize=8)
    ax2.legend(fontsize=7, frameon=False)
    return fig


def plot_terms(ax, terms: Mapping[str, float]) -> None:
    """One horizontal stacked bar: where an answer's seconds go."""
    left = 0.0
    for name, value in terms.items():
        ax.barh([0], [value], left=left, color=TERM_COLORS.get(name, "#999999"), label=name, height=0.5)
        left += value
    ax.set_yticks([])
    ax.set_xlabel("seconds", fontsize=FONT)
    ax.set_title("where this answer's time goes", fontsize=FONT)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, frameon=False, loc="upper left", ncol=2)


def answer_figure(measured: Mapping[str, Points], modelled: Mapping[str, Points], marker: tuple[float, float],
                  terms: Mapping[str, float]):
    """The inference dashboard's picture: time vs length (left), the chosen answer's terms (right)."""
    fig = new_figure(7.4, 2.7, left=0.08, right=0.98, bottom=0.18, top=0.9, wspace=0.25)
    grid = fig.add_gridspec(1, 2, width_ratios=(1.4, 1))
    plot_latency(fig.add_subplot(grid[0, 0]), measured, modelled, marker)
    ax = fig.add_subplot(grid[0, 1])
    plot_terms(ax, terms)
    ax.set_ylim(-0.4, 1.2)
    return fig


def scaling_figure(nodes: Sequence[int], hours: Mapping[str, Sequence[float]], ideal: Sequence[float],
                   title: str = ""):
    """Epoch time vs nodes for each inter-node link, with the ideal 1/nodes line from one node."""
    fig = new_figure(5.6, 3.0, left=0.12, right=0.97, bottom=0.16, top=0.88)
    ax = fig.add_subplot()
    ax.plot(list(nodes), list(ideal), "--", color="#888888", lw=1, label="linear (1 node / nodes)")
    for i, (label, ys) in enumerate(hours.items()):
        ax.plot(list(nodes), list(ys), "o-", color=LINK_COLORS[i % len(LINK_COLORS)], ms=4, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(list(nodes), [str(n) for n in nodes])
    values = [y for ys in (*hours.values(), ideal) for y in ys]
    ticks = [2.0**k for k in range(-12, 12) if min(values) / 1.5 <= 2.0**k <= max(values) * 1.5]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("nodes (8 GPUs each)", fontsize=FONT)
    ax.set_ylabel("hours per epoch", fontsize=FONT)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=FONT)
    return fig
