"""Chapter 10's advisor dashboard and figures recompute from ``parlab.costmodel.search.advisor`` (guide
3.2-3.5) and turn bad input into a message."""

from __future__ import annotations

import pytest

from parlab.costmodel.answers.frameworks import LAYERS, STACKS
from parlab.costmodel.search.advisor import Scenario, guide_scenarios, scenario_verdict
from parlab.viz.figures import natural_size
from parlab.widgets.advisor import AdvisorDashboard


@pytest.fixture(scope="module")
def dash():
    return AdvisorDashboard()


def test_initial_state_is_the_guide_3_4_tie_with_its_numbers_and_band(dash):
    v = scenario_verdict(Scenario("llama-7b", "pcie-10gbe", 8, 64))
    assert dash.last_error is None and dash.png and not v.agrees and v.tie
    out = dash.output.value
    assert "guide 3.4" in out and "tie:" in out and v.advice.best.plan.describe() in out
    assert f"{v.slowdown:.1%}" in out and "±25%" in out
    assert dash.plain_text().splitlines()[-1].endswith("tie")
    assert dash.controls["inter"].disabled  # one node: no inter-node link to choose


def test_one_gpu_turns_the_advice_into_offload(dash):
    dash.controls["gpus"].value = 1
    assert "guide 3.3" in dash.output.value and "offload=optimizer" in dash.output.value
    assert dash.plain_text().splitlines()[-1].endswith("agrees")
    dash.controls["gpus"].value = 8


def test_a_model_name_it_does_not_know_clears_the_result(dash):
    dash.controls["model"].value = "no-such-model"
    assert dash.last_error and "model" in dash.last_error
    assert dash.png == b"" and "no result" in dash.output.value
    dash.controls["model"].value = "llama-7b"
    assert dash.last_error is None and dash.png


def test_the_stack_and_decision_figures_draw_the_library_s_data():
    from parlab.viz.advisor import AGREE, DISAGREE, TIE, decision_figure, stack_figure

    fig = stack_figure()
    texts = {t.get_text().replace("\n", " ") for t in fig.axes[0].texts}  # labels wrapped to fit their box
    assert set(STACKS) <= texts and all(layer in texts for s in STACKS.values() for layer in s)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(LAYERS)
    results = guide_scenarios()
    colors = [t.get_color() for t in decision_figure(results).axes[0].texts]
    assert colors.count(TIE) == sum(v.tie for _, v in results) == 2
    assert colors.count(DISAGREE) == sum(v.outcome == "differs" for _, v in results) == 0
    assert colors.count(AGREE) == len(results) - 2
    assert natural_size(decision_figure(results))[0] <= 900
