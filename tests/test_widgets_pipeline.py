"""Chapter 04's dashboard (``parlab.widgets.pipeline``): its numbers are the simulator's, knobs that
do nothing are disabled, a bad setting shows its rule and clears the stale result, and the cost
model's pipeline terms for a real model agree with the simulator's activation count."""

from __future__ import annotations

from fractions import Fraction

import pytest

from parlab.schedules import Costs, make_schedule, peak_activations, simulate
from parlab.viz.figures import png_size
from parlab.widgets.pipeline import PipelineDashboard, real_model_pipeline, real_rows


def test_default_state_is_the_simulators_1f1b():
    dash = PipelineDashboard()
    tl = simulate(make_schedule("1f1b", 4, 8), Costs(f=1, b=1, w=1))
    assert tl.bubble_fraction == Fraction(3, 11)
    assert dash.result.timeline.bubble_fraction == pytest.approx(3 / 11)  # slider floats
    assert f"{float(tl.bubble_fraction):.1%}" in dash.output.value
    assert "4, 3, 2, 1 micro-batches" in dash.plain_text()
    assert dash.png and png_size(dash.png)[0] == 2 * dash.figure_size[0]
    assert all(len(line) <= 110 for line in dash.plain_text().splitlines())


def test_knobs_change_the_schedule_and_costs():
    dash = PipelineDashboard()
    dash.controls["schedule"].value = "gpipe"
    assert "8, 8, 8, 8 micro-batches" in dash.plain_text()
    dash.controls["schedule"].value = "zb-h1"
    dash.controls["weight_share"].value = 0.25
    want = simulate(make_schedule("zb-h1", 4, 8), Costs(f=1, b=1.5, w=0.5))
    assert dash.result.timeline.bubble_fraction == pytest.approx(float(want.bubble_fraction))
    dash.controls["p2p"].value = 0.5
    assert dash.result.timeline.makespan > want.makespan


def test_inactive_controls_are_disabled():
    dash = PipelineDashboard()
    assert dash.controls["chunks"].disabled and dash.controls["weight_share"].disabled
    dash.controls["schedule"].value = "interleaved"
    assert not dash.controls["chunks"].disabled
    assert tuple(dash.result.timeline.peak_in_flight) == peak_activations(make_schedule("interleaved", 4, 8, 2))
    dash.controls["schedule"].value = "naive"
    assert dash.controls["micro_batches"].disabled


def test_a_bad_setting_shows_the_rule_and_clears_the_result():
    dash = PipelineDashboard(schedule="interleaved")
    dash.controls["micro_batches"].value = 6
    assert "multiple of p" in dash.error.value and dash.result is None and not dash.png
    assert "no result" in dash.output.value
    dash.controls["micro_batches"].value = 8
    assert dash.error.value == "" and dash.result is not None


def test_the_cost_model_holds_what_the_simulator_holds():
    for schedule, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        r = real_model_pipeline("gpt3-175b", schedule, 8, 64, v)
        sim = peak_activations(make_schedule(schedule, 8, 64, v))
        assert r.in_flight == pytest.approx(float(max(sim)))
        assert r.bubble_frac == pytest.approx(7 / (v * 64))
    rows, headers, formats = real_rows([r])
    assert len(rows[0]) == len(headers) and set(formats) <= set(headers)
