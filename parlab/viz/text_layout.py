"""Is every label of a figure readable? Text outside the canvas and labels drawn over each other,
found from matplotlib's own text extents (``Artist.get_window_extent`` after a draw).

    problems = layout_problems(fig)   # [] when every label is inside the canvas and apart

The labels are the figure's texts, every axes' titles, axis labels, drawn tick labels and texts
(annotations included), and each legend as one box (its frame: a title over a legend is an
overlap even between its rows). A text written on a box of its axes (a rectangle or rounded box
under its centre: a Gantt cell, a layer of a stack) must also stay inside the smallest such box. ``render_png`` runs this check on every figure it renders when
the environment sets ``PARLAB_CHECK_FIGURES=1`` (the test suite does), so every figure of every
chapter and dashboard is held to it.
"""

from __future__ import annotations

from collections.abc import Iterator

TOLERANCE_PX = 1.0  # CSS px: a box may touch the edge or a neighbour by this much


def _visible(artist) -> bool:
    return artist.get_visible() and (not hasattr(artist, "get_text") or artist.get_text().strip() != "")


def _drawn_ticks(axis):
    try:  # the ticks inside the view (what draw() draws); a private helper of matplotlib's Axis
        return axis._update_ticks()
    except AttributeError:
        return axis.get_major_ticks()


def labels(fig) -> Iterator[tuple[str, object]]:
    """(name, artist) of every label of ``fig`` that is drawn."""
    for t in fig.texts:
        yield f"figure text {t.get_text()!r}", t
    for i, legend in enumerate(fig.legends):
        yield f"figure legend {i}", legend
    for n, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        name = f"axes {n}"
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if t is not None:
                yield f"{name} title {t.get_text()!r}", t
        if ax.axison:
            for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                yield f"{name} {which} label {axis.label.get_text()!r}", axis.label
                for tick in _drawn_ticks(axis):
                    for lab in (tick.label1, tick.label2):
                        if tick.get_visible() and lab.get_visible():
                            yield f"{name} {which} tick {lab.get_text()!r}", lab
        for t in ax.texts:
            yield f"{name} text {t.get_text()!r}", t
        legend = ax.get_legend()
        if legend is not None:
            yield f"{name} legend", legend


def boxes(fig) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(name, (x0, y0, x1, y1) in CSS px) of every drawn label of ``fig`` (after a draw)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    px = 100.0 / fig.dpi  # CSS px per device px at the figure's dpi (new_figure: 100 dpi)
    found = []
    for name, artist in labels(fig):
        if not _visible(artist):
            continue
        b = artist.get_window_extent(renderer)
        if b.width > 0 and b.height > 0:
            found.append((name, (b.x0 * px, b.y0 * px, b.x1 * px, b.y1 * px)))
    return found


def _spills(fig, renderer) -> list[str]:
    """Texts drawn on a box (a patch under the text's centre) that reach out of the smallest one."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    px, tol, out = 100.0 / fig.dpi, TOLERANCE_PX, []
    for n, ax in enumerate(fig.axes):
        shapes = [p.get_window_extent(renderer) for p in ax.patches
                  if isinstance(p, (Rectangle, FancyBboxPatch)) and p.get_visible()]
        for t in ax.texts:
            if not _visible(t):
                continue
            b = t.get_window_extent(renderer)
            cx, cy = (b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2
            under = [s for s in shapes if s.x0 <= cx <= s.x1 and s.y0 <= cy <= s.y1]
            if not under:
                continue
            box = min(under, key=lambda s: s.width * s.height)
            over = max(box.x0 - b.x0, b.x1 - box.x1, box.y0 - b.y0, b.y1 - box.y1) * px
            if over > tol:
                out.append(f"axes {n} text {t.get_text()!r} spills {over:.0f} px out of its box")
    return out


def layout_problems(fig) -> list[str]:
    """One line per label that lies (partly) outside the canvas and per pair of labels that
    overlap; [] when every label can be read."""
    w, h = fig.get_size_inches() * 100.0
    found = boxes(fig)
    tol = TOLERANCE_PX
    problems = [f"{name} lies outside the {w:.0f}x{h:.0f} px canvas"
                for name, (x0, y0, x1, y1) in found
                if x0 < -tol or y0 < -tol or x1 > w + tol or y1 > h + tol]
    for i, (a, (ax0, ay0, ax1, ay1)) in enumerate(found):
        for b, (bx0, by0, bx1, by1) in found[i + 1:]:
            if min(ax1, bx1) - max(ax0, bx0) > tol and min(ay1, by1) - max(ay0, by0) > tol:
                problems.append(f"{a} overlaps {b}")
    return problems + _spills(fig, fig.canvas.get_renderer())
