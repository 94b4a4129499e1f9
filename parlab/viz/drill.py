"""The interview drill's picture: questions in the pool by guide section, and the answers scored so far."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .figures import new_figure

FONT = 9
COLORS = {"pool": "#d9d9d9", "correct": "#55a868", "wrong": "#c44e52"}


def drill_figure(pool: Mapping[str, int], by_section: Mapping[str, Sequence[int]], width: float = 8.0,
                 height: float = 1.9):
    """A Figure with one slot per guide section that has questions in ``pool`` (section -> count,
    in guide order) or answers in ``by_section`` (section -> [correct, answered], as
    ``parlab.drill.Score.by_section``): a grey bar for the questions in the pool, and inside it
    the answers so far, correct (green) stacked under wrong (red)."""
    sections = [s for s in pool if pool[s] or s in by_section]
    sections += [s for s in by_section if s not in sections]
    fig = new_figure(width, height, left=0.07, right=0.99, bottom=0.3, top=0.86)
    ax = fig.add_subplot()
    x = range(len(sections))
    counts = [pool.get(s, 0) for s in sections]
    right = [by_section.get(s, (0, 0))[0] for s in sections]
    wrong = [by_section.get(s, (0, 0))[1] - by_section.get(s, (0, 0))[0] for s in sections]
    ax.bar(x, counts, width=0.8, color=COLORS["pool"], label="questions in the pool")
    ax.bar(x, right, width=0.45, color=COLORS["correct"], label="answered right")
    ax.bar(x, wrong, width=0.45, bottom=right, color=COLORS["wrong"], label="answered wrong")
    ax.set_xticks(list(x), sections, rotation=90 if len(sections) > 12 else 0, fontsize=FONT)
    ax.set_xlim(-0.6, max(len(sections), 6) - 0.4)
    top = max([1, *counts, *(r + w for r, w in zip(right, wrong, strict=True))])
    ax.set_ylim(0, top * 1.15)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(axis="y", labelsize=FONT)
    ax.set_ylabel("questions", fontsize=FONT)
    ax.set_title("questions by guide section: the pool (grey), your answers (green right, red wrong)",
                 fontsize=FONT, loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig
