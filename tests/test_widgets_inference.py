"""Chapter 11's inference dashboard recomputes from the decode model and turns bad input into a message."""

from __future__ import annotations

import pytest

from parlab.costmodel.pricing.inference import fit_decode
from parlab.course.guide_tables import measured_pairs
from parlab.widgets.inference import InferenceDashboard


@pytest.fixture(scope="module")
def dash():
    return InferenceDashboard()


def test_initial_state_prices_the_guides_setting(dash):
    assert dash.last_error is None and dash.png
    want = fit_decode(measured_pairs()).predict("a800", 300)
    assert f"{want.total_s:.2f} s" in dash.output.value
    assert dash.plain_text().splitlines()[-1].startswith("chatglm-6b on a800-80gb: 300 characters")


def test_moving_the_gpu_updates_the_numbers_and_other_models_drop_the_guides_points(dash):
    dash.controls["gpu"].value = "v100"
    want = fit_decode(measured_pairs()).predict("v100", 300)
    assert f"{want.total_s:.2f} s" in dash.output.value
    other = dash.compute(model="llama-7b", gpu="v100", answer_chars=500, chars_per_token=1.5)
    assert not other.guide_model and "measured ChatGLM-6B only" in dash.html(other)
    assert other.gen.new_tokens == 333


def test_bad_input_clears_the_result_and_names_the_rule(dash):
    dash.controls["model"].value = "no-such-model"
    assert dash.last_error and "model" in dash.last_error
    assert dash.png == b"" and "no result" in dash.output.value
    dash.controls["model"].value = "chatglm-6b"
    assert dash.last_error is None and dash.png


def test_chapter_figures_draw_what_they_are_given_without_rendering():
    from parlab.viz.inference import latency_figure, scaling_figure

    fit = fit_decode(measured_pairs())
    fig = latency_figure({"a800": [(100, 1.3)]}, {"a800": fit.curve("a800", [50, 600])}, fit.residuals_by_gpu())
    left, right = fig.axes
    assert [tuple(line.get_xdata()) for line in left.lines][:2] == [(50.0, 600.0), (100,)]
    assert len(right.lines) == 3  # a800, v100 residuals and the zero line
    fig = scaling_figure([1, 2, 4], {"64 Gb/s": [1.0, 1.5, 0.8]}, [1.0, 0.5, 0.25])
    assert [tuple(line.get_ydata()) for line in fig.axes[0].lines] == [(1.0, 0.5, 0.25), (1.0, 1.5, 0.8)]
