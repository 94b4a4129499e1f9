"""One transformer layer's stored activations, term by term (Korthikanti et al. 2022, Table 2
and Sec. 4.1), and which terms each of Megatron-Core's recompute modules drops: the one split
that no recompute, selective, full and module-level recompute all read."""

from __future__ import annotations

from parlab.costmodel.pricing.attention_terms import kv_replicas
from parlab.costmodel.specs._check import canonical
from parlab.costmodel.specs.models import ModelSpec
from parlab.costmodel.specs.moe import dispatch_rows

#: Megatron-Core's ``recompute_modules`` (megatron/core/transformer/transformer_config.py), in the
#: order parlab prints them. core_attn, mlp, moe and shared_experts are checkpointed normally
#: (their inputs kept, what is inside recomputed); layernorm, moe_act and mla_up_proj discard
#: their outputs and recompute them from their inputs.
RECOMPUTE_MODULES = ("core_attn", "layernorm", "mlp", "moe", "moe_act", "shared_experts", "mla_up_proj")

#: The stored terms each module's recompute drops (``layer_activation_terms``' names).
MODULE_TERMS: dict[str, tuple[str, ...]] = {
    "core_attn": ("attention scores",),
    "layernorm": ("norm outputs",),
    "mlp": ("MLP inner",),
    "moe": ("expert inputs", "expert inner", "expert activation output", "shared experts", "router probabilities"),
    "moe_act": ("expert activation output",),
    "shared_experts": ("shared experts",),
    "mla_up_proj": (),
}

#: Selective recompute is Megatron-Core's default module list (Korthikanti et al. 2022, Sec. 5).
SELECTIVE = ("core_attn",)


def recompute_modules(names, model: ModelSpec | None = None) -> tuple[str, ...]:
    """``names`` (an iterable of module names, or one comma-separated string) checked against
    ``RECOMPUTE_MODULES`` and put in its order, duplicates dropped; with a ``model``, also the
    modules that model has (ValueError naming the module and the rule)."""
    if isinstance(names, str):
        names = [n for n in names.split(",") if n.strip()]
    try:
        given = {canonical("recompute module", str(n).strip() if isinstance(n, str) else n, RECOMPUTE_MODULES)
                 for n in names}
    except TypeError:
        raise TypeError(f"recompute_modules must be module names, got {names!r}; "
                        f"allowed: {', '.join(RECOMPUTE_MODULES)}") from None
    out = tuple(n for n in RECOMPUTE_MODULES if n in given)
    if model is not None:
        for name in out:
            if name in ("moe", "moe_act", "shared_experts") and model.moe is None:
                raise ValueError(f"recompute module {name!r} recomputes MoE layers, and {model.name} is a dense "
                                 f"model (Megatron-Core recompute_modules)")
            if name == "shared_experts" and model.moe is not None and not model.moe.shared_experts:
                raise ValueError(f"recompute module 'shared_experts': {model.name} has no shared experts")
            if name == "mla_up_proj":
                raise ValueError(f"recompute module 'mla_up_proj' recomputes multi-head latent attention's "
                                 f"up-projections, which parlab's ModelSpec does not describe (no latent widths): "
                                 f"not modelled for {model.name}")
    return out


def check_recompute(recompute: str, modules: tuple[str, ...]) -> None:
    """recompute='modules' goes with a non-empty ``modules`` and only with it (ValueError)."""
    if (recompute == "modules") != bool(modules):
        raise ValueError(f"recompute_modules {modules!r} go with recompute='modules' and it needs them (got "
                         f"recompute={recompute!r}); allowed modules: {', '.join(RECOMPUTE_MODULES)} "
                         f"(Megatron-Core recompute_modules)")


def layer_activation_terms(model: ModelSpec, micro_batch: int, cp: int = 1,
                           moe_layer: bool | None = None, tp: int = 1) -> dict[str, tuple[str, int]]:
    """The bytes one layer stores for the backward pass, per micro-batch, by term: name ->
    (where, bytes of the whole sequence), where 'whole' terms are kept whole on every TP rank
    (sequence parallelism splits them over t) and 'split' terms are split over the t TP ranks
    (the attention scores, ``memory.attention_score_bytes``, are not among them: they depend on t).

    Korthikanti et al. 2022, Sec. 4.1 and Table 2, with s, b, h and the MLP width f:

    * whole: the two norms' inputs 4 s b h; their outputs, the inputs of the QKV and of the first
      MLP matmul 2 s b h each ('norm outputs', what Megatron-Core's layernorm recompute drops);
      with dropout the two 1-byte masks after attention and MLP 2 s b h;
    * split: Q, K, V 6 s b h and the attention output 2 s b h ('attention inputs'); the MLP's
      inner activations ('MLP inner': 4 s b f GeLU, 6 s b f SwiGLU), or on an MoE layer the
      ``dispatch_rows`` rows' 2 h inputs and their 4 f_e inner and 2 f_e activation output (the
      second expert matmul's input, what moe_act drops), the shared experts' T K_s (4|6) f_e and
      the router's fp32 probabilities 4 T E, for T = s b / cp tokens per CP rank, x cp.

    Attention other than multi-head of width h (``attention_terms``; Ainslie et al. 2023): Q is
    q = a d wide and K, V g d each, so 'attention inputs' are 2 s b (2 q + 2 g d r), with r the
    replicas of a K/V head over ``tp`` (t / g when g < t: each TP rank keeps one K/V head,
    Megatron-Core); QK-norm (Qwen3) keeps its input, 2 s b (q + g d r) ('QK-norm inputs', split);
    sandwich norms (Gemma 2/3) two more norm inputs, 4 s b h ('sandwich norm inputs', whole).
    """

    s, b, h, f = model.seq_len, micro_batch, model.hidden, model.ffn
    sbh = s * b * h
    kv = model.kv_width * kv_replicas(model, tp)  # q = kv = h for multi-head attention: 8 s b h
    terms: dict[str, tuple[str, int]] = {
        "norm inputs": ("whole", 4 * sbh), "norm outputs": ("whole", 4 * sbh),
        "dropout masks": ("whole", 2 * sbh if model.dropout else 0),
        "attention inputs": ("split", 2 * s * b * (2 * model.q_width + 2 * kv)),
    }
    if model.qk_norm:
        terms["QK-norm inputs"] = ("split", 2 * s * b * (model.q_width + kv))
    if model.sandwich_norm:
        terms["sandwich norm inputs"] = ("whole", 4 * sbh)
    moe = model.moe if moe_layer is not False else None
    if moe is None:
        terms["MLP inner"] = ("split", s * b * f * (6 if model.gated_mlp else 4))
        return terms
    tokens = max(1, s * b // cp)  # T on this rank: the routing, and the capacity, are per rank
    width = 6 if moe.gated else 4
    rows = dispatch_rows(tokens, moe)
    terms.update({"expert inputs": ("split", cp * rows * 2 * h),
                  "expert inner": ("split", cp * rows * (width - 2) * moe.expert_ffn),
                  "expert activation output": ("split", cp * rows * 2 * moe.expert_ffn),
                  "shared experts": ("split", cp * tokens * moe.shared_experts * width * moe.expert_ffn),
                  "router probabilities": ("split", cp * 4 * tokens * moe.num_experts)})
    return terms


def dropped_terms(modules: tuple[str, ...]) -> set[str]:
    """The stored terms that recomputing ``modules`` drops (``MODULE_TERMS``)."""
    return {term for m in modules for term in MODULE_TERMS[m]}
