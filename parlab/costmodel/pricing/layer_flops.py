"""FLOPs of one layer and of one step: the forward matmuls of a layer and of the logits, and the
model and hardware FLOPs of a step (Narayanan et al. 2021, Eq. 3; Chowdhery et al. 2022, App. B)."""

from __future__ import annotations

from parlab.costmodel.pricing.attention_terms import projection_weights, score_flops
from parlab.costmodel.pricing.moe_layer import moe_model_layer_flops
from parlab.costmodel.specs.models import ModelSpec


def layer_forward_flops(model: ModelSpec, micro_batch: int = 1, tp: int = 1) -> float:
    """Matmul FLOPs of one layer's forward pass on one TP rank: 2bs(4h^2 + n h f)/t + 4bs^2h/t.

    Projections QKV + output 8bsh^2, MLP 2bshf per matrix (n = 2, or 3 gated), attention scores
    and their product with V 4bs^2h (Narayanan et al. 2021, Section 5.1: 24bsh^2 + 4bs^2h for
    f = 4h, the per-layer forward term of Eq. 3). Two FLOPs per multiply-add. With grouped-query
    attention or a head dimension other than h / a, the projections are 2bs(h a d + 2 h g d + a d h)
    and the scores 4 b s s_ctx a d, s_ctx bounded by a sliding window (``attention_terms``: the
    mean layer of a model mixing windowed and full layers).
    """
    s, b, h, f = model.seq_len, micro_batch, model.hidden, model.ffn
    n_mats = 3 if model.gated_mlp else 2
    return (2 * b * s * (projection_weights(model) + n_mats * h * f) + score_flops(model, b)) / tp


def logit_forward_flops(model: ModelSpec, micro_batch: int = 1, tp: int = 1) -> float:
    """Forward FLOPs of the output layer (logits): 2 b s h V / t (Narayanan et al. 2021, Eq. 3)."""
    return 2 * micro_batch * model.seq_len * model.hidden * model.vocab / tp


def recompute_module_flops(model: ModelSpec, modules: tuple[str, ...], micro_batch: int = 1, tp: int = 1,
                           cp: int = 1, moe_layer: bool | None = None) -> float:
    """Forward matmul FLOPs one layer runs again on one GPU when Megatron-Core recomputes
    ``modules`` (``activation_terms.RECOMPUTE_MODULES``), for the s / cp tokens of a CP rank:

    * core_attn: the score and value products 4 b s^2 h / t (Narayanan et al. 2021, Sec. 5.1;
      what selective recompute repeats, Korthikanti et al. 2022, Sec. 5), with the attention's own
      width and window (``attention_terms.score_flops``);
    * mlp (a dense layer's MLP): 2 b s n h f / t, n = 2 matrices (3 gated);
    * moe (an MoE layer's router, shared and routed experts over their padded rows) and
      shared_experts (the shared experts alone): their share of ``moe_layer.moe_model_layer_flops``;
    * layernorm, moe_act: elementwise kernels, no matmul FLOPs (their HBM traffic is
      ``step_time``'s).

    ``moe_layer``: False for a dense layer of an MoE model; None, an MoE layer if the model has experts.
    """
    s, b, h = model.seq_len, micro_batch, model.hidden
    moe = model.moe if moe_layer is not False else None
    tokens = max(1, s * b // cp)
    out = 0.0
    if "core_attn" in modules:
        out += score_flops(model, b) / tp / cp  # 4 b s^2 h for multi-head attention
    if "mlp" in modules and moe is None:
        mlp = (model.moe_model()._dense_mlp() if model.moe is not None
               else (3 if model.gated_mlp else 2) * h * model.ffn)
        out += 2 * tokens * mlp / tp
    if moe is not None and ("moe" in modules or "shared_experts" in modules):
        shared = 2 * tokens * moe.shared_experts * moe.params_per_expert(h)
        out += shared / tp
        if "moe" in modules:
            from parlab.costmodel.pricing.expert_parallel.layer import expert_forward_flops

            out += (2 * tokens * moe.router_params(h) + expert_forward_flops(tokens, h, moe, True)) / tp
    return out


def step_flops(model: ModelSpec, batch: int, recompute: str = "none",
               modules: tuple[str, ...] = ()) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one step on ``batch`` sequences.

    Model FLOPs count forward + backward = 3 forward passes (what MFU counts: Chowdhery et al.
    2022, Appendix B; its 6N + 12 l s (a d) per token, with ``attention_terms``' widths and window).
    Hardware FLOPs add what recomputation repeats: one more forward of every
    layer with full recompute (Narayanan et al. 2021, Eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh)),
    the attention-score matmuls 4bs^2h per layer with selective recompute (Korthikanti et al.
    2022, Section 5), and FlashAttention's recomputation of the scores Q K^T in its backward pass,
    2bs^2h per layer (Dao et al. 2022, Sec. 3.1). For GPT shapes the model FLOPs equal Eq. 3's
    72 B s l h^2 (1 + s/6h + V/12lh). ``recompute='modules'`` repeats ``recompute_module_flops``
    of ``modules`` in every layer. An MoE model (``_moe_step_flops``): model FLOPs count the
    expert work the capacity keeps, hardware FLOPs the padded capacity the GPUs run.
    """
    if recompute == "modules":
        model_flops, hardware = step_flops(model, batch, "none")
        dense = model.moe.dense_layers if model.moe is not None else model.layers
        kinds = ((dense, False), (model.layers - dense, True)) if model.moe is not None else ((dense, None),)
        return model_flops, hardware + sum(k * recompute_module_flops(model, modules, batch, 1, 1, moe)
                                           for k, moe in kinds if k)
    if model.moe is not None:
        return _moe_step_flops(model, batch, recompute)
    layer = layer_forward_flops(model, batch)
    logits = logit_forward_flops(model, batch)
    model_flops = 3 * (model.layers * layer + logits)
    scores = model.layers * score_flops(model, batch)  # 4bs^2h per layer for multi-head attention
    extra = {"none": 0.0, "full": model.layers * layer, "selective": scores}[recompute]
    if model.flash_attention:  # its backward recomputes the scores Q K^T: 2bs^2h per layer
        extra += scores / 2
    return model_flops, model_flops + extra


def _moe_step_flops(model: ModelSpec, batch: int, recompute: str) -> tuple[float, float]:
    """``step_flops`` of an MoE model: its layers' useful FLOPs x 3 for the model FLOPs (each
    token through its shared experts and those of its top-k the capacity keeps:
    ``moe_layer.moe_model_layer_flops`` unpadded, min(T k, E C) expert rows for the step's T
    tokens; Switch Transformer, Fedus et al. 2022, Sec. 2.1: a dropped token skips the experts);
    the hardware FLOPs count the padded E x C capacity of a capacity-bound layer and what
    recomputation repeats, as for a dense model. So MFU never credits padding or dropped
    tokens, and model FLOPs <= hardware FLOPs for any capacity factor."""
    assert model.moe is not None
    dense, moe = model.moe.dense_layers, model.layers - model.moe.dense_layers
    useful = dense * moe_model_layer_flops(model, batch, 1, 1, False) + moe * moe_model_layer_flops(
        model, batch, 1, 1, True, padded=False)
    padded = dense * moe_model_layer_flops(model, batch, 1, 1, False) + moe * moe_model_layer_flops(
        model, batch, 1, 1, True)
    logits = logit_forward_flops(model, batch)
    scores = model.layers * score_flops(model, batch)
    extra = {"none": 0.0, "full": padded, "selective": scores}[recompute]
    if model.flash_attention:
        extra += scores / 2
    return 3 * (useful + logits), 3 * (padded + logits) + extra
