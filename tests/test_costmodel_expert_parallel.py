"""The expert-parallel cost model (parlab.costmodel.pricing.expert_parallel): capacity, all-to-all bytes,
expert memory, and the published parameter counts of Mixtral 8x7B and DeepSeek-V3, by hand."""

from __future__ import annotations

import pytest

from parlab.costmodel.pricing.expert_parallel import (
    all_to_all_bytes_per_layer,
    ep_layer_collectives,
    expert_forward_flops,
    expert_memory_per_gpu,
    expert_params_per_gpu,
    max_violation,
)
from parlab.costmodel.pricing.expert_parallel.summary import moe_summary
from parlab.costmodel.specs.moe import MoESpec, dispatch_rows, expert_capacity
from parlab.costmodel.specs.moe_presets import MOE_MODELS, get_moe_model

SWITCH = MoESpec(num_experts=8, top_k=2, expert_ffn=64, capacity_factor=1.25, gated=False, bias=True)


def test_capacity_is_the_switch_formula_with_k_assignments_per_token():
    assert expert_capacity(100, SWITCH) == 32  # ceil(1.25 * 100 * 2 / 8) = ceil(31.25)
    assert expert_capacity(64, SWITCH) == 20
    assert expert_capacity(100, MoESpec(8, 2, 64)) == 100  # dropless: at most every token
    assert dispatch_rows(64, SWITCH) == 8 * 20 and dispatch_rows(64, MoESpec(8, 2, 64)) == 128
    assert dispatch_rows(64, MoESpec(8, 2, 64), fixed_shape=True) == 8 * 64  # padded to C = T


def test_all_to_all_bytes_are_four_buffers_less_the_block_kept():
    t, h, ep = 64, 16, 4
    buf = 8 * 20 * h * 4  # E C h fp32 bytes
    assert all_to_all_bytes_per_layer(t, h, SWITCH, ep, 4) == 4 * buf * (ep - 1) / ep
    assert all_to_all_bytes_per_layer(t, h, SWITCH, ep, 4, recompute="full") == 6 * buf * (ep - 1) / ep
    assert all_to_all_bytes_per_layer(t, h, SWITCH, 1, 4) == 0
    phases = [(c.phase, c.op, c.count) for c in ep_layer_collectives(t, h, SWITCH, 2)]
    assert phases == [("forward", "all_to_all", 2), ("backward", "all_to_all", 2)]


def test_ep_must_divide_the_experts():
    with pytest.raises(ValueError, match="ep=3 must divide num_experts=8"):
        all_to_all_bytes_per_layer(64, 16, SWITCH, 3)
    with pytest.raises(ValueError, match="top_k=9 must be <= num_experts=8"):
        MoESpec(8, 9, 64)


def test_expert_memory_divides_by_ep_and_costs_16_bytes_a_parameter():
    per = SWITCH.params_per_expert(16)
    assert per == 2 * 16 * 64 + 64 + 16
    assert expert_params_per_gpu(16, SWITCH, 3, 4) == 3 * 2 * per
    assert expert_memory_per_gpu(16, SWITCH, 3, 4).total == 16 * 3 * 2 * per


def test_fine_grained_experts_keep_parameters_and_flops():
    moe = MoESpec(16, 2, 1024, shared_experts=1)
    fine = moe.fine_grained(4)
    assert (fine.num_experts, fine.top_k, fine.expert_ffn, fine.shared_experts) == (64, 8, 256, 4)
    assert fine.layer_params(512) - fine.router_params(512) == moe.layer_params(512) - moe.router_params(512)
    assert expert_forward_flops(100, 512, fine, padded=False) == expert_forward_flops(100, 512, moe, padded=False)


def test_padded_experts_compute_the_capacity_factor_times_the_useful_work():
    moe = MoESpec(8, 2, 64, capacity_factor=2.0)
    assert expert_forward_flops(64, 16, moe) == 2 * expert_forward_flops(64, 16, moe, padded=False)


def test_published_parameter_counts():
    """Mixtral 8x7B: 46.7B total, 12.9B active (Jiang et al. 2024); DeepSeek-V3: 671B total, 37B
    activated (DeepSeek-AI 2024, abstract): exact to the published rounding for Mixtral, within
    2% for DeepSeek-V3's active count (37.55B: the report rounds it, the MTP module left out)."""
    mixtral, ds = MOE_MODELS["mixtral-8x7b"], get_moe_model("DeepSeek-V3")
    assert round(mixtral.total_params() / 1e9, 1) == 46.7
    assert round(mixtral.active_params() / 1e9, 1) == 12.9
    assert round(ds.total_params() / 1e9) == 671
    assert abs(ds.active_params() / 37e9 - 1) < 0.02
    s = moe_summary("mixtral-8x7b", tokens=4096, ep=8)
    assert s["train_flops_per_token"] == 6 * s["active_params"]
    assert s["expert_state_bytes_per_gpu"] == 16 * 32 * 3 * 4096 * 14336


def test_max_violation():
    assert max_violation([4, 4, 4, 4]) == 0
    assert max_violation([8, 0, 0, 0]) == 3
    with pytest.raises(ValueError, match="at least one expert"):
        max_violation([0, 0])
