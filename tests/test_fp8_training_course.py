"""Chapter 09's FP8 section (parlab.costmodel.answers.fp8_training): every recipe of
specs.fp8 listed with its extra bytes, one plan priced in fp16/bf16/FP8 with the recipes the GPU runs."""

import pytest

from parlab.costmodel import Plan, make_cluster
from parlab.costmodel.answers.fp8_training import (
    FP8_TENSORS,
    precision_rows,
    precisions,
    recipe_rows,
)
from parlab.costmodel.specs.fp8 import FP8_RECIPES

PLAN = Plan(dp=4, tp=2, zero=1, sequence_parallel=True, recompute="selective")


def test_every_recipe_is_a_row_with_its_own_bytes():
    rows = recipe_rows()[0]
    assert [r[0] for r in rows] == list(FP8_RECIPES)
    assert all(r[4] == FP8_RECIPES[r[0]].weight_bytes_per_param() >= 2 for r in rows)


def test_each_tensor_row_names_a_source():
    assert all(tensor and precision and source for tensor, precision, source in FP8_TENSORS)
    assert any(p.startswith("FP32") for _, p, _ in FP8_TENSORS)  # master weights, gradients, Adam


def test_fp8_adds_weight_bytes_and_shortens_the_step_on_h100():
    rows = precisions("llama-3.1-8b", make_cluster("dgx-h100", 8), PLAN)
    assert [r.label for r in rows] == ["fp16", "bf16", "fp8 (te-delayed)", "fp8 (te-current)",
                                       "fp8 (deepseek-blockwise)"]  # no MXFP8 on Hopper
    bf16, fp8 = rows[1].estimate, rows[2].estimate
    assert fp8.memory_terms()["parameters"] > bf16.memory_terms()["parameters"]
    assert fp8.memory_terms()["gradients"] == bf16.memory_terms()["gradients"]
    assert fp8.step_time < bf16.step_time and fp8.memory_total <= fp8.memory_capacity
    assert len(precision_rows(rows)[0]) == len(rows)


def test_blackwell_adds_mxfp8():
    rows = precisions("llama-3.1-8b", make_cluster("dgx-b200", 8), PLAN)
    assert rows[-1].label == "fp8 (mxfp8)"
    assert rows[-1].estimate.plan.fp8_recipe == "mxfp8"


@pytest.mark.parametrize("recipe", ["te-delayed", "deepseek-blockwise"])
def test_the_chapter_09_plan_fits_an_h100_in_fp8(recipe):
    from parlab.costmodel import estimate, get_model

    e = estimate(get_model("llama-3.1-8b"), make_cluster("dgx-h100", 8), PLAN.with_(dtype="fp8", fp8_recipe=recipe))
    assert e.fits
