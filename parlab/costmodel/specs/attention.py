"""One layer's attention as a shape (``AttentionShape``): heads, K/V heads, head dimension,
sliding window, and the one count of its weights (``attention_param_count``) that dense and MoE
models share. The pricing layer reads it through ``pricing.attention_terms`` (FLOPs, memory, TP,
CP and the KV cache of every field here).

Sources: multi-head attention, Vaswani et al. 2017, Sec. 3.2.2 (Q, K, V and output projections);
multi-query attention, Shazeer 2019; grouped-query attention, Ainslie et al. 2023, Sec. 2 (K and V
of kv_heads x d); an attention width heads x d other than h, as Qwen3 and Gemma run (their HF
configs' ``head_dim``); QK-norm, a per-head RMSNorm of q and k (Qwen3, HF
``modeling_qwen3.Qwen3Attention``: ``q_norm``/``k_norm`` of size d); Q/K/V biases only (Qwen2,
HF ``modeling_qwen2``); attention sinks, one learned logit per head (GPT-OSS, OpenAI 2025 model
card, Sec. 2.1; HF ``modeling_gpt_oss``: ``sinks`` of size heads); sliding-window attention,
Beltagy et al. 2020 / Mistral 7B (Jiang et al. 2023, Sec. 2), with one full-attention layer
every k (GPT-OSS alternates, k = 2; Gemma 3 runs 5 local : 1 global, k = 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from parlab.costmodel.specs._check import non_negative

if TYPE_CHECKING:
    from parlab.costmodel.specs.models import ModelSpec


def attention_param_count(hidden: int, heads: int, kv_heads: int, head_dim: int, *, bias: bool = False,
                          qkv_bias: bool = False, qk_norm: bool = False, sinks: bool = False) -> int:
    """Weights of one attention block: Q (h x a d), K and V (h x g d each), output (a d x h), with
    a = heads, g = kv_heads, d = head_dim (Vaswani et al. 2017, Sec. 3.2.2; Ainslie et al. 2023).
    ``bias``: biases on all four (a d + 2 g d + h); ``qkv_bias``: on Q, K, V only (Qwen2);
    ``qk_norm``: two RMSNorms of d (Qwen3); ``sinks``: one logit per head (GPT-OSS). For
    multi-head attention with d = h / a this is 4h^2 (+4h biases), Shoeybi et al. 2019."""
    q, kv = heads * head_dim, kv_heads * head_dim
    n = hidden * q + 2 * hidden * kv + q * hidden
    if bias:
        n += q + 2 * kv + hidden
    elif qkv_bias:
        n += q + 2 * kv
    if qk_norm:
        n += 2 * head_dim
    if sinks:
        n += heads
    return n


def check_attention(m: ModelSpec) -> None:
    """The rules of ``m``'s attention fields (``ModelSpec.__post_init__``), one ValueError each naming
    the value; ``head_dim`` 0 is resolved to h / a here (a frozen field, set once)."""
    non_negative("ModelSpec.head_dim (0 means hidden // heads)", m.head_dim, integer=True)
    if not m.head_dim:
        if m.hidden % m.heads:
            raise ValueError(f"hidden size {m.hidden} must be divisible by the number of heads {m.heads} "
                             f"(or give head_dim: the attention width is heads x head_dim)")
        object.__setattr__(m, "head_dim", m.hidden // m.heads)
    non_negative("ModelSpec.kv_heads (0 means heads)", m.kv_heads, integer=True)
    if m.kv_heads and m.heads % m.kv_heads:
        raise ValueError(f"ModelSpec.kv_heads={m.kv_heads} must divide heads={m.heads} "
                         f"(each K/V head serves heads / kv_heads query heads, Ainslie et al. 2023)")
    non_negative("ModelSpec.attention_params (0 means counted from the shape)", m.attention_params,
                 integer=True)
    non_negative("ModelSpec.window (0 means no sliding window)", m.window, integer=True)
    non_negative("ModelSpec.window_pattern (0 means every layer windowed)", m.window_pattern, integer=True)
    if m.window_pattern and not m.window:
        raise ValueError(f"ModelSpec.window_pattern={m.window_pattern} places full-attention layers among "
                         f"windowed ones: it needs a window > 0")
    if m.window_pattern > m.layers:
        raise ValueError(f"ModelSpec.window_pattern={m.window_pattern} (one full-attention layer every k) "
                         f"must be <= layers={m.layers}")


def window_split(layers: int, window: int, pattern: int, seq_len: int) -> tuple[int, int]:
    """(windowed layers, full-attention layers): with a window of w tokens and one full layer
    every k (``pattern``; 0 = every layer windowed), layers k-1, 2k-1, ... attend to everything
    (GPT-OSS: k = 2, layer 0 windowed; Gemma 3: k = 6). No window, or w >= s, bounds nothing:
    every layer is full."""
    if not window or window >= seq_len:
        return 0, layers
    full = layers // pattern if pattern else 0
    return layers - full, full


@dataclass(frozen=True)
class AttentionShape:
    """What the pricing formulas need of one model's attention: ``heads`` (a), ``kv_heads`` (g),
    ``head_dim`` (d), the widths of Q (a d) and of K or V (g d), the window and how many layers
    it bounds, and the weights of one layer (``params``)."""

    heads: int
    kv_heads: int
    head_dim: int
    window: int
    window_layers: int
    full_layers: int
    params: int

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim
