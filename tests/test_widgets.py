"""Dashboards run without a kernel: set a control's value, the table and the figure change; bad
input is shown in the dashboard, never raised."""

import html

import pytest

from parlab.widgets import ComputeWallDashboard, MemoryWallDashboard
from parlab.widgets.base import Dashboard

PNG = b"\x89PNG"


def test_memory_dashboard_updates_table_and_figure_when_a_slider_moves():
    d = MemoryWallDashboard()
    html, png = d.output.value, bytes(d.image.value)
    assert png.startswith(PNG) and "llama-7b" in html
    d.controls["micro_batch"].value = 8
    assert d.output.value != html and bytes(d.image.value) != png
    assert d.result.micro_batch == 8


def test_memory_dashboard_accepts_sizes_and_presets():
    d = MemoryWallDashboard(model="6.7B")
    assert d.result.model.name == "gpt3-6.7b"
    d.controls["model"].value = "1.3B"
    assert d.result.model.num_params() == pytest.approx(1.3e9, rel=0.1)


def test_bad_input_is_shown_in_the_dashboard_and_cleared_when_fixed():
    d = MemoryWallDashboard()
    d.controls["model"].value = "gpt-9000"
    assert "unknown model 'gpt-9000'" in html.unescape(d.error.value) and d.last_error
    d.controls["model"].value = "llama-7b"
    assert d.error.value == "" and d.last_error is None and d.result.model.name == "llama-7b"


def test_compute_dashboard_updates_days():
    d = ComputeWallDashboard()
    days = d.result.days
    d.controls["n_gpus"].value = 2 * d.controls["n_gpus"].value
    assert d.result.days == pytest.approx(days / 2)
    d.controls["utilisation"].value = 0.25
    assert d.result.days == pytest.approx(days)


def test_v100_with_bf16_is_an_error_message_not_a_crash():
    d = ComputeWallDashboard(gpu="v100-32gb")
    d.controls["dtype"].options = ["mixed", "bf16"]
    d.controls["dtype"].value = "bf16"
    assert "bf16" in d.error.value


def test_sliders_update_on_release_only():
    for d in (MemoryWallDashboard(), ComputeWallDashboard()):
        for c in d.controls.values():
            if hasattr(c, "continuous_update"):
                assert c.continuous_update is False


def test_controls_carry_css_classes_for_the_browser():
    d = MemoryWallDashboard()
    assert "parlab-micro-batch" in d.controls["micro_batch"]._dom_classes
    assert "parlab-output" in d.output._dom_classes


def test_unknown_initial_control_is_rejected():
    with pytest.raises(ValueError, match="no control 'size'"):
        MemoryWallDashboard(size=3)


def test_a_dashboard_must_define_its_parts():
    class Empty(Dashboard):
        pass

    with pytest.raises(NotImplementedError, match="make_controls"):
        Empty()


# -- the faces every dashboard shares (issue 7, items 6, 9, 10) -----------------------------------
def test_the_figure_is_rendered_at_2x_and_shown_at_its_natural_width():
    from parlab.viz.figures import png_size

    d = MemoryWallDashboard()
    w, h = d.figure_size
    assert png_size(bytes(d.image.value)) == (2 * w, 2 * h)
    assert d.image.width == str(w)


def test_the_notebook_output_carries_a_static_picture_and_a_short_text():
    d = MemoryWallDashboard()
    data, meta = d._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["image/png"] == d.png and meta["image/png"]["width"] == d.figure_size[0]
    text = data["text/plain"]
    assert "children=" not in text and all(len(line) <= 110 for line in text.splitlines())
    assert "117 GB" in text and text == MemoryWallDashboard()._repr_mimebundle_()[0]["text/plain"]


def test_a_dashboard_without_a_figure_stores_its_table_as_html():
    import ipywidgets as widgets

    class TableOnly(Dashboard):
        def make_controls(self):
            return {"n": widgets.IntSlider(value=3, min=1, max=9)}

        def compute(self, n):
            return n

        def html(self, n):
            return f"<p>n = {n}</p>"

    data, _ = TableOnly()._repr_mimebundle_()
    assert "image/png" not in data and "n = 3" in data["text/html"]


def test_an_error_clears_the_previous_table_and_figure():
    d = MemoryWallDashboard()
    d.controls["model"].value = "gpt-9000"
    assert "llama-7b" not in d.output.value and "no result" in d.output.value
    assert d.image.layout.display == "none" and d.result is None and d.png == b""
    assert "error: unknown model 'gpt-9000'" in d._repr_mimebundle_()[0]["text/plain"]
    d.controls["model"].value = "llama-7b"
    assert "llama-7b" in d.output.value and d.image.layout.display is None and d.png


def test_inference_disables_the_activation_knobs_and_says_inference():
    d = MemoryWallDashboard()
    d.controls["optimizer"].value = "none"
    assert d.controls["micro_batch"].disabled and d.controls["recompute"].disabled
    assert not d.controls["dtype"].disabled
    text = html.unescape(d.output.value)
    assert "inference" in text and "train" not in text
    d.controls["optimizer"].value = "adam"
    assert not d.controls["micro_batch"].disabled and "training" in d.output.value


def test_inactive_must_name_real_controls():
    class Wrong(MemoryWallDashboard):
        def inactive(self, **values):
            return ("size",)

    with pytest.raises(ValueError, match="names no control 'size'"):
        Wrong()


def test_the_memory_plot_keeps_its_axis_while_a_knob_moves():
    from parlab.costmodel.answers.walls import memory_wall
    from parlab.viz.figures import new_figure
    from parlab.viz.walls import nice_ceiling, plot_memory_wall

    limits = []
    for mb in (1, 2):
        ax = new_figure().add_subplot()
        plot_memory_wall(ax, memory_wall("llama-7b", micro_batch=mb))
        limits.append(ax.get_xlim())
    assert limits[0] == limits[1] == (0, 200)  # 139 GB and 170 GB: the same axis
    assert [nice_ceiling(x) for x in (139, 170, 201, 0.9, 1000)] == [200, 200, 500, 1, 1000]


def test_the_compute_wall_speaks_days_in_the_table_and_the_plot():
    from parlab.viz.walls import days_label

    d = ComputeWallDashboard(n_gpus=1)
    assert days_label(d.result.days) in d.output.value and "years" not in d.output.value
    assert days_label(1.0) == "1 day" and days_label(22.8) == "22.8 days" and days_label(23317.9) == "23,318 days"
    d.controls["n_gpus"].value = 2
    assert "time on 2 GPUs" in d.output.value
