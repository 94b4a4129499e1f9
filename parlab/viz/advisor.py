"""Pictures of choosing a strategy (chapter 10): the technology stacks of guide 3.2 layer by layer,
the guide's decision tree of 3.3-3.5 with the advisor's verdict on each scenario at its leaf, and
the advisor's fastest plan of each layout for one setting."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from parlab.costmodel.answers.frameworks import LAYERS, STACKS
from parlab.costmodel.search.advisor import Advice, Scenario, Verdict, decision_branches, layout
from parlab.tables import plural

from .figures import new_figure

WRAP_CHARS = 22  # a layer's label in two lines within its box (9 pt, 7.6 in for the stacks)
LAYER_COLORS = ("#c6dbef", "#9ecae1", "#fdd0a2", "#fdae6b", "#c7e9c0", "#a1d99b")
AGREE, DISAGREE, OTHER, TIE = "#2b8a3e", "#c92a2a", "#868e96", "#e67700"


def stack_figure(stacks: dict[str, tuple[str, ...]] = STACKS, layers: Sequence[str] = LAYERS):
    """Guide 3.2's stacks side by side (``parlab.costmodel.answers.frameworks.STACKS``): one column per stack,
    one box per layer, accelerator at the bottom and launcher on top, colour by layer."""
    fig = new_figure(7.6, 3.3, left=0.2, right=0.99, bottom=0.03, top=0.9)
    ax = fig.add_subplot()
    names = list(stacks)
    for j, name in enumerate(names):
        for i, label in enumerate(stacks[name]):
            ax.add_patch(_box(j, i, LAYER_COLORS[i % len(LAYER_COLORS)]))
            ax.text(j + 0.5, i + 0.5, "\n".join(textwrap.wrap(label, WRAP_CHARS)) or label, ha="center",
                    va="center", fontsize=9)
        ax.text(j + 0.5, len(layers) + 0.15, name, ha="center", va="bottom", fontsize=10, weight="bold")
    ax.set_yticks([i + 0.5 for i in range(len(layers))], list(layers), fontsize=9)
    ax.set_xticks([])
    ax.set_xlim(0, len(names))
    ax.set_ylim(0, len(layers) + 0.7)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    return fig


def _box(x: float, y: float, color: str):
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch((x + 0.04, y + 0.06), 0.92, 0.88, boxstyle="round,pad=0,rounding_size=0.08",
                          facecolor=color, edgecolor="#555", linewidth=0.6)


def _short(s: Scenario, v: Verdict) -> tuple[str, str]:
    """(text, colour) of one scenario at its leaf."""
    best = v.advice.best
    head = f"{s.model} on {plural(s.n_gpus, 'GPU')}: {layout(best.plan)}"
    if v.agrees:
        return f"yes  {head}", AGREE
    if v.slowdown is None:
        return f"no   {head}; guide's kind does not fit", DISAGREE
    if v.tie:  # inside the model's band (validation.comparison_band): not a verdict against the guide
        return f"tie  {head}; guide's kind {v.slowdown:+.0%}", TIE
    return f"no   {head}; guide's kind {v.slowdown:+.0%}", DISAGREE


def decision_figure(results: Sequence[tuple[Scenario, Verdict]] = ()):
    """The guide's decision tree (``decision_branches``): questions from the left, the guide's advice
    at each leaf, and under it the advisor's fastest plan on every scenario of ``results`` that
    lands there (green where the guide's rule allows it, red where it does not)."""
    branches = decision_branches()
    at_leaf: dict[str, list[tuple[str, str]]] = {}
    for s, v in results:
        at_leaf.setdefault(v.rule.situation, []).append(_short(s, v))
    rows = [max(1, len(at_leaf.get(rule.situation, []))) + 1 for _, rule in branches]
    height = 0.9 + 0.17 * sum(rows)
    fig = new_figure(8.4, height, left=0.005, right=0.995, bottom=0.01, top=0.99)
    ax = fig.add_subplot()
    ax.set_axis_off()
    total = sum(rows)
    ax.set_xlim(0, 10)
    ax.set_ylim(total + 1, -0.5)
    xs = (0.0, 0.8, 2.15, 3.5)  # x of the root and of the answers at each depth
    ends = (0.55, 1.1, 1.3, 0.85)  # how far right of its x each label reaches
    leaf_x = 4.65
    ax.text(xs[0], total / 2, "GPUs?", fontsize=9, weight="bold", va="center")
    y, seen = 0.0, {}
    for (path, rule), n in zip(branches, rows, strict=True):
        leaf_y = y + 0.5
        for depth, answer in enumerate(path):
            key = path[:depth + 1]
            if key not in seen:
                seen[key] = leaf_y
                parent_y = seen.get(path[:depth], total / 2)
                ax.plot([xs[depth] + ends[depth], xs[depth + 1] - 0.05], [parent_y, leaf_y],
                        color="#adb5bd", lw=0.8)
                ax.text(xs[depth + 1], leaf_y, answer, fontsize=8.5, va="center")
        lx = leaf_x
        ax.plot([xs[len(path)] + ends[len(path)], lx - 0.05], [leaf_y, leaf_y], color="#adb5bd", lw=0.8)
        ax.text(lx, leaf_y, f"guide {rule.section}: {rule.says}", fontsize=9, va="center", weight="bold")
        for k, (text, color) in enumerate(at_leaf.get(rule.situation, [])):
            ax.text(lx + 0.15, leaf_y + 1 + k, text, fontsize=8.5, va="center", color=color)
        y += n
    return fig


def advice_figure(advice: Advice, verdict: Verdict, top: int = 6):
    """The fastest plan of each layout (``Advice.by_layout``), step time in seconds, green where the
    guide's rule for this setting allows the layout, grey where it does not; the advisor's pick on top."""
    plans = advice.by_layout()[:top]
    tall = 0.6 + 0.28 * len(plans)  # inches: the dashboard with its reasons fits 760 px at 1400x900
    fig = new_figure(6.4, tall, left=0.3, right=0.97, bottom=0.62 / tall, top=0.97)
    ax = fig.add_subplot()
    ys = range(len(plans))
    colors = [AGREE if verdict.rule.accepts(e.plan) else OTHER for e in plans]
    ax.barh(list(ys), [e.step_time for e in plans], color=colors, height=0.6)
    ax.set_yticks(list(ys), [layout(e.plan) for e in plans], fontsize=9)
    ax.invert_yaxis()
    for y, e in zip(ys, plans, strict=True):
        ax.text(e.step_time, y, f" {e.step_time:.2f} s", va="center", fontsize=8.5)
    ax.set_xlim(0, max(e.step_time for e in plans) * 1.25)
    ax.set_xlabel(f"step time (s); green: allowed by guide {verdict.rule.section} ({verdict.rule.says})", fontsize=9)
    ax.tick_params(labelsize=9)
    return fig
