"""Dashboard: the shape of every parlab widget. Knobs in; an HTML table and a figure out.

A dashboard subclass declares its controls and three pure pieces: ``compute(**values)`` (calls
the engines, returns a result), ``html(result)`` and ``figure(result)`` (a matplotlib Figure
built without pyplot). The base wires them: any control change recomputes and redraws; a
ValueError from the engines is shown in the dashboard, never as a traceback. The figure is
rendered to PNG into an ``ipywidgets.Image``, so everything is testable without a kernel:

    dash = MemoryDashboard()
    dash.controls["micro_batch"].value = 8      # in a plain pytest
    assert "8" in dash.output.value             # the table changed

Sliders are created with ``continuous_update=False``: a drag updates once, on release.
"""

from __future__ import annotations

import html as html_lib
import io
import time
from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets

CSS_PREFIX = "parlab-"  # DOM classes for the browser test: parlab-<control>, parlab-output, ...


def render_png(fig) -> bytes:
    """PNG bytes of a matplotlib Figure (Agg canvas; no pyplot, no global state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    buf = io.BytesIO()
    canvas.print_png(buf)
    return buf.getvalue()


def new_figure(width: float = 6.0, height: float = 3.2, **margins: float):
    """A matplotlib Figure of the course's size (inches), not registered with pyplot.

    Margins are fixed (``left``, ``right``, ``bottom``, ``top`` as figure fractions, as in
    ``Figure.subplots_adjust``) rather than computed by a layout engine: constrained layout
    costs 3-4x the drawing itself, and a dashboard redraws on every change.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    fig.subplots_adjust(**{"left": 0.1, "right": 0.97, "bottom": 0.16, "top": 0.9, **margins})
    return fig


class Dashboard(widgets.VBox):
    """Base class: subclasses set ``title`` and implement ``make_controls``, ``compute``,
    ``html`` and (optionally) ``figure``."""

    title = ""

    def __init__(self, **initial: Any) -> None:
        self.controls: dict[str, widgets.ValueWidget] = dict(self.make_controls())
        for name, value in initial.items():
            if name not in self.controls:
                raise ValueError(f"{type(self).__name__} has no control {name!r}; "
                                 f"controls: {', '.join(self.controls)}")
            self.controls[name].value = value
        for name, control in self.controls.items():
            control.add_class(CSS_PREFIX + name.replace("_", "-"))
            if hasattr(control, "continuous_update"):
                control.continuous_update = False
            control.observe(self._on_change, names="value")
        self.output = widgets.HTML().add_class(CSS_PREFIX + "output")
        self.error = widgets.HTML().add_class(CSS_PREFIX + "error")
        self.image = widgets.Image(format="png").add_class(CSS_PREFIX + "figure")
        self.result: Any = None
        self.last_error: str | None = None
        self.timings: dict[str, float] = {}
        header = [widgets.HTML(f"<b>{html_lib.escape(self.title)}</b>")] if self.title else []
        super().__init__(header + [self.layout_controls(), self.error, self.output, self.image])
        self.add_class(CSS_PREFIX + "dashboard")
        self.update()

    # -- to implement ------------------------------------------------------------------------
    def make_controls(self) -> Mapping[str, widgets.ValueWidget]:
        raise NotImplementedError(f"{type(self).__name__} must define make_controls()")

    def compute(self, **values: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define compute()")

    def html(self, result: Any) -> str:
        raise NotImplementedError(f"{type(self).__name__} must define html()")

    def figure(self, result: Any):
        """A matplotlib Figure for ``result`` (use ``new_figure``), or None for no picture."""
        return None

    # -- wiring --------------------------------------------------------------------------------
    def layout_controls(self) -> widgets.Widget:
        """Controls in a two-column grid; override for another arrangement."""
        items = list(self.controls.values())
        for c in items:
            c.style = {"description_width": "120px"}
            c.layout.width = "360px"
        return widgets.GridBox(items, layout=widgets.Layout(grid_template_columns="repeat(2, 370px)"))

    def values(self) -> dict[str, Any]:
        return {name: c.value for name, c in self.controls.items()}

    def _on_change(self, change: dict) -> None:
        self.update()

    def update(self) -> None:
        """Recompute and redraw; a ValueError becomes a message in the dashboard."""
        t0 = time.perf_counter()
        try:
            result = self.compute(**self.values())
        except ValueError as err:
            self.last_error = str(err)
            self.error.value = (f'<div style="color:#b00020;border:1px solid #b00020;padding:4px">'
                                f"{html_lib.escape(str(err))}</div>")
            return
        t1 = time.perf_counter()
        self.result, self.last_error, self.error.value = result, None, ""
        self.output.value = self.html(result)
        fig = self.figure(result)
        if fig is not None:
            self.image.value = render_png(fig)
        t2 = time.perf_counter()
        self.timings = {"compute_s": t1 - t0, "render_s": t2 - t1, "total_s": t2 - t0}


def model_box(value: str) -> widgets.Combobox:
    """The model control every dashboard shares: a preset name, with free text for sizes ('13B')."""
    from parlab.costmodel import MODELS

    return widgets.Combobox(value=value, options=list(MODELS), description="model",
                            placeholder="preset or size, e.g. 7B", ensure_option=False)


def html_table(rows: list[list[Any]], headers: list[str], highlight_last: bool = False) -> str:
    """A small HTML table for dashboard output (numbers right-aligned)."""
    def cell(v: Any, tag: str) -> str:
        align = "right" if isinstance(v, (int, float)) or str(v)[:1].isdigit() else "left"
        return f'<{tag} style="text-align:{align};padding:1px 8px">{html_lib.escape(str(v))}</{tag}>'

    head = "".join(cell(h, "th") for h in headers)
    body = []
    for i, row in enumerate(rows):
        style = ' style="font-weight:bold;border-top:1px solid #888"' if highlight_last and i == len(rows) - 1 else ""
        body.append(f"<tr{style}>" + "".join(cell(v, "td") for v in row) + "</tr>")
    return f'<table style="border-collapse:collapse"><tr>{head}</tr>{"".join(body)}</table>'
