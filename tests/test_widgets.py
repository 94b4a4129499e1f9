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
