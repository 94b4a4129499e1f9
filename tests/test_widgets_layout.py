"""A dashboard's shape on the screen and in time (issue 20 items 11 and 15): the control grid
wraps to the notebook column, the table and the figure sit in one wrapping row (beside each other
where there is room), and the two change together: while the new figure renders, the old table
is still shown, so a slow render under load never pairs a new table with an old figure.
tests/test_browser.py measures the result in a real browser at 1400x900 and 1000x800."""

from __future__ import annotations

import ipywidgets as widgets

import parlab.widgets.base as base
from parlab.widgets import PipelineDashboard


def test_the_control_grid_wraps_and_the_table_sits_beside_the_figure():
    dash = PipelineDashboard()
    grid = dash.controls_box
    assert grid.layout.grid_template_columns == f"repeat(auto-fill, {dash.control_width + 10}px)"
    assert grid.layout.max_width == f"{dash.control_columns * (dash.control_width + 10)}px"
    assert isinstance(dash.body, widgets.Box) and dash.body.children == (dash.output, dash.image)
    assert dash.body.layout.flex_flow == "row wrap" and dash.body in dash.children
    assert dash.output.layout.overflow == "auto"  # a table wider than the column scrolls


def test_the_table_and_the_figure_change_together(monkeypatch):
    dash = PipelineDashboard()
    seen = []
    render = base.render_png

    def slow_render(fig, scale=base.SCALE):  # the moment a loaded machine takes its time
        seen.append((dash.output.value, dash.image.value))
        return render(fig, scale)

    old = (dash.output.value, dash.image.value)
    monkeypatch.setattr(base, "render_png", slow_render)
    dash.controls["micro_batches"].value = 16
    assert seen == [old]  # during the render: the previous table beside the previous figure
    assert dash.output.value != old[0] and dash.image.value != old[1]  # then both new

