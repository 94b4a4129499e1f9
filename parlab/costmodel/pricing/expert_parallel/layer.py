"""One MoE layer under expert parallelism, priced: expert capacity, the all-to-all bytes of one
layer, expert parameters and optimizer states per GPU, FLOPs, and how unbalanced a routing is.

Notation: T tokens per rank per micro-batch (b s), h hidden, E routed experts, k = top-k,
c the capacity factor, C = ceil(c T k / E) slots per expert (Switch Transformer, Eq. 3, for k
experts per token as Megatron-Core's ``get_capacity``), ep the expert-parallel degree.
A capacity-bound layer (GShard, Switch) dispatches a fixed (E, C, h) buffer, padded where an
expert got fewer than C tokens and dropping the tokens beyond C; a dropless one (c = 0 here;
Megatron-Core without a capacity factor) sends each token's k copies, T k rows, in splits that
vary with the routing (their expected size under uniform routing is what is priced).
"""

from __future__ import annotations

from collections.abc import Sequence

from parlab.costmodel.pricing import alphabeta
from parlab.costmodel.pricing.layer_collective import Collective
from parlab.costmodel.pricing.memory import RECOMPUTE, ModelStateMemory, model_state_memory
from parlab.costmodel.specs._check import boolean, canonical, non_negative, positive
from parlab.costmodel.specs.moe import MoESpec, dispatch_rows


def ep_layer_collectives(tokens: int, hidden: int, moe: MoESpec, ep: int,
                         recompute: str = "none", fixed_shape: bool = False) -> tuple[Collective, ...]:
    """The all-to-alls of one MoE layer on one micro-batch of T tokens per rank, in the
    convention of ``tensor_parallel.tp_layer_collectives``: 2 forward (dispatch to the experts'
    ranks, combine back), 2 backward (the gradients retrace both; GShard, Sec. 3.2), 2 more when
    the forward is recomputed (``full``). Each buffer is ``dispatch_rows`` x h elements. Empty
    for ep = 1 (no expert leaves its rank)."""
    positive("tokens", tokens, integer=True)
    positive("hidden", hidden, integer=True)
    positive("ep (expert-parallel degree)", ep, integer=True)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    check_ep(moe, ep)
    if ep == 1:
        return ()
    n = dispatch_rows(tokens, moe, fixed_shape) * hidden
    phases = ["forward", "backward"] + (["recompute"] if recompute == "full" else [])
    what = {"backward": "gradients of combine and dispatch"}
    return tuple(Collective(ph, "all_to_all", 2, n, ep, what.get(ph, "dispatch and combine"))
                 for ph in phases)


def all_to_all_bytes_per_layer(tokens: int, hidden: int, moe: MoESpec, ep: int,
                               bytes_per_element: float = 2, recompute: str = "none",
                               fixed_shape: bool = False) -> float:
    """Bytes one rank sends (and receives) in one MoE layer's all-to-alls for one micro-batch:
    4 x (ep - 1)/ep x rows x h x bytes (6 x with full recomputation): each all-to-all keeps 1/ep
    of the buffer on the rank and sends the rest, one block to each peer (``alphabeta.traffic``
    of the pairwise exchange, Thakur et al. 2005, Sec. 4.6). Exact for a capacity-bound layer,
    the uniform-routing expectation for a dropless one (exact again with ``fixed_shape``)."""
    positive("bytes_per_element", bytes_per_element)
    return sum(c.count * alphabeta.traffic("all_to_all", "pairwise", c.ranks,
                                           c.elements * bytes_per_element)[0]
               for c in ep_layer_collectives(tokens, hidden, moe, ep, recompute, fixed_shape))


def check_ep(moe: MoESpec, ep: int) -> int:
    """ep, if it divides E (each EP rank holds E/ep whole experts), else a ValueError."""
    positive("ep (expert-parallel degree)", ep, integer=True)
    if moe.num_experts % ep:
        raise ValueError(f"ep={ep} must divide num_experts={moe.num_experts}: each expert-parallel "
                         f"rank holds num_experts/ep whole experts")
    return ep


def expert_params_per_gpu(hidden: int, moe: MoESpec, moe_layers: int, ep: int, etp: int = 1) -> float:
    """Routed-expert parameters one GPU holds: moe_layers x E/ep x params_per_expert / etp (etp:
    tensor parallelism inside each expert, Megatron-Core's expert_tensor_parallel_size). The
    router and the shared experts are replicated like the dense layers and are not counted."""
    check_ep(moe, ep)
    non_negative("moe_layers", moe_layers, integer=True)
    positive("etp (expert tensor-parallel degree)", etp, integer=True)
    return moe_layers * (moe.num_experts // ep) * moe.params_per_expert(hidden) / etp


def expert_memory_per_gpu(hidden: int, moe: MoESpec, moe_layers: int, ep: int, etp: int = 1,
                          dtype: str = "mixed", optimizer: str = "adam") -> ModelStateMemory:
    """Weights, gradients, master weights and optimizer states of one GPU's routed experts
    (``expert_params_per_gpu`` x 16 bytes with mixed precision and Adam: ZeRO, Sec. 3.1)."""
    return model_state_memory(expert_params_per_gpu(hidden, moe, moe_layers, ep, etp), dtype, optimizer)


def max_violation(loads: Sequence[float]) -> float:
    """MaxVio = (max_i load_i - mean load) / mean load: how much the busiest expert exceeds a
    perfectly balanced one (Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing Strategy for
    Mixture-of-Experts", Sec. 4.1). 0 when balanced; E - 1 when one expert takes everything."""
    loads = [non_negative("load", x) for x in loads]
    if not loads or not sum(loads):
        raise ValueError(f"max_violation needs at least one expert with a load > 0, got {loads!r}")
    mean = sum(loads) / len(loads)
    return max(loads) / mean - 1


def kept_assignments(tokens: int, moe: MoESpec) -> int:
    """Token-expert assignments a layer computes for T tokens: min(T k, E C), the expected count
    under uniform routing (each expert gets T k / E assignments and keeps at most its C slots).
    A capacity-bound layer drops the rest, which skip the experts and pass on by the residual
    (Switch Transformer, Fedus et al. 2022, Sec. 2.1 and Fig. 3; GShard, Lepikhin et al. 2020,
    Sec. 2.2); with c >= 1 or dropless (c = 0) every one of the T k is kept."""
    positive("tokens", tokens, integer=True)
    return tokens * moe.top_k if moe.dropless else min(tokens * moe.top_k, dispatch_rows(tokens, moe))


def expert_forward_flops(tokens: int, hidden: int, moe: MoESpec, padded: bool = True) -> float:
    """Forward FLOPs of one MoE layer's routed experts on T tokens: 2 (3 if gated else 2) h f_e
    per row (one multiply-add per weight, Kaplan et al. 2020, Sec. 2.1). ``padded``: the rows the
    GPUs run, the padded E C buffer of a capacity-bound layer (c times the useful work), what
    hardware FLOPs and the step time count; ``padded=False``: the useful rows only, the
    ``kept_assignments`` min(T k, E C), what model FLOPs (MFU) count: neither the padding nor
    the assignments the capacity drops (with c < 1 fewer than the T k of a dropless layer)."""
    boolean("padded", padded)
    rows = dispatch_rows(tokens, moe) if padded and not moe.dropless else kept_assignments(tokens, moe)
    return 2.0 * rows * (3 if moe.gated else 2) * hidden * moe.expert_ffn
