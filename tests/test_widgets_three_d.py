"""Chapter 08's 3D dashboard: every knob changes the estimate it shows (the cost model's, for the
same plan), an invalid layout shows the rule it breaks in plain words and clears the old result,
and the figure renders at 2x."""

from __future__ import annotations

import pytest

from parlab.costmodel import Plan, estimate, make_cluster
from parlab.viz.figures import png_size
from parlab.widgets.three_d import ThreeDDashboard


class Tables(ThreeDDashboard):
    """The same dashboard without its figure, so that moving every knob stays fast."""

    def figure(self, est):
        return None


@pytest.fixture(scope="module")
def dash():
    return ThreeDDashboard()


def test_initial_state_is_mt_nlg_on_dgx_a100_with_its_figure(dash):
    want = estimate("mt-nlg-530b", make_cluster("dgx-a100", 2240),
                    Plan(dp=8, tp=8, pp=35, zero=1, micro_batches=240, recompute="full"))
    assert dash.last_error is None and dash.result.step_time == want.step_time
    assert dash.result.memory_total == want.memory_total
    width, height = png_size(dash.png)
    assert (width, height) == (2 * dash.figure_size[0], 2 * dash.figure_size[1])  # 2x, shown at natural size
    out = dash.output.value
    assert "intra-node nvlink3-a100" in out and "inter-node ib-hdr" in out  # TP inside, PP and DP across
    assert "8 x 1 x 240 = 1,920" in out
    assert dash.plain_text().splitlines()[-1].startswith("mt-nlg-530b, dp=8 tp=8 pp=35:")


# knob -> a new value that keeps the plan valid (from the initial state, one at a time)
MOVES = [("model", "gpt3-175b", {}), ("cluster", "dgx-h100", {}),
         ("intra", "pcie4", {}), ("inter", "10gbe", {}), ("gpus", 1120, {"dp": 4}),
         ("dp", 16, {"gpus": 4480}), ("tp", 4, {"dp": 16}), ("pp", 7, {"dp": 40}),
         ("micro_batches", 35, {}), ("micro_batch", 2, {}), ("schedule", "gpipe", {}),
         ("recompute", "selective", {}), ("zero", 0, {})]


def test_every_knob_changes_the_estimate():
    d = Tables()
    assert {name for name, _, _ in MOVES} | {"chunks"} == set(d.controls)
    for name, value, companions in MOVES:
        base = Tables()
        before = (base.result.step_time, base.result.memory_total)
        for other, v in companions.items():  # keep dp x tp x pp = GPUs while this knob moves
            base.controls[other].value = v
        base.controls[name].value = value
        assert base.last_error is None, (name, base.last_error)
        assert (base.result.step_time, base.result.memory_total) != before, name
    d.controls["micro_batches"].value = 70
    d.controls["schedule"].value = "interleaved"
    assert not d.controls["chunks"].disabled
    step = d.result.step_time
    d.controls["chunks"].value = 5  # 105 layers = 35 stages x 3 chunks; 35 x 5 = 175 does not divide 105
    assert "divisible by pp x chunks" in d.last_error
    d.controls["chunks"].value = 3
    assert d.last_error is None and d.result.step_time == step


@pytest.mark.parametrize("knob, value, rule", [
    ("gpus", 1120, "dp x tp x pp must equal the number of GPUs: 8 x 8 x 35 = 2240 != 1120"),
    ("tp", 16, "dp x tp x pp must equal the number of GPUs"),
    ("gpus", 2244, "a cluster is made of whole nodes"),
    ("zero", 2, "ZeRO-2 shards gradients on every micro-batch"),
])
def test_an_invalid_layout_names_its_rule(knob, value, rule):
    d = Tables()
    d.controls[knob].value = value
    assert rule in d.last_error and d.result is None and "no result" in d.output.value


def test_tp_must_divide_the_heads_and_pp_at_most_the_layers():
    d = Tables(model="bloom-176b", gpus=384, dp=3, tp=32, pp=4)
    assert "tp must divide the attention heads: attention heads 112 is not divisible by tp=32" in d.last_error
    d = Tables(model="gpt3-175b", gpus=1024, dp=1, tp=8, pp=128)
    assert "pp=128 > 96 layers" in d.last_error


def test_an_error_clears_the_old_figure_and_table(dash):
    assert dash.png and "step term" in dash.output.value
    dash.controls["dp"].value = 7
    assert "7 x 8 x 35 = 1960 != 2240" in dash.last_error
    assert dash.png == b"" and dash.image.layout.display == "none" and "no result" in dash.output.value
    assert "error: dp x tp x pp" in dash.plain_text()


def test_fixing_the_layout_brings_the_result_back():
    d = Tables(dp=7)
    assert d.result is None
    d.controls["dp"].value = 8
    assert d.last_error is None and d.error.value == "" and "step term" in d.output.value


def test_knobs_without_effect_are_disabled():
    d = Tables(model="gpt3-13b", gpus=64, dp=8, tp=8, pp=1, micro_batches=4)
    assert d.last_error is None and d.controls["schedule"].disabled and d.controls["chunks"].disabled
    assert "nothing (size 1)" in d.output.value  # the PP row of the groups table
    d.controls["pp"].value, d.controls["dp"].value = 2, 4
    assert not d.controls["schedule"].disabled and d.controls["chunks"].disabled


def test_the_step_timeline_draws_every_rank_and_names_a_bad_phase():
    from parlab.viz.three_d import step_timeline_figure

    phases = [{"pipeline": 0.1, "tied embedding": 0.0, "dp all-reduce": 0.02, "optimizer": 0.001}] * 2
    fig = step_timeline_figure(phases, [(0, 0, 0), (1, 0, 0)], title="2 ranks")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0: (0, 0, 0)", "1: (1, 0, 0)"]
    assert len(ax.patches) == 6  # 3 non-zero phases x 2 ranks, end to end
    assert ax.patches[1].get_x() == pytest.approx(100.0)  # the DP all-reduce starts after 100 ms
    with pytest.raises(ValueError, match="unknown phase 'forward'"):
        step_timeline_figure([{"forward": 1.0}], [(0, 0, 0)])
