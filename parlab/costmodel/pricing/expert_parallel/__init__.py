"""Expert parallelism (mixture of experts), priced: expert capacity, the all-to-all bytes of one
MoE layer, expert parameters and optimizer states per GPU, active vs total parameters and FLOPs.

An MoE layer replaces a dense MLP by E routed experts (each an MLP of width f_e) and a router
(h x E); each token is sent to its top-k experts, whose outputs are summed weighted by the gate
(Shazeer et al. 2017, Eq. 1; GShard, Lepikhin et al. 2020, Sec. 2.2; Switch Transformer, Fedus
et al. 2022, Sec. 2.1), plus K_s shared experts that every token uses (DeepSeek-MoE, Dai et al.
2024, Sec. 3.2). Under expert parallelism the E experts are split over ep ranks (E/ep each, the
ranks usually the data-parallel ones); each rank sends its tokens to their experts' ranks and
gets the outputs back: two all-to-alls in the forward (dispatch, combine) and two in the backward
(GShard, Sec. 3.2 and Fig. 3; Megatron-Core ``MoEAlltoAllTokenDispatcher``).

``parlab.parallel.expert_parallel`` runs the fixed-shape layer on CPU processes; its measured
all-to-all bytes equal ``all_to_all_bytes_per_layer(..., fixed_shape=True)``. Pure Python.

    layer.py     one MoE layer under EP: all-to-alls, expert memory, FLOPs, balance
    summary.py   the numbers a chapter prints for one MoE model

The shapes are specs (``specs.moe``: MoESpec, capacity, MoEModel; ``specs.moe_presets``: Mixtral,
DeepSeek-V3), re-exported here so that one import gives an MoE chapter everything.
"""

from parlab.costmodel.pricing.expert_parallel.layer import (
    all_to_all_bytes_per_layer,
    check_ep,
    ep_layer_collectives,
    expert_forward_flops,
    expert_memory_per_gpu,
    expert_params_per_gpu,
    kept_assignments,
    max_violation,
)
from parlab.costmodel.pricing.expert_parallel.summary import moe_summary
from parlab.costmodel.specs.moe import MoEModel, MoESpec, dispatch_rows, expert_capacity
from parlab.costmodel.specs.moe_presets import MOE_MODELS, get_moe_model, mla_params

__all__ = [
    "all_to_all_bytes_per_layer", "check_ep", "dispatch_rows", "ep_layer_collectives",
    "expert_capacity", "expert_forward_flops", "expert_memory_per_gpu", "expert_params_per_gpu",
    "kept_assignments", "max_violation", "MOE_MODELS", "MoEModel", "get_moe_model", "mla_params", "moe_summary",
    "MoESpec",
]
