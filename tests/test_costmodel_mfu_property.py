"""Properties of every priced plan of every preset: MFU is a fraction of the peak, and no term is
negative or NaN, for dense and MoE models alike, whatever the MoE capacity factor (attack review
F16: a capacity factor of 0.01 priced Mixtral at MFU 2.61, its model FLOPs counting the tokens
the capacity drops)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.costmodel import MODELS, Plan, check_plan, estimate, get_model, make_cluster
from parlab.costmodel.pricing.expert_parallel import expert_forward_flops, kept_assignments
from parlab.costmodel.search.ranking import divisors, factorizations
from parlab.costmodel.specs.moe import MoESpec

GPUS = (8, 32, 128, 1024)


@st.composite
def priced(draw):
    """(model, plan) or None: a preset, with a random capacity factor in (0, 4] for an MoE one,
    and a random plan on 8 to 1,024 GPUs, FP8, module-level recompute, all-gather CP and uneven
    pipeline splits included (None where a plan or model rule refuses it)."""
    moe = sorted(n for n, m in MODELS.items() if m.moe is not None)
    model = get_model(draw(st.sampled_from(moe if draw(st.booleans()) else sorted(MODELS))))  # MoE half the time
    if model.moe is not None and draw(st.booleans()):
        c = draw(st.floats(min_value=0.0, max_value=4.0, exclude_min=True))
        model = model.with_(moe=replace(model.moe, capacity_factor=c))
    n = draw(st.sampled_from(GPUS))
    cp = draw(st.sampled_from([1, 1, 2, 4]))
    dp, tp, pp = draw(st.sampled_from(list(factorizations(n // cp))))
    ep = draw(st.sampled_from([e for e in divisors(dp * cp) if model.moe and model.moe.num_experts % e == 0]
                              or [1]))

    def pick(values):
        return draw(st.sampled_from(values))

    fields = {"zero": pick([0, 1] if pp > 1 else [0, 1, 2]), "micro_batch": pick([1, 2, 4]),
              "micro_batches": pick([1, 4, 16]) * pp, "recompute": pick(["none", "selective", "full", "modules"]),
              "schedule": pick(["1f1b", "gpipe"]), "sequence_parallel": tp > 1 and (ep > 1 or pick([False, True])),
              "offload": pick(["none", "optimizer"]), "dtype": pick(["bf16", "fp16", "fp32", "fp8"]),
              "cp_impl": pick(["ring", "ulysses", "all-gather"])}
    if fields["recompute"] == "modules":  # Megatron-Core's recompute_modules
        fields["recompute_modules"] = pick([("core_attn",), ("mlp",), ("moe",), ("layernorm", "mlp")])
    if pp > 1:  # main's uneven split: the first or last stage's layers, or the embedding / loss as a layer
        fields.update(pick([{}, {"first_stage_layers": 1}, {"last_stage_layers": 1}, {"embedding_as_layer": True},
                            {"loss_as_layer": True}]))
    try:
        plan = Plan(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, **fields)
        check_plan(model, make_cluster("dgx-h100", n), plan)
    except ValueError:  # a rule refuses it (ZeRO-Offload with ZeRO-0, tp not dividing the heads, ...)
        return None
    return model, plan


@settings(max_examples=300, deadline=None)
@given(priced())
def test_no_plan_of_any_preset_prices_mfu_above_one_or_a_negative_or_nan_term(case):
    if case is None:
        return
    model, plan = case
    est = estimate(model, make_cluster("dgx-h100", plan.n_gpus), plan)
    terms = {**est.memory_terms(), **est.time_terms()}
    assert all(math.isfinite(v) and v >= 0 for v in terms.values()), terms
    model_flops, hardware_flops = est.flops
    assert 0 < model_flops <= hardware_flops
    assert math.isfinite(est.step_time) and est.step_time > 0
    assert 0 < est.mfu <= 1, (plan.describe(), model.moe, est.mfu)


@pytest.mark.parametrize("c", [0.01, 0.1, 0.5])
def test_a_capacity_below_one_prices_only_the_tokens_it_keeps(c):
    """Attack review F16: Mixtral with c < 1 on dp=8 ep=8 priced MFU 2.61 (c = 0.01) and 1.97
    (c = 0.1). The model FLOPs now count the min(T k, E C) kept assignments."""
    mixtral = get_model("mixtral-8x7b")
    model = mixtral.with_(moe=replace(mixtral.moe, capacity_factor=c))
    est = estimate(model, make_cluster("dgx-h100", 8), Plan(dp=8, ep=8, zero=1, micro_batches=8))
    assert 0 < est.mfu <= 1
    assert est.flops[0] < estimate(mixtral, est.cluster, est.plan).flops[0]  # fewer tokens through the experts


def test_kept_assignments_are_capped_by_the_capacity():
    moe = MoESpec(8, 2, 64, capacity_factor=0.5)
    assert kept_assignments(64, moe) == 8 * 8  # C = ceil(0.5 x 64 x 2 / 8) = 8 slots x 8 experts, of T k = 128
    assert kept_assignments(64, replace(moe, capacity_factor=1.25)) == 128  # every T k kept
    assert kept_assignments(64, replace(moe, capacity_factor=0.0)) == 128  # dropless
    useful, padded = (expert_forward_flops(64, 16, moe, p) for p in (False, True))
    assert useful == padded  # c < 1: the buffer is full, every slot is useful
