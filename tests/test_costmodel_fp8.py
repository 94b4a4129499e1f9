"""FP8 training in ``estimate``: the linear layers' GEMMs at the FP8 peak and nothing else, the FP8
weight copies and scales on top of bf16's memory, FSDP's FP8 all-gather, one recipe table."""

import pytest

from parlab.cli import main
from parlab.costmodel import DEFAULT, Plan, estimate, get_model, make_cluster, search
from parlab.costmodel.plan.fp8 import zero3_fp8_gather_bytes
from parlab.costmodel.pricing.fp8 import stage_linear_params
from parlab.costmodel.specs.fp8 import FP8_RECIPES, get_fp8_recipe

H100 = make_cluster("dgx-h100", 64)
GEMM_BOUND = Plan(dp=1, tp=8, pp=8, micro_batch=1, global_batch=64, sequence_parallel=True,
                  recompute="selective")  # GPT-3 175B, Megatron-LM's layout: matmuls are most of the step


def _pair(plan=GEMM_BOUND, model="gpt3-175b", cluster=H100, **fp8):
    return estimate(model, cluster, plan), estimate(model, cluster, plan.with_(dtype="fp8", **fp8))


def test_fp8_is_faster_than_bf16_on_an_h100_by_less_than_2x():
    bf16, fp8 = _pair()
    assert 1.1 < bf16.step_time / fp8.step_time < 2.0
    assert bf16.time.matmul / fp8.time.matmul < 2.0  # even the matmuls: attention and logits stay BF16
    for term in ("compute: elementwise", "TP communication", "PP communication", "optimizer step"):
        assert fp8.time_terms()[term] == bf16.time_terms()[term]  # the non-GEMM terms stay


def test_only_the_linear_gemms_move_to_the_fp8_peak():
    bf16, fp8 = _pair()
    f, a = fp8.time.facts, DEFAULT
    assert f["flops_mb"] == bf16.time.facts["flops_mb"]  # the same FLOPs, at two rates
    rest = f["flops_mb"] - f["fp8_flops_mb"]
    assert 0 < rest < 0.2 * f["flops_mb"]  # attention cores and logits
    per_mb = f["fp8_flops_mb"] / (1979e12 * a.fp8_matmul_efficiency) + rest / (989e12 * a.matmul_efficiency)
    assert fp8.time.matmul == pytest.approx(GEMM_BOUND.m * per_mb)
    assert fp8.mfu > bf16.mfu and fp8.time.facts["peak"] == 989e12  # MFU over the bf16 peak


def test_fp8_memory_is_bf16s_plus_the_fp8_copies():
    bf16, fp8 = _pair()
    st = fp8.stage
    linear = stage_linear_params(get_model("gpt3-175b"), st.params, 8, 8, st.stage)
    assert st.fp8_weights == pytest.approx(2 * linear, rel=1e-3)  # the weight and its transpose, 1 B each
    assert st.weights - bf16.stage.weights == st.fp8_weights
    extra = fp8.memory_total - bf16.memory_total
    assert extra == pytest.approx(st.fp8_weights * (1 + DEFAULT.fragmentation))
    assert "FP8 copies and scales (te-delayed)" in fp8.explain()


def test_recipes_are_one_table_per_tensor():
    assert set(FP8_RECIPES) == {"te-delayed", "te-current", "deepseek-blockwise", "mxfp8"}
    assert get_fp8_recipe("te-delayed").amax_history == 1024  # TE's DelayedScaling default
    blockwise = get_fp8_recipe("deepseek")
    assert (blockwise.activation_scale, blockwise.weight_scale) == (128, 128 * 128)  # DeepSeek-V3 Sec. 3.3.2
    assert blockwise.weight_bytes_per_param() == pytest.approx(2 * (1 + 4 / 16384))
    assert get_fp8_recipe("mxfp8").weight_bytes_per_param() == pytest.approx(2 * (1 + 1 / 32))
    assert get_fp8_recipe("te-current").weight_bytes_per_param() == 2.0
    with pytest.raises(ValueError, match="unknown FP8 recipe 'nvfp4'; allowed: te-delayed"):
        Plan(dtype="fp8", fp8_recipe="nvfp4")


def test_fsdp_gathers_the_linear_weights_in_fp8():
    model, plan = get_model("gpt3-13b"), Plan(dp=64, zero=3, zero3_impl="fsdp", dtype="fp8", fp8_recipe="te-current")
    params = estimate(model, H100, plan).time.facts["P"]
    linear = stage_linear_params(model, params, 1, 1, "first")
    assert zero3_fp8_gather_bytes(model, plan, params) == pytest.approx(2 * params - linear)
    assert zero3_fp8_gather_bytes(model, plan.with_(zero3_impl="deepspeed", dtype="fp8"), params) == 2 * params
    fsdp_bf16, fsdp_fp8 = _pair(plan.with_(dtype="bf16"), model, fp8_recipe="te-current")
    assert fsdp_fp8.time.facts["dp_total"] < fsdp_bf16.time.facts["dp_total"]
    assert "the linear weights gathered in FP8" in fsdp_fp8.explain()


def test_bf16_plans_say_nothing_of_fp8():
    bf16 = estimate("gpt3-175b", H100, GEMM_BOUND)
    assert "fp8" not in bf16.explain().lower() and bf16.stage.fp8_weights == 0


def test_an_fp8_recipe_needs_dtype_fp8_and_switching_dtype_drops_it():
    with pytest.raises(ValueError, match="fp8_recipe='mxfp8' is for dtype 'fp8', got dtype 'bf16'"):
        Plan(dtype="bf16", fp8_recipe="mxfp8")
    plan = Plan(dtype="float8", fp8_recipe="blockwise")
    assert plan.dtype == "fp8" and plan.fp8_recipe == "deepseek-blockwise"
    assert plan.describe().endswith("fp8(deepseek-blockwise)") and plan.with_(dtype="bf16").fp8_recipe is None


def test_search_with_fp8_on_a100s_says_why_nothing_runs():
    result = search("gpt3-6.7b", make_cluster("dgx-a100", 8), 8, dtype="fp8", micro_batches=(1,))
    assert result.reason.startswith("no valid plan: a100-80gb has no FP8 tensor cores")


def test_cli_dtype_fp8(capsys):
    assert main(["estimate", "--model", "gpt3-6.7b", "--gpu", "h100", "--gpus", "8", "--zero", "1",
                 "--dtype", "fp8", "--fp8-recipe", "te-current"]) == 0
    assert "FP8 (te-current)" in capsys.readouterr().out
    assert main(["estimate", "--model", "gpt3-6.7b", "--gpus", "8", "--dtype", "fp8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "a100-80gb has no FP8 tensor cores" in err and len(err.splitlines()) == 1
    for command in ("estimate", "search", "memory"):
        assert main([command, "--help"]) == 0
        assert "fp8" in capsys.readouterr().out
