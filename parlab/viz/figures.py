"""Figures of the course: how they are made, rendered and shown (no pyplot, no global state).

Every picture in parlab is a matplotlib ``Figure`` from ``new_figure`` (sized in inches at 100 dpi,
so a 6-inch figure is 600 CSS pixels wide: its *natural width*). It is rendered at 2x pixel
density (``render_png``) and shown at its natural width (``show_figure``, ``FigureImage``), so it
is crisp on any screen and never stretched to the cell: a PNG scaled up to a 1160 px cell is
blurry and pushes the table below the fold.

    fig = new_figure(6, 3)                  # 600 x 300 CSS px
    fig.add_subplot().plot([1, 2], [3, 4])
    show_figure(fig)                        # in a notebook: a 1200 x 600 px PNG shown at 600 px

Dashboards (``parlab.widgets``) use the same three functions; ``parlab.widgets`` imports ``viz``,
never the other way round.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

DPI = 100  # CSS pixels per figure inch: new_figure(6, 3) is 600 x 300 px at its natural size
SCALE = 2  # device pixels per CSS pixel in every PNG the course renders (crisp on HiDPI screens)


def new_figure(width: float = 6.0, height: float = 3.2, **margins: float):
    """A matplotlib Figure of ``width`` x ``height`` inches (100 CSS px per inch), not registered
    with pyplot.

    Margins are fixed (``left``, ``right``, ``bottom``, ``top``, ``wspace``, ``hspace`` as in
    ``Figure.subplots_adjust``) rather than computed by a layout engine: constrained layout
    costs 3-4x the drawing itself, and a dashboard redraws on every change.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.subplots_adjust(**{"left": 0.1, "right": 0.97, "bottom": 0.16, "top": 0.9, **margins})
    return fig


def log_ticks(axis) -> None:
    """Plain-number ticks at 1, 2 and 5 of each decade on a log axis, no minor labels: a range
    under one decade otherwise shows one tick, or labels its minor ticks over each other."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.4g}"))
    axis.set_minor_formatter(NullFormatter())


def natural_size(fig) -> tuple[int, int]:
    """(width, height) of ``fig`` in CSS pixels: its size in inches times its dpi."""
    w, h = fig.get_size_inches()
    return round(w * fig.dpi), round(h * fig.dpi)


def render_png(fig, scale: float = SCALE) -> bytes:
    """PNG bytes of a matplotlib Figure at ``scale`` device pixels per CSS pixel (default 2:
    a 600 px-wide figure becomes a 1200 px-wide PNG). Agg canvas; no pyplot, no global state;
    the same figure always gives the same bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    canvas = FigureCanvasAgg(fig)
    buf = io.BytesIO()
    canvas.print_figure(buf, format="png", dpi=fig.dpi * scale, metadata={"Software": None})
    return buf.getvalue()


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels read from a PNG's IHDR header."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG (no IHDR header)")
    return struct.unpack(">II", data[16:24])


@dataclass(frozen=True)
class FigureImage:
    """A rendered figure that a notebook shows crisp at its natural CSS width.

    ``png`` is rendered at ``scale`` x; ``width`` and ``height`` are the natural CSS size. In a
    notebook its output is an ``image/png`` with ``width``/``height`` metadata (JupyterLab,
    nbviewer and GitHub all honour it), so the picture is never stretched to the cell.
    ``text`` is the plain-text form of the output (what nbval compares; no bytes in it).
    """

    png: bytes
    width: int
    height: int
    text: str = "<figure>"

    @classmethod
    def of(cls, fig, scale: float = SCALE, text: str | None = None) -> FigureImage:
        """Render ``fig`` (see ``render_png``) and remember its natural size: the PNG's pixels
        over ``scale``, rounded down (a figure whose inches do not make whole pixels renders a PNG
        an odd pixel wide, which must not be shown wider than half of it)."""
        png = render_png(fig, scale)
        pw, ph = png_size(png)
        w, h = int(pw // scale), int(ph // scale)
        return cls(png, w, h, text or f"<figure {w}x{h} px>")

    def _repr_mimebundle_(self, include=None, exclude=None):
        return ({"image/png": self.png, "text/plain": self.text},
                {"image/png": {"width": self.width, "height": self.height}})


def figure_image(fig, scale: float = SCALE, text: str | None = None) -> FigureImage:
    """``fig`` rendered at ``scale`` x as a notebook-displayable ``FigureImage`` (natural width)."""
    return FigureImage.of(fig, scale, text)


def show_figure(fig, scale: float = SCALE, text: str | None = None) -> None:
    """Display ``fig`` in the notebook: rendered at ``scale`` x, shown at its natural CSS width
    (not stretched to the cell). ``text`` is the plain-text stand-in nbval compares."""
    from IPython.display import display

    display(figure_image(fig, scale, text))
