"""The numbers a chapter prints for one MoE model (``moe_summary``): parameters, FLOPs per token,
expert state per GPU and all-to-all bytes per layer."""

from __future__ import annotations

from parlab.costmodel.pricing.expert_parallel.layer import (
    all_to_all_bytes_per_layer,
    expert_memory_per_gpu,
)
from parlab.costmodel.specs._check import number
from parlab.costmodel.specs.moe import MoEModel
from parlab.costmodel.specs.moe_presets import get_moe_model


def moe_summary(model: str | MoEModel, tokens: int, ep: int, bytes_per_element: float = 2,
                dtype: str = "mixed") -> dict[str, float]:
    """The numbers a chapter prints for one MoE model: total and active parameters, their ratio,
    training FLOPs per token, routed-expert state bytes per GPU and all-to-all bytes per rank per
    layer for T = ``tokens`` per micro-batch on ``ep`` ranks."""
    mm = get_moe_model(model)
    number("bytes_per_element", bytes_per_element)
    return {"total_params": float(mm.total_params()), "active_params": float(mm.active_params()),
            "active_share": mm.active_params() / mm.total_params(),
            "train_flops_per_token": mm.train_flops_per_token(),
            "expert_state_bytes_per_gpu": expert_memory_per_gpu(
                mm.base.hidden, mm.moe, mm.moe_layers, ep, dtype=dtype).total,
            "all_to_all_bytes_per_layer": all_to_all_bytes_per_layer(
                tokens, mm.base.hidden, mm.moe, ep, bytes_per_element)}
