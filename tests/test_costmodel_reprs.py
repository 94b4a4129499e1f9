"""Every public result type of the cost model has a short repr: one summary line (and, for a
search or an advice, its top plans below), never the dataclass dump (issue 20: 5.9 million
characters for ``repr(search(...))``, 1.1 million for ``repr(advise(...))``); searches, advice
and estimates also draw a table in a notebook (``_repr_html_``)."""

from __future__ import annotations

import dataclasses

import pytest

import parlab.costmodel as cm
from parlab.costmodel import inference
from parlab.costmodel.answers import walls
from parlab.costmodel.reprs import HTML_TOP, TOP, result_types
from parlab.costmodel.search import advisor
from parlab.course.guide_tables import measured_pairs

MAX_LEN = 700  # characters: a summary line of at most 600 plus TOP plan lines
INPUTS = {"Assumptions", "Cluster", "FP8Recipe", "GPUSpec", "GroupLink", "GroupSpan", "LinkSpec", "ModelSpec",
          "Plan", "Precision", "Term"}  # what a user passes in (their dataclass repr is short)


@pytest.fixture(scope="module")
def results() -> list:
    model, cluster = cm.get_model("gpt3-175b"), cm.make_cluster("dgx-a100", 64)
    advice = cm.advise(model, cluster, 512)
    est = advice.best
    fit = inference.fit_decode(measured_pairs(), "chatglm-6b")
    return [est, advice.result, advice, advisor.verdict(advice), advisor.guide_rule(cluster, False),
            est.time, est.stage, est.stage.activations, cm.zero3_vs_zero2(model, 8),
            cm.model_state_memory(7e9, "bf16", "adam"), cm.zero3_vs_3d(model, [64], 512)[0],
            cm.guide_1_19(), cm.tp_without_nvlink(), cm.zero3_ranking(), cm.megatron_table1()[0],
            cm.bloom_table()[0], cm.megatron_zero3()[0], cm.megatron_summary(cm.megatron_table1()),
            inference.generation_time("chatglm-6b", "a100", 100), fit, inference.gpu_gap(fit, 1000),
            walls.memory_wall("gpt3-175b"), walls.compute_wall("gpt3-175b"),
            walls.memory_wall("gpt3-175b").fit("a100"), cm.one_gpu_levers()[0]]


def test_every_result_type_is_covered(results):
    made = {type(r) for r in results}
    assert set(result_types()) <= made, set(result_types()) - made
    public = {getattr(cm, n) for n in cm.__all__ if isinstance(getattr(cm, n), type)}
    outputs = {c for c in public if dataclasses.is_dataclass(c) and c.__name__ not in INPUTS}
    assert outputs <= set(result_types()), outputs - set(result_types())


def test_every_repr_is_short(results):
    for r in results:
        text = repr(r)
        assert len(text) <= MAX_LEN, (type(r).__name__, len(text))
        assert text.startswith(type(r).__name__ + "("), text[:80]
        assert len(text.splitlines()) <= 1 + TOP


def test_a_search_and_an_advice_list_their_fastest_plans(results):
    est, result, advice = results[:3]
    for obj in (result, advice):
        lines = repr(obj).splitlines()
        assert len(lines) == 1 + TOP and lines[1].startswith("  1. " + est.plan.describe())
        table = obj._repr_html_()
        assert table.startswith("<table>") and table.count("<tr>") == 1 + HTML_TOP
    assert est.plan.describe() in repr(est) and "fits" in repr(est)
    assert est._repr_html_().count("<tr>") == 1 + len(est.memory_breakdown()) + len(est.time_breakdown())
