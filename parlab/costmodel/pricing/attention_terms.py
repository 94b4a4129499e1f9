"""One layer's attention as the pricing formulas see it: the projection weights (FLOPs), the
score work under a sliding window, the split of its weights and of its K/V heads over tensor
parallelism, and a one-line description for ``Estimate.explain``. Every other pricing module
reads the attention through these functions, so grouped-query attention, a head dimension other
than h / a and sliding windows are priced in one place (``ModelSpec.attention_shape``).

Sources:

* Projections: Q (h x a d), K and V (h x g d each), output (a d x h), Vaswani et al. 2017,
  Sec. 3.2.2; K/V of g heads, Ainslie et al. 2023 (GQA), Sec. 2; Shazeer 2019 (MQA, g = 1).
  Two FLOPs per multiply-add: 2 b s (h a d + 2 h g d + a d h); for multi-head attention
  (a d = g d = h) Narayanan et al. 2021, Sec. 5.1's 8 b s h^2.
* Scores Q K^T and their product with V: 4 b s s_ctx a d. The convention is the one the
  existing formulas use (Narayanan et al. 2021, Sec. 5.1, Eq. 3: 4 b s^2 h per layer): every
  query is counted against the whole context, the causal mask is *not* halved. A windowed layer
  (Beltagy et al. 2020, Sec. 3.1; Jiang et al. 2023, Mistral 7B, Sec. 2) counts each query
  against s_ctx = min(w, s) keys under the same convention. A model mixing windowed and full
  layers (GPT-OSS, Gemma 3: ``specs.attention.window_split``) is priced per layer as its mean
  layer, l_w min(w, s) + l_f s over l: exact for the whole model, an average for one pipeline
  stage, whose exact mix depends on where the pattern falls.
* Tensor parallelism: Megatron-Core splits the fused QKV projection (output width (a + 2 g) d)
  by columns and the output projection by rows over the t ranks. With g >= t each rank holds
  g / t K/V heads (g % t == 0); with g < t (t % g == 0) the weights are still split evenly, the
  QKV output is all-gathered and each rank keeps one K/V head, so the K/V *activations* are
  replicated t / g times (``megatron/core/transformer/attention.py``, ``Attention.__init__``:
  ``num_query_groups_per_partition = 1`` when ``num_query_groups < world_size``, and
  ``get_query_key_value_tensors``). The weights per GPU stay (count) / t: Megatron-Core does
  not replicate them (vLLM's ``QKVParallelLinear`` does, for inference). The all-gather of the
  QKV output in that case is not priced (it runs only when g < t, rare in training layouts:
  Llama 3 runs g = t = 8).
* An exact ``attention_params`` count (DeepSeek's multi-head latent attention, DeepSeek-AI 2024,
  Sec. 2.1.2): its projection FLOPs are 2 b s x the count (every weight is a matmul a token
  passes through), but the count does not say the widths, so its scores, stored Q/K/V and CP
  blocks are priced at a d = h (DeepSeek-V3's Q K^T runs at 128 x 192 = 24,576 wide and P V at
  128 x 128: an underestimate of those terms, kept as it was) and its KV cache as multi-head
  attention (MLA caches d_c + d_rope = 576 values per token and layer: not modelled here).
* Small terms (their parameters are exact, ``specs.attention.attention_param_count``): Q/K/V
  biases and the output bias are added in the GEMM epilogue (no FLOPs priced, no stored
  activation); attention sinks are a vector of a logits, one per head, folded into the softmax
  (GPT-OSS, HF ``modeling_gpt_oss``: negligible FLOPs and memory, left out); QK-norm (Qwen3) is an
  RMSNorm of q and k per head, whose input the backward pass needs: 2 b s (a d + g d) bytes more
  per layer (``memory.activation_bytes_per_layer``), and elementwise time through those bytes.
"""

from __future__ import annotations

from parlab.costmodel.specs.models import ModelSpec


def projection_weights(model: ModelSpec) -> int:
    """The matmul weights of one layer's attention (what its FLOPs multiply): h a d + 2 h g d +
    a d h (4 h^2 for multi-head attention), biases, norms and sinks left out; an exact
    ``attention_params`` count (e.g. DeepSeek's latent attention) as given."""
    if model.attention_params:
        return model.attention_params
    h, q, kv = model.hidden, model.q_width, model.kv_width
    return h * q + 2 * h * kv + q * h


def mean_context(model: ModelSpec) -> int | float:
    """Keys each query is counted against, averaged over the layers: s without a window (an int,
    so multi-head numbers stay exact), else (l_w min(w, s) + l_f s) / l."""
    s = model.seq_len
    windowed = model.window_layers
    if not windowed:
        return s
    return (windowed * min(model.window, s) + model.full_layers * s) / model.layers


def score_flops(model: ModelSpec, micro_batch: int = 1) -> int | float:
    """FLOPs of Q K^T and P V of one (mean) layer's forward on one GPU without TP: 4 b s s_ctx a d
    (Narayanan et al. 2021, Sec. 5.1's 4 b s^2 h, with the width a d and the window's s_ctx:
    ``mean_context``; the causal mask not halved, as there)."""
    return 4 * micro_batch * model.seq_len * mean_context(model) * model.q_width


def kv_heads_per_rank(model: ModelSpec, tp: int = 1) -> int:
    """K/V heads one TP rank attends with: g / t, or 1 when g < t (Megatron-Core, module docstring)."""
    g = model.kv_heads or model.heads
    return max(1, g // tp)


def kv_replicas(model: ModelSpec, tp: int = 1) -> int:
    """How many TP ranks hold each K/V head's activations: t / g when g < t, else 1."""
    g = model.kv_heads or model.heads
    return tp // g if g < tp else 1


def kv_splits(model: ModelSpec, tp: int) -> bool:
    """Whether tp divides the K/V heads or is a multiple of them (``check_kv_tp``'s rule, for
    ``search``)."""
    g = model.kv_heads or model.heads
    return not (g % tp and tp % g)


def ulysses_splits(model: ModelSpec, tp: int, cp: int) -> bool:
    """Whether Ulysses at cp gives every rank whole query and K/V heads of its TP shard
    (``plan.spec.check_cp_ep``'s rule, for ``search``)."""
    return model.heads % (tp * cp) == 0 and kv_heads_per_rank(model, tp) % cp == 0


def check_kv_tp(model: ModelSpec, tp: int) -> None:
    """tp must divide the K/V heads, or be a multiple of them (each K/V head then serves t / g
    ranks, Megatron-Core's ``num_query_groups < world_size`` case). One ValueError otherwise."""
    g = model.kv_heads or model.heads
    if not kv_splits(model, tp):
        raise ValueError(f"tp must divide the K/V heads or be a multiple of them: {g} K/V heads, tp={tp} "
                         f"(Megatron-Core gives each TP rank g / tp K/V heads, or one K/V head shared by "
                         f"tp / g ranks)")


def attention_param_split(model: ModelSpec) -> tuple[int, int]:
    """(split by TP, replicated on every TP rank) weights of one layer's attention, Megatron-LM's
    layout (Shoeybi et al. 2019, Sec. 3): Q, K, V and output weights and the column-parallel
    Q, K, V biases and the sinks (one per head) are split; the output bias (row-parallel) and the
    QK-norm weights (2 d) are replicated. The two add up to ``ModelSpec.attention_layer_params``;
    an exact ``attention_params`` count is taken as split whole."""
    if model.attention_params:
        return model.attention_params, 0
    q, kv = model.q_width, model.kv_width
    split, replicated = projection_weights(model), 0
    if model.bias or model.attention_bias:
        split += q + 2 * kv
        replicated += model.hidden
    elif model.qkv_bias:
        split += q + 2 * kv
    if model.qk_norm:
        replicated += 2 * model.head_dim
    if model.sinks:
        split += model.heads
    return split, replicated


def describe(model: ModelSpec) -> str:
    """The attention in words, e.g. 'GQA 8 KV heads of 32, head_dim 128', 'window 4096 on 32 of
    32 layers'; '' for plain multi-head attention of width h."""
    a, g, d = model.heads, model.kv_heads or model.heads, model.head_dim
    parts = []
    if model.attention_params:
        parts.append(f"{model.attention_params:,} attention weights per layer (given, e.g. latent attention)")
    elif g == 1:
        parts.append(f"MQA 1 KV head of {a}")
    elif g != a:
        parts.append(f"GQA {g} KV heads of {a}")
    if a * d != model.hidden:
        parts.append(f"head_dim {d} (width {a * d} != hidden {model.hidden})")
    if model.window_layers:
        parts.append(f"window {model.window} on {model.window_layers} of {model.layers} layers")
    extras = [name for flag, name in (("qk_norm", "QK-norm"), ("qkv_bias", "Q/K/V biases"),
                                      ("attention_bias", "attention biases"), ("sinks", "sinks"),
                                      ("sandwich_norm", "sandwich norms")) if getattr(model, flag)]
    if extras:
        parts.append(", ".join(extras))
    return "; ".join(parts)
