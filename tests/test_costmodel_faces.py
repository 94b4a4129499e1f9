"""The cost model's faces: ``parlab estimate`` / ``parlab search``, the plan and advisor
dashboards, the plot helpers and the benchmark."""

import argparse

import pytest

from parlab.cli import main
from parlab.costmodel import Plan, estimate, get_model, make_cluster
from parlab.widgets.plan import PlanDashboard, SearchDashboard

PNG = b"\x89PNG"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- CLI -----------------------------------------------------------------------------------------
def test_estimate_prints_every_term_with_its_source(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "8",
                       "--global-batch", "1536", "--recompute", "full", "--tokens", "300B")
    assert code == 0
    for text in ("dp=16 tp=8 pp=8", "activations", "pipeline bubble", "Korthikanti", "MFU",
                 "time to train on 300B tokens"):
        assert text in out


def test_estimate_reports_a_broken_rule_on_one_line(capsys):
    code, out, err = run(capsys, "estimate", "--tp", "5")
    assert code == 2 and out == ""
    assert err.strip() == ("parlab estimate: error: tp must divide the attention heads: attention heads 96 "
                           "is not divisible by tp=5 (Megatron-LM splits them evenly over the TP group)")


def test_search_prints_the_top_plans(capsys):
    code, out, _ = run(capsys, "search", "--model", "llama-7b", "--gpus", "16", "--global-batch", "64",
                       "--cluster", "pcie-10gbe", "--top", "3")
    assert code == 0
    assert "plans tried" in out and out.count("ZeRO-") >= 3 and "MFU" in out


def test_search_with_nothing_fitting_exits_2(capsys):
    code, _, err = run(capsys, "search", "--model", "gpt3-175b", "--gpus", "8", "--global-batch", "8",
                       "--recompute", "none")
    assert code == 2 and "no valid plan fits" in err


def test_benchmark_prints_its_figures(capsys):
    from parlab.bench import costmodel

    p = argparse.ArgumentParser()
    costmodel.add_arguments(p)
    assert costmodel.run(p.parse_args(["--gpus", "64", "--global-batch", "64", "--repeat", "5"])) == 0
    out = capsys.readouterr().out
    assert "estimate() one plan" in out and "search() 64 GPUs" in out


# -- dashboards ----------------------------------------------------------------------------------
def test_plan_dashboard_updates_when_a_knob_moves():
    d = PlanDashboard()
    before, png = d.output.value, bytes(d.image.value)
    assert png.startswith(PNG) and "dp=16 tp=8 pp=8" in before and "Korthikanti" in before
    d.controls["zero"].value = 0
    assert d.result.plan.zero == 0 and d.output.value != before and bytes(d.image.value) != png
    d.controls["schedule"].value = "interleaved"
    assert d.result.plan.describe().count("interleaved(v=2)") == 1


def test_plan_dashboard_shows_a_broken_rule_and_recovers():
    d = PlanDashboard()
    d.controls["pp"].value = 64
    d.controls["tp"].value = 32  # 1024 / (32 x 64) is not a whole dp
    assert "does not divide 1024 GPUs" in d.last_error and "1024" in d.error.value
    d.controls["tp"].value = 8
    assert d.last_error is None and d.result.plan.dp == 2


def test_plan_dashboard_follows_the_links():
    d = PlanDashboard()
    fast = d.result.step_time
    d.controls["intra"].value = "pcie4"
    assert d.result.cluster.intra.name == "pcie4" and d.result.step_time > fast


def test_search_dashboard_lists_plans_and_reacts_to_the_network():
    s = SearchDashboard(gpus=16, global_batch=64, model="llama-7b")
    assert "plans tried" in s.output.value and bytes(s.image.value).startswith(PNG)
    best = s.result[0].best().step_time
    s.controls["cluster"].value = "pcie-10gbe"
    assert s.result[0].best().step_time > best


def test_plan_dashboard_terms_are_numbers_right_and_formulas_left():
    import re

    d = PlanDashboard()
    term = d.result.memory_breakdown()[0]
    cells = re.findall(r'<td style="text-align:(\w+)[^"]*">([^<]*)</td>', d.output.value)
    aligns = {text: align for align, text in cells}
    assert aligns[f"{term.value / 1e9:,.2f}"] == "right"
    formula = next(t.formula for t in d.result.memory_breakdown() if t.formula[:1].isdigit())
    assert aligns[formula.replace("<", "&lt;").replace(">", "&gt;")] == "left"
    assert "<th" in d.output.value and ">GB<" in d.output.value and ">ms<" in d.output.value


def test_search_dashboard_advises_only_with_the_knobs_it_has():
    s = SearchDashboard(model="gpt3-175b", gpus=8, global_batch=8)
    assert s.last_error and "allow offload" in s.last_error and "more GPUs" in s.last_error
    assert "lower the micro-batch" not in s.last_error and "allow recomputation" not in s.last_error
    assert "no result" in s.output.value  # the previous table is gone
    s.controls["offload"].value = True
    if s.last_error:  # still nothing fits: do not suggest the box that is already ticked
        assert "allow offload" not in s.last_error


# -- plots -------------------------------------------------------------------------------------
def test_plot_helpers_draw_labelled_axes():
    from parlab.costmodel.answers.scenarios import memory_vs_dp, zero3_vs_3d
    from parlab.costmodel.answers.validation import megatron_table1
    from parlab.viz import costmodel as viz
    from parlab.viz.figures import new_figure

    est = estimate(get_model("llama-7b"), make_cluster("dgx-a100", 8), Plan(dp=8, zero=1))
    fig = viz.plan_figure(est)
    assert len(fig.axes) == 2 and "GB" in fig.axes[0].get_xlabel() and "(s)" in fig.axes[1].get_xlabel()
    dps = [1, 8]
    calls = [(viz.plot_memory_vs_dp, (memory_vs_dp("llama-7b", dps), dps)),
             (viz.plot_zero3_vs_3d, (zero3_vs_3d("gpt3-13b", [16], 64),)),
             (viz.plot_comm_vs_bandwidth, ([10, 100], [1.0, 0.1], "13B grads")),
             (viz.plot_validation, (megatron_table1()[:2],))]
    for fn, args in calls:
        ax = new_figure().add_subplot()
        fn(ax, *args)
        assert ax.get_xlabel() and ax.get_ylabel(), fn.__name__


@pytest.mark.parametrize("module", ["parlab.costmodel", "parlab.costmodel.answers.validation", "parlab.costmodel.answers.scenarios"])
def test_the_engine_imports_no_heavy_dependency(module):
    import subprocess
    import sys

    code = (f"import sys, {module}; heavy = [m for m in ('torch', 'matplotlib', 'ipywidgets', 'parlab.comm') "
            "if m in sys.modules]; print(heavy); sys.exit(bool(heavy))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
