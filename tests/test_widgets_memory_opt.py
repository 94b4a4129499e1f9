"""Chapter 09's dashboard recomputes from the cost model and turns bad input into a message."""

from __future__ import annotations

import pytest

from parlab.costmodel import Plan, estimate, get_model, make_cluster
from parlab.widgets.memory_opt import MemoryOptDashboard, memory_options


@pytest.fixture(scope="module")
def dash():
    return MemoryOptDashboard()


def test_initial_state_is_the_one_gpu_of_guide_1_10(dash):
    assert dash.last_error is None and dash.png
    want = estimate(get_model("llama-7b"), make_cluster("dgx-a100", 1), Plan())
    assert f"{want.memory_total / 1e9:,.1f}" in dash.output.value
    assert dash.plain_text().splitlines()[-1].startswith("llama-7b, dp=1")


def test_recompute_full_shrinks_the_activations_and_costs_time():
    r = memory_options("llama-7b", 4096, 2, "full", "none", "bf16", 0, 1)
    acts = {p: e.memory_terms()["activations"] for p, e in r.by_recompute.items()}
    assert acts["none"] > acts["full"] and r.chosen is r.by_recompute["full"]
    assert r.by_recompute["full"].step_time > r.by_recompute["none"].step_time
    # FlashAttention stores no scores already (only the 4 a s b softmax statistics), so selective
    # recomputation saves almost nothing more: under 0.2%
    assert acts["none"] > acts["selective"] > 0.998 * acts["none"]
    eager = memory_options("llama-7b", 4096, 2, "none", "none", "bf16", 0, 1, attention="eager (scores stored)")
    assert eager.by_recompute["selective"].memory_terms()["activations"] < eager.chosen.memory_terms()["activations"]


def test_offload_moves_the_optimizer_to_the_cpu_and_reports_it(dash):
    dash.controls["zero"].value = 2
    dash.controls["offload"].value = "optimizer"
    est = dash.result.chosen
    assert est.memory_terms()["optimizer states"] == 0 and est.stage.cpu > 0
    assert "offloaded to the CPU" in dash.output.value and "PCIe" in dash.output.value
    dash.controls["offload"].value = "none"
    dash.controls["zero"].value = 0


def test_bad_input_clears_the_result_and_names_the_rule(dash):
    dash.controls["offload"].value = "optimizer"  # with ZeRO-0
    assert dash.last_error and "ZeRO stage >= 1" in dash.last_error
    assert dash.png == b"" and "no result" in dash.output.value
    dash.controls["offload"].value = "none"
    assert dash.last_error is None and dash.png


def test_the_dashboard_shows_each_phase_and_which_sets_the_peak(dash):
    # issue 19 item 9: LLaMA-7B, one GPU, micro-batch 3, 16-bit gradients: the same total under every
    # policy because the optimizer step sets it; the forward/backward column is what recompute moves
    from parlab.costmodel.answers.phases import step_phases

    fb = {}
    for policy in ("none", "full"):
        r = memory_options("llama-7b", 2048, 3, policy, "none", "bf16", 0, 1)
        ph = step_phases(r.chosen)
        fb[policy] = ph.forward_backward.total
        out = dash.html(r)  # the table the dashboard shows, without rendering its figure
        assert "forward/backward (GB)" in out and "optimizer step (GB)" in out
        assert f"{ph.forward_backward.total / 1e9:,.2f}" in out and f"{ph.optimizer_step.total / 1e9:,.2f}" in out
        assert f"peak: the {ph.peak.name} phase" in out and ph.why().split(":")[0] in out
        assert "fp32 gradient copy" in out and "runtime buffers" in out and "fragmentation" in out
    assert fb["none"] - fb["full"] > 20e9
