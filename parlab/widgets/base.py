"""Dashboard: the shape of every parlab widget. Knobs in; an HTML table and a figure out.

A dashboard subclass declares its controls and three pure pieces: ``compute(**values)`` (calls
the engines, returns a result), ``html(result)`` and ``figure(result)`` (a matplotlib Figure
from ``parlab.viz.figures.new_figure``). The base wires them, the same way for every dashboard:

- any control change recomputes and redraws; a ValueError from the engines is shown in the
  dashboard, never as a traceback, and the previous table and figure are cleared (a stale
  result never looks current);
- the figure is rendered at 2x pixel density and shown at its natural CSS width (crisp, never
  stretched to the cell); the table and the figure sit side by side where the notebook column
  has room and one under the other where it has not, and the control grid wraps to the
  column's width, so a dashboard fits about 760 px of a 1400x900 screen and a 568 px column
  (1000x800 with the file browser open); a table wider than the column scrolls;
- the table and the figure change together: both are computed and rendered before either is
  shown, so a slow render (under load) never shows the new table beside the old figure;
- ``inactive(**values)`` names the controls that have no effect for the other values; the base
  disables them, so a learner never moves a knob that does nothing;
- in a notebook the output also carries a static picture of the dashboard's state
  (``image/png`` of the figure, or ``text/html`` of the table when there is no figure) and a
  short ``text/plain`` line, so a notebook opened before Run All, or rendered on a static page,
  shows a picture rather than a Python repr.

Everything is testable without a kernel:

    dash = MemoryWallDashboard()
    dash.controls["micro_batch"].value = 8      # in a plain pytest
    assert "8" in dash.output.value             # the table changed

Sliders are created with ``continuous_update=False``: a drag updates once, on release.
"""

from __future__ import annotations

import html as html_lib
import textwrap
import time
from collections.abc import Iterable, Mapping
from typing import Any

import ipywidgets as widgets

from parlab.viz.figures import SCALE, natural_size, new_figure, render_png
from parlab.viz.html import html_table

__all__ = ["CSS_PREFIX", "Dashboard", "html_table", "model_box", "new_figure", "render_png"]

CSS_PREFIX = "parlab-"  # DOM classes for the browser test: parlab-<control>, parlab-output, ...
# compact rows for every dashboard's tables (JupyterLab's default padding makes a 5-row table
# 160 px tall); scoped to parlab's output widgets
COMPACT = ("<style>.parlab-output table td, .parlab-output table th {padding: 2px 10px; line-height: 1.3}"
           " .parlab-output p {margin: 4px 0; line-height: 1.35}</style>")
NO_RESULT = '<p class="parlab-no-result" style="color:#777">(no result: fix the setting above)</p>'


class Dashboard(widgets.VBox):
    """Base class: subclasses set ``title`` and implement ``make_controls``, ``compute``,
    ``html`` and (optionally) ``figure``, ``inactive`` and ``summary``."""

    title = ""
    control_columns = 2
    control_width = 360

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
        self.output.layout = widgets.Layout(max_width="100%", overflow="auto", margin="0 16px 0 0")
        self.image = widgets.Image(format="png").add_class(CSS_PREFIX + "figure")
        self.image.layout.max_width = "100%"
        self.body = widgets.Box([self.output, self.image], layout=widgets.Layout(
            display="flex", flex_flow="row wrap", align_items="flex-start", max_width="100%"))
        self.body.add_class(CSS_PREFIX + "body")
        self.result: Any = None
        self.last_error: str | None = None
        self.png: bytes = b""  # the figure as last rendered (2x), also the static picture
        self.figure_size: tuple[int, int] | None = None  # its natural size in CSS px
        self.timings: dict[str, float] = {}
        header = [widgets.HTML(f"<b>{html_lib.escape(self.title)}</b>")] if self.title else []
        self.controls_box = self.layout_controls()
        super().__init__(header + [self.controls_box, self.error, self.body])
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

    def inactive(self, **values: Any) -> Iterable[str]:
        """Names of the controls that have no effect given ``values`` (the base disables them)."""
        return ()

    def summary(self, result: Any) -> str:
        """One plain line about ``result`` for the notebook's ``text/plain`` (nbval compares it)."""
        return ""

    # -- wiring --------------------------------------------------------------------------------
    def layout_controls(self) -> widgets.Widget:
        """Controls in a grid of up to ``control_columns`` columns of ``control_width`` px, labels
        120 px (two of 360 by default; three of 300 keep a dashboard with many knobs short); in a
        narrower notebook column the grid wraps to as many columns as fit (one at 568 px)."""
        items = list(self.controls.values())
        w = self.control_width
        for c in items:
            c.style = {"description_width": "120px"}
            c.layout.width = f"{w}px"
        return widgets.GridBox(items, layout=widgets.Layout(
            grid_template_columns=f"repeat(auto-fill, {w + 10}px)",
            max_width=f"{self.control_columns * (w + 10)}px", width="100%")).add_class(CSS_PREFIX + "controls")

    def values(self) -> dict[str, Any]:
        return {name: c.value for name, c in self.controls.items()}

    def _on_change(self, change: dict) -> None:
        self.update()

    def _set_inactive(self, values: dict[str, Any]) -> None:
        off = set(self.inactive(**values))
        unknown = off - set(self.controls)
        if unknown:
            raise ValueError(f"{type(self).__name__}.inactive() names no control {sorted(unknown)[0]!r}")
        for name, control in self.controls.items():
            if hasattr(control, "disabled"):
                control.disabled = name in off

    def update(self) -> None:
        """Recompute and redraw. A ValueError becomes a message in the dashboard and clears
        the previous table and figure."""
        t0 = time.perf_counter()
        values = self.values()
        self._set_inactive(values)
        try:
            result = self.compute(**values)
        except ValueError as err:
            self.result, self.last_error = None, str(err)
            self.error.value = (f'<div style="color:#b00020;border:1px solid #b00020;padding:4px">'
                                f"{html_lib.escape(str(err))}</div>")
            self.output.value = NO_RESULT
            self.image.layout.display = "none"
            self.png, self.figure_size = b"", None
            return
        t1 = time.perf_counter()
        table = self.html(result)
        fig = self.figure(result)  # rendered before the table is shown: both change together
        png, size = (b"", None) if fig is None else (render_png(fig, SCALE), natural_size(fig))
        self.result, self.last_error, self.error.value = result, None, ""
        self.output.value = COMPACT + table
        self.png, self.figure_size = png, size
        if fig is None:
            self.image.layout.display = "none"
        else:
            self.image.value = png
            self.image.width = str(size[0])  # natural CSS width; the PNG is 2x
            self.image.layout.display = None
        t2 = time.perf_counter()
        self.timings = {"compute_s": t1 - t0, "render_s": t2 - t1, "total_s": t2 - t0}

    # -- the static face -----------------------------------------------------------------------
    def plain_text(self) -> str:
        """The ``text/plain`` of the notebook output: the title and the summary or the error
        (at most 110 characters a line, deterministic)."""
        name = self.title or type(self).__name__
        if self.last_error is not None:
            line = f"error: {self.last_error}"
        else:
            line = self.summary(self.result)
        text = f"{name}\n(a live dashboard: run the notebook to move its controls)"
        if line:
            text += "\n" + line
        return "\n".join(textwrap.shorten(part, 110, placeholder=" ...") for part in text.splitlines())

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = self.plain_text()
        metadata: dict[str, Any] = {}
        if self.png:
            data["image/png"] = self.png
            metadata["image/png"] = {"width": self.figure_size[0], "height": self.figure_size[1]}
        else:
            data["text/html"] = (f"<b>{html_lib.escape(self.title)}</b>" + self.error.value
                                 + self.output.value)
        return data, metadata


def model_box(value: str) -> widgets.Combobox:
    """The model control every dashboard shares: a preset name, with free text for sizes ('13B')."""
    from parlab.costmodel import MODELS

    return widgets.Combobox(value=value, options=list(MODELS), description="model",
                            placeholder="preset or size, e.g. 7B", ensure_option=False)
