"""Pipeline pictures: a Gantt chart of a simulated (or measured) timeline, and bubble vs m.

One row per stage (stage 0 on top), one box per op, coloured by kind the same way in every
figure of the course (F blue, B orange, W green), the micro-batch number in the box, model
chunks of an interleaved schedule told apart by hatching (chunk 0 plain), idle time left as the
grey row behind the boxes. All numbers come from
``parlab.schedules`` (``simulate``, ``bubble_curves``); this module only draws.
"""

from __future__ import annotations

from collections.abc import Iterable

from parlab.schedules import SCHEDULE_LABELS, Costs, Timeline, TradeoffRow, bubble_curves

from .figures import new_figure

COLORS = {"F": "#4c72b0", "B": "#dd8452", "W": "#55a868"}
KIND_NAMES = {"F": "forward", "B": "backward", "W": "weight gradient"}
SCHEDULE_COLORS = {"naive": "#7f7f7f", "gpipe": "#c44e52", "1f1b": "#4c72b0",
                   "interleaved": "#8172b3", "zb-h1": "#55a868", "zb-v": "#64b5cd",
                   "dualpipe": "#ccb974", "dualpipe-v": "#8c613c"}
TRADEOFF_COLORS = {"GPipe": SCHEDULE_COLORS["gpipe"], "PipeDream-Flush (1F1B)": SCHEDULE_COLORS["1f1b"],
                   "PipeDream": "#937860", "PipeDream-2BW": "#da8bc3"}
IDLE = "#e8e8e8"
FONT = 9  # points: the course's smallest label
ROW = 0.8  # box height, in row units
PAD = 3  # CSS px a box needs beside its label
HATCHES = (None, "//", "\\\\", "||", "--", "xx")  # chunk c: HATCHES[c % 6]


def plot_gantt(ax, timeline: Timeline, title: str | None = None, unit: str = "time") -> list:
    """Draw ``timeline`` on ``ax``; returns the op boxes (one Rectangle per op, in stage order).

    A box's label is drawn when it fits at 9 pt; ``unit`` names the x axis (e.g. "ms").
    """
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.patheffects import Normal, Stroke

    sched, end = timeline.schedule, float(timeline.makespan)
    p = sched.p
    ax.set_xlim(0, end or 1)
    ax.set_ylim(p - 0.5, -0.5)
    px_per_unit = _axes_width_px(ax) / end if end else 0.0
    digit_px = _digit_px(ax.figure.dpi)
    boxes = []
    for s, spans in enumerate(timeline.spans):
        ax.add_patch(Rectangle((0, s - ROW / 2), end, ROW, facecolor=IDLE, edgecolor="none"))
        for op, t0, t1 in spans:
            x, w = float(t0), float(t1 - t0)
            box = Rectangle((x, s - ROW / 2), w, ROW, facecolor=COLORS[op.kind], edgecolor="white",
                            linewidth=0.8, hatch=HATCHES[op.chunk % len(HATCHES)],
                            gid=f"{s}:{op.label(sched.v)}")
            ax.add_patch(box)
            boxes.append(box)
            text = str(op.microbatch)
            hatched = HATCHES[op.chunk % len(HATCHES)] is not None
            if w * px_per_unit >= digit_px * (len(text) + hatched) + PAD:
                # on a hatched chunk the digit sits on a patch of plain colour, clear of the lines
                ax.text(x + w / 2, s, text, ha="center", va="center", fontsize=FONT, color="white",
                        path_effects=[Stroke(linewidth=2.5, foreground=COLORS[op.kind]), Normal()],
                        bbox={"boxstyle": "square,pad=0.12", "facecolor": COLORS[op.kind],
                              "edgecolor": "none"} if hatched else None)
    ax.set_yticks(range(p), [f"stage {s}" for s in range(p)], fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.set_xlabel(unit, fontsize=FONT)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    kinds = [k for k in ("F", "B", "W") if any(op.kind == k for ops in sched.stages for op in ops)]
    names = dict(KIND_NAMES, B="backward (input grad)" if "W" in kinds else "backward")
    handles = [Patch(facecolor=COLORS[k], label=names[k]) for k in kinds]
    handles += [Patch(facecolor="#999999", edgecolor="white", hatch=HATCHES[c % len(HATCHES)],
                      label=chunk_label(sched, c)) for c in range(sched.v if sched.v > 1 else 0)]
    handles.append(Patch(facecolor=IDLE, label="idle"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(handles),
              fontsize=FONT, frameon=False, borderaxespad=0.2, handlelength=1.2,
              handletextpad=0.4, columnspacing=1.0)
    head = title if title is not None else sched.name
    ax.set_title(f"{head}: p={p}, m={sched.m}, bubble {float(timeline.bubble_fraction):.1%}",
                 fontsize=FONT + 1, loc="left", pad=22)
    return boxes


def chunk_label(sched, c: int) -> str:
    """The legend's name of chunk c: where it runs for the V and DualPipe placements."""
    p = sched.p
    ways = {"v": ("down", "back up"), "dual": (f"rank 0\u2192{p - 1}", f"rank {p - 1}\u21920")}
    return f"chunk {c}" + (f" ({ways[sched.placement][c]})" if sched.placement in ways else "")


def _digit_px(dpi: float) -> float:
    """CSS px of one digit at ``FONT`` points (a digit is ~0.6 em wide)."""
    return 0.6 * FONT * dpi / 72


def _axes_width_px(ax) -> float:
    """Width of ``ax`` in CSS pixels at the figure's natural size."""
    fig = ax.figure
    return ax.get_position().width * fig.get_size_inches()[0] * fig.dpi


def gantt_figure(timeline: Timeline, width: float | None = None, title: str | None = None,
                 unit: str = "time"):
    """A Figure with the Gantt chart of ``timeline``, 0.42 inch per stage (natural size).

    ``width`` (inches) defaults to 6.4, widened up to 9.6 so the narrowest box fits its label.
    """
    p = timeline.schedule.p
    left, right = 0.8, 0.13  # inches
    if width is None:
        shortest = min((float(t1 - t0) for spans in timeline.spans for _, t0, t1 in spans
                        if t1 > t0), default=0.0)
        digits = len(str(timeline.schedule.m - 1))
        px = 1.05 * (_digit_px(100) * digits + PAD) / shortest * float(timeline.makespan) if shortest else 0
        width = min(max(6.4, px / 100 + left + right), 9.6)
    height = 1.25 + 0.42 * p
    fig = new_figure(width, height, left=left / width, right=1 - right / width,
                     bottom=0.55 / height, top=1 - 0.62 / height)
    plot_gantt(fig.add_subplot(), timeline, title, unit)
    return fig


def plot_bubble_vs_m(ax, p: int, ms: Iterable[int], v: int = 2, costs: Costs | None = None,
                     names: Iterable[str] = ("gpipe", "1f1b", "interleaved", "zb-h1")) -> dict:
    """Simulated bubble fraction against micro-batches m, one line per schedule; returns the
    curves (``parlab.schedules.bubble_curves``) it drew."""
    curves = bubble_curves(p, ms, v, costs, names)
    dashes = {"1f1b": (0, (4, 2))}  # 1F1B lies on GPipe's curve: dash it so both show
    for name, points in curves.items():
        label = SCHEDULE_LABELS[name] + (f" (v={v})" if name == "interleaved" else "")
        ax.plot([m for m, _ in points], [100 * float(b) for _, b in points], marker="o", ms=3.5,
                color=SCHEDULE_COLORS[name], ls=dashes.get(name, "-"), label=label)
    ax.set_xlabel("micro-batches per step (m)", fontsize=FONT)
    ax.set_ylabel("bubble (% of stage time)", fontsize=FONT)
    ax.tick_params(labelsize=FONT)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=FONT, frameon=False)
    ax.set_title(f"pipeline bubble vs m, p={p} stages (simulated, equal costs)", fontsize=FONT + 1,
                 loc="left")
    return curves


def bubble_figure(p: int, ms: Iterable[int], v: int = 2, costs: Costs | None = None,
                  width: float = 6.0, height: float = 3.4,
                  names: Iterable[str] = ("gpipe", "1f1b", "interleaved", "zb-h1")):
    """A Figure with ``plot_bubble_vs_m`` (``names``: the schedules drawn)."""
    fig = new_figure(width, height, left=0.11, right=0.97, bottom=0.15, top=0.9)
    plot_bubble_vs_m(fig.add_subplot(), p, ms, v, costs, names)
    return fig


def tradeoff_figure(rows: list[TradeoffRow], title: str = "", width: float = 7.6,
                    height: float = 2.3):
    """The memory / throughput / staleness trade-off (``parlab.schedules.tradeoff``) as four
    small bar panels, one bar per schedule."""
    from matplotlib.ticker import MaxNLocator

    panels = [("activations", "activations\n(micro-batches)", float),
              ("weight_versions", "weight versions", int),
              ("staleness", "staleness (steps)", int),
              ("bubble_fraction", "bubble (%)", lambda b: 100 * float(b))]
    fig = new_figure(width, height, left=1.8 / width, right=0.98, bottom=0.13,
                     top=0.72 if title else 0.8, wspace=0.25)
    if title:
        fig.suptitle(title, fontsize=FONT + 1, x=0.01, ha="left")
    names = [r.name for r in rows]
    for i, (field, label, conv) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        values = [conv(getattr(r, field)) for r in rows]
        ax.barh(range(len(rows)), values, color=[TRADEOFF_COLORS.get(n, "#7f7f7f") for n in names])
        ax.set_yticks(range(len(rows)), names if i == 0 else [""] * len(rows), fontsize=FONT)
        ax.invert_yaxis()
        ax.set_title(label, fontsize=FONT)
        ax.tick_params(axis="x", labelsize=FONT)
        for y, x in enumerate(values):
            ax.text(x, y, f" {x:.3g}", va="center", fontsize=FONT)
        ax.set_xlim(0, 1.55 * max(values + [1e-9]))
        ax.xaxis.set_major_locator(MaxNLocator(4, integer=conv is int))
    return fig
