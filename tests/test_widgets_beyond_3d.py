"""Chapter 13's dashboard: sequence length, cp and its method, ep, experts and top-k each change the
5D estimate it shows (the one ``estimate`` gives), a dense model disables the MoE knobs, and a plan
that breaks a rule shows the rule and clears the old table and figure."""

from __future__ import annotations

from dataclasses import replace

import pytest

from parlab.costmodel import Plan, estimate, get_model, make_cluster
from parlab.widgets.beyond_3d import FiveDDashboard

PNG = b"\x89PNG"


@pytest.fixture(scope="module")
def dash():
    return FiveDDashboard()


def test_initial_state_is_mixtral_at_32k_on_64_h100s(dash):
    assert dash.last_error is None and dash.png.startswith(PNG)
    plan = Plan(dp=8, tp=2, cp=4, ep=8, sequence_parallel=True, zero=1, micro_batches=8, recompute="selective")
    want = estimate(get_model("mixtral-8x7b").with_(seq_len=32768), make_cluster("dgx-h100", 64), plan)
    assert dash.result.memory_total == want.memory_total and dash.result.step_time == want.step_time
    assert "EP all-to-all" in dash.output.value and "CP communication (exposed)" in dash.output.value
    assert dash.plain_text().splitlines()[-1].startswith("mixtral-8x7b 32K: dp=8 tp=2 pp=1 cp=4 ep=8 ZeRO-1")


KNOBS = [("seq_len", 65536, lambda e: e.memory_total), ("gpus", 128, lambda e: e.plan.dp),
         ("tp", 4, lambda e: e.memory_total), ("cp", 8, lambda e: e.memory_total),
         ("cp_impl", "ulysses", lambda e: e.time.cp_comm), ("ep", 4, lambda e: e.memory_total),
         ("experts", 16, lambda e: e.model.num_params()), ("top_k", 4, lambda e: e.step_time),
         ("recompute", "full", lambda e: e.memory_total), ("model", "llama-7b", lambda e: e.model.name)]


def test_every_knob_changes_the_plan_shown(dash, monkeypatch):
    monkeypatch.setattr(dash, "figure", lambda result: None)  # the wiring, not the drawing
    assert {k for k, _, _ in KNOBS} == set(dash.controls)
    for name, value, seen in KNOBS:
        before, shown = dash.values()[name], seen(dash.result)
        dash.controls[name].value = value
        assert dash.last_error is None, (name, dash.last_error)
        assert seen(dash.result) != shown, name
        dash.controls[name].value = before


def test_experts_and_top_k_override_the_models_own(dash, monkeypatch):
    monkeypatch.setattr(dash, "figure", lambda result: None)
    dash.controls["experts"].value, dash.controls["top_k"].value = 64, 1
    moe = dash.result.model.moe
    assert (moe.num_experts, moe.top_k) == (64, 1)
    assert dash.result.model.moe == replace(get_model("mixtral-8x7b").moe, num_experts=64, top_k=1)
    dash.controls["experts"].value, dash.controls["top_k"].value = "(model's)", "(model's)"


def test_a_dense_model_disables_the_moe_knobs_and_cp_1_the_method(dash, monkeypatch):
    monkeypatch.setattr(dash, "figure", lambda result: None)
    dash.controls["model"].value = "llama-7b"
    assert [n for n, c in dash.controls.items() if c.disabled] == ["ep", "experts", "top_k"]
    assert dash.result.plan.ep == 1
    dash.controls["cp"].value = 1
    assert dash.controls["cp_impl"].disabled
    dash.controls["model"].value, dash.controls["cp"].value = "mixtral-8x7b", 4


@pytest.mark.parametrize("knobs, rule", [
    ({"gpus": 8, "cp": 8}, r"tp x cp = 2 x 8 = 16 does not divide 8 GPUs"),
    ({"cp": 8, "cp_impl": "ulysses"}, r"DeepSpeed-Ulysses needs n_kv_head % cp == 0"),
    ({"experts": 16, "ep": 32, "gpus": 32}, r"ep must divide dp x cp"),
])
def test_a_broken_rule_is_shown_and_the_stale_result_cleared(dash, monkeypatch, knobs, rule):
    import re

    monkeypatch.setattr(dash, "figure", lambda result: None)
    before = dash.values()
    for name, value in knobs.items():
        dash.controls[name].value = value
    assert dash.result is None and re.search(rule, dash.last_error), dash.last_error
    assert "no result" in dash.output.value and dash.png == b""
    for name in knobs:
        dash.controls[name].value = before[name]
    assert dash.last_error is None
