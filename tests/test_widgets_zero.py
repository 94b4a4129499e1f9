"""Chapter 07's ZeRO dashboard: every knob changes the estimate it shows, the figure follows the
stage, and a plan that breaks a rule (offload without the stage it needs) shows the rule and
clears the old table and figure."""

from __future__ import annotations

import pytest

from parlab.costmodel import Plan, estimate, make_cluster
from parlab.widgets.zero import ZeroDashboard

PNG = b"\x89PNG"


@pytest.fixture(scope="module")
def dash():
    return ZeroDashboard()


def test_initial_state_is_zero3_on_64_gpus_with_every_stage_priced(dash):
    assert dash.last_error is None and dash.png.startswith(PNG)
    want = estimate("llama-65b", make_cluster("dgx-a100", 64), Plan(dp=64, zero=3, recompute="full"))
    assert dash.result["stages"][3].memory_total == want.memory_total
    assert all(f"ZeRO-{s}" in dash.output.value for s in range(4))
    assert dash.plain_text().splitlines()[-1].startswith("llama-65b, dp=64 tp=1 pp=1 ZeRO-3")


# each knob, a value to move it to, and what of the shown plan must change
KNOBS = [("model", "llama-7b", lambda e: e.model.name),
         ("cluster", "pcie-10gbe", lambda e: e.cluster.name),
         ("link", "10gbe", lambda e: e.step_time),
         ("gpus", 128, lambda e: e.memory_total),
         ("zero", 2, lambda e: e.memory_total),
         ("offload", "optimizer", lambda e: e.stage.cpu),
         ("micro_batch", 4, lambda e: e.memory_total),
         ("recompute", "selective", lambda e: e.step_time)]


def test_every_knob_changes_the_plan_shown(dash, monkeypatch):
    monkeypatch.setattr(dash, "figure", lambda result: None)  # the wiring, not the drawing
    assert {k for k, _, _ in KNOBS} == set(dash.controls)
    for name, value, seen in KNOBS:
        before, html = dash.values()[name], dash.output.value
        shown = seen(dash.result["stages"][dash.result["zero"]])
        dash.controls[name].value = value
        assert dash.last_error is None, (name, dash.last_error)
        after = dash.result["stages"][dash.result["zero"]]
        assert seen(after) != shown and dash.output.value != html, name
        dash.controls[name].value = before


def test_offload_without_its_stage_names_the_rule_and_clears_the_result(dash, monkeypatch):
    no_figure = lambda result: None  # noqa: E731 (renders only where the picture is checked)
    monkeypatch.setattr(dash, "figure", no_figure)
    dash.controls["offload"].value = "optimizer"
    monkeypatch.undo()
    dash.controls["zero"].value = 2
    assert dash.last_error is None and dash.png.startswith(PNG)
    assert "not valid" in dash.output.value  # ZeRO-0 cannot offload: its row says so
    dash.controls["zero"].value = 0
    assert "needs ZeRO stage >= 1" in dash.last_error
    assert dash.png == b"" and "no result" in dash.output.value and dash.result is None
    dash.controls["offload"].value = "optimizer+params"
    assert "needs ZeRO-3, got ZeRO-0" in dash.last_error and dash.png == b""
    monkeypatch.setattr(dash, "figure", no_figure)
    dash.controls["zero"].value = 3
    assert dash.last_error is None and dash.result["stages"][3].stage.cpu > 0
    dash.controls["offload"].value = "none"


def test_a_model_that_does_not_exist_is_a_message(dash, monkeypatch):
    monkeypatch.setattr(dash, "figure", lambda result: None)
    dash.controls["model"].value = "no-such-model"
    assert dash.last_error and "model" in dash.last_error and "no result" in dash.output.value
    dash.controls["model"].value = "llama-65b"
    assert dash.last_error is None and "llama-65b" in dash.output.value
