"""An MoE model's layers on one GPU (Megatron-Core's layout of them): a layer's parameters split
into the dense part (attention, norms, router, shared experts: split by TP, replicated over EP)
and the routed experts (E / ep of them, each split by expert TP = tp), a pipeline stage's split,
and a layer's forward FLOPs. Dense models fall through to the 3D formulas unchanged.

The MoE counts themselves (experts' parameters, capacity, expert FLOPs) are
``expert_parallel``'s; this module only places them on a tp x ep x pp x cp grid.
"""

from __future__ import annotations

from functools import lru_cache

from parlab.costmodel.pricing.attention_terms import (
    attention_param_split,
    projection_weights,
    score_flops,
)
from parlab.costmodel.pricing.expert_parallel.layer import (
    expert_forward_flops,
    expert_params_per_gpu,
)
from parlab.costmodel.pricing.params import layer_params_per_gpu, stage_layers, stage_params
from parlab.costmodel.pricing.pipeline_split import stage_index
from parlab.costmodel.specs.models import ModelSpec


def _norms(model: ModelSpec) -> int:
    return model.norm_params_per_layer()


def layer_param_split(model: ModelSpec, tp: int = 1, ep: int = 1, moe_layer: bool = True) -> tuple[float, float]:
    """(dense, routed-expert) parameters of one layer on one GPU. A dense layer (or any layer of a
    dense model): ``layer_params_per_gpu`` and no experts. An MoE layer: attention / t + norms +
    the router h E (replicated, Megatron-Core's ``TopKRouter``) + K_s shared experts / t, and the
    routed experts E / ep x params_per_expert / t (``expert_parallel.expert_params_per_gpu`` with
    expert TP = tp, Megatron-Core's default). The latent attention's down-projections are counted
    as split by TP like the rest (a small overestimate of the split)."""
    moe = model.moe
    if moe is None or not moe_layer:
        if moe is None:
            return layer_params_per_gpu(model, tp), 0.0
        split, replicated = attention_param_split(model)  # (``attention_terms``: QK-norm, output bias whole)
        return (split + model.moe_model()._dense_mlp()) / tp + replicated + _norms(model), 0.0
    h = model.hidden
    split, replicated = attention_param_split(model)
    dense = ((split + moe.shared_experts * moe.params_per_expert(h)) / tp + replicated + _norms(model)
             + moe.router_params(h))
    return dense, expert_params_per_gpu(h, moe, 1, ep, etp=tp)


@lru_cache(maxsize=1024)
def stage_layer_kinds(model: ModelSpec, pp: int, stage: str | int,
                      layout: tuple[int, ...] | None = None) -> tuple[int, int]:
    """(dense layers, MoE layers) on the 'first', 'last' (or i-th) stage's layers (``layout``, a
    plan's split; ceil(l / pp) each without one): an MoE model's dense first layers (DeepSeek-V3:
    3) sit on the first stage(s); a dense model's are all dense. Memoised on every argument (the
    whole frozen model, the layout tuple): a search asks it for every plan of a few layouts."""
    if layout is None:
        L = stage_layers(model, pp)
        before = 0 if (stage == "first" or pp == 1) else model.layers - L
    else:
        i = stage_index(stage, pp)
        L, before = layout[i], sum(layout[:i])
    if model.moe is None:
        return L, 0
    dense = max(0, min(L, model.moe.dense_layers - before))
    return dense, L - dense


@lru_cache(maxsize=1024)
def stage_param_split(model: ModelSpec, tp: int, pp: int, stage: str | int, ep: int = 1,
                      layout: tuple[int, ...] | None = None) -> tuple[float, float]:
    """(dense, routed-expert) parameters one GPU of the 'first' or 'last' stage holds before ZeRO:
    ``stage_params``'s ends (embeddings, output layer) and its layers' dense parts, and its MoE
    layers' experts. For a dense model ``(stage_params(...), 0)``. Memoised (a pure function of a
    frozen model and its arguments, the layout tuple included, all in the key): a search asks it
    for every plan of the same few layouts."""
    if model.moe is None:
        return stage_params(model, tp, pp, stage, layout), 0.0
    ends = (stage_params(model, tp, pp, stage, layout)
            - stage_layers(model, pp, layout, stage if layout else None) * layer_params_per_gpu(model, tp))
    n_dense, n_moe = stage_layer_kinds(model, pp, stage, layout)
    d_dense, _ = layer_param_split(model, tp, ep, moe_layer=False)
    d_moe, e_moe = layer_param_split(model, tp, ep, moe_layer=True)
    return ends + n_dense * d_dense + n_moe * d_moe, n_moe * e_moe


def moe_model_layer_flops(model: ModelSpec, micro_batch: int = 1, tp: int = 1, cp: int = 1,
                          moe_layer: bool = True, padded: bool = True) -> float:
    """Matmul FLOPs of the forward pass of one layer of an MoE model on one GPU. A dense first
    layer: 2 T (attention + dense MLP weights) / t + the scores. An MoE layer: 2 T (attention +
    router + shared experts' weights) / t for the T = b s / cp tokens of the rank, the routed experts'
    ``expert_parallel.expert_forward_flops`` (over the padded E x C rows of a capacity-bound
    layer, or with ``padded=False`` the min(T k, E C) assignments the capacity keeps, what MFU
    counts) / t, and the attention
    scores 4 b s^2 h / (t cp) (each CP rank's s / cp queries against all s keys; Narayanan et al.
    2021, Sec. 5.1; ``attention_terms.score_flops``: width a d, bounded by a window). The attention's
    projections are its matmul weights (``attention_terms.projection_weights``: biases, norms and
    sinks are not matmuls). Under balanced routing each EP rank computes as many expert rows as its own
    tokens produce."""
    moe = model.moe
    assert moe is not None
    s, b, h = model.seq_len, micro_batch, model.hidden
    tokens = max(1, s * b // cp)
    scores = score_flops(model, b) / cp
    if not moe_layer:
        return (2 * tokens * (projection_weights(model) + model.moe_model()._dense_mlp()) + scores) / tp
    dense = 2 * tokens * (projection_weights(model) + moe.shared_experts * moe.params_per_expert(h)
                          + moe.router_params(h))
    experts = expert_forward_flops(tokens, h, moe, padded)
    return (dense + experts + scores) / tp
