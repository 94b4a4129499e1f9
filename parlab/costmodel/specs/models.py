"""Transformer shapes: ModelSpec, its exact parameter count, named presets and "7B"-style parsing."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING

from parlab.costmodel.specs._check import boolean, non_negative, positive, text
from parlab.costmodel.specs.attention import (
    AttentionShape,
    attention_param_count,
    check_attention,
    window_split,
)
from parlab.tables import human_count

if TYPE_CHECKING:
    from parlab.costmodel.specs.moe import MoEModel, MoESpec


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer (notation of Narayanan et al. 2021 / Korthikanti et al. 2022).

    l = ``layers``, h = ``hidden``, a = ``heads``, s = ``seq_len``, V = ``vocab``,
    f = ``ffn_hidden`` (0 means the GPT default 4h). The flags describe the block:
    ``gated_mlp`` (SwiGLU: three h x f matrices instead of two), ``bias`` (biases on every linear
    and LayerNorm with a bias; False means RMSNorm without one), ``learned_pos`` (an s x h
    position table), ``tied_embeddings`` (the output layer reuses the input embedding),
    ``embedding_norm`` (a LayerNorm right after the embedding, as in BLOOM).

    Two more flags shape only the activations a layer keeps (``memory.activation_bytes_per_layer``):
    ``dropout`` (dropout on the attention probabilities and after attention and the MLP, so 1-byte
    masks are stored, as in GPT-3 and Korthikanti et al. 2022, Table 2; LLaMA trains without
    dropout) and ``flash_attention`` (FlashAttention, Dao et al. 2022: the s x s scores are never
    stored, only each row's softmax statistics). RMSNorm keeps the same 16-bit input as LayerNorm.
    The defaults are GPT's block as Table 2 counts it; the LLaMA presets turn dropout off and
    FlashAttention on, as nearly every modern run does.

    The attention (``specs.attention``, one count for dense and MoE models): ``kv_heads`` (g,
    grouped- or multi-query attention, K and V of g x d, Ainslie et al. 2023; 0 = heads),
    ``head_dim`` (d; 0 = h / a, stored resolved, so the attention width a d may differ from h, as
    Qwen3 and Gemma), ``qk_norm`` (Qwen3), ``qkv_bias`` (Qwen2: Q, K, V biases only),
    ``attention_bias`` (all four projections, HF's ``attention_bias``, GPT-OSS), ``sinks`` (one
    logit per head, GPT-OSS), a sliding ``window`` of w tokens (0 = none) with one full-attention
    layer every ``window_pattern`` = k (0 = every layer windowed; GPT-OSS k = 2, Gemma 3 k = 6),
    ``attention_params`` (an exact count per layer, e.g. DeepSeek's multi-head latent attention),
    and ``sandwich_norm`` (Gemma 2/3: a norm after attention and after the MLP too).
    ``attention_shape()`` gives the widths; ``pricing.attention_terms`` prices every field.

    A mixture-of-experts model sets ``moe`` (an ``expert_parallel.MoESpec``: E routed experts of
    width f_e, top-k, shared experts, dense first layers). Its counts are
    ``expert_parallel.MoEModel``'s (``moe_model``): one implementation of the MoE parameter count.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn_hidden: int = 0
    gated_mlp: bool = False
    bias: bool = True
    learned_pos: bool = True
    tied_embeddings: bool = True
    embedding_norm: bool = False
    source: str = ""
    dropout: bool = True
    flash_attention: bool = False
    moe: MoESpec | None = None
    kv_heads: int = 0
    attention_params: int = 0
    head_dim: int = 0
    qk_norm: bool = False
    qkv_bias: bool = False
    attention_bias: bool = False
    sinks: bool = False
    window: int = 0
    window_pattern: int = 0
    sandwich_norm: bool = False

    def __post_init__(self) -> None:
        text("ModelSpec.name", self.name)
        for field in ("layers", "hidden", "heads", "seq_len", "vocab"):
            positive(f"ModelSpec.{field}", getattr(self, field), integer=True)
        non_negative("ModelSpec.ffn_hidden (0 means 4h)", self.ffn_hidden, integer=True)
        for field in ("gated_mlp", "bias", "learned_pos", "tied_embeddings", "embedding_norm", "dropout",
                      "flash_attention", "qk_norm", "qkv_bias", "attention_bias", "sinks", "sandwich_norm"):
            boolean(f"ModelSpec.{field}", getattr(self, field))
        text("ModelSpec.source", self.source)
        check_attention(self)
        if self.moe is None:
            return
        from parlab.costmodel.specs.moe import MoESpec

        if not isinstance(self.moe, MoESpec):
            raise TypeError(f"ModelSpec.moe must be an expert_parallel.MoESpec or None, got {self.moe!r}")
        self.moe_model()  # its own checks: kv_heads divides heads, dense_layers <= layers

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def q_width(self) -> int:
        """Width of Q and of the attention output: heads x head_dim (h unless head_dim is given)."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of K (and of V): kv_heads x head_dim (grouped-query attention), else heads x head_dim."""
        return (self.kv_heads or self.heads) * self.head_dim

    kv_hidden = kv_width

    @property
    def window_layers(self) -> int:
        """Layers whose attention a sliding window bounds (0 if the window is 0 or >= seq_len)."""
        return window_split(self.layers, self.window, self.window_pattern, self.seq_len)[0]

    @property
    def full_layers(self) -> int:
        """Layers attending to the whole sequence."""
        return window_split(self.layers, self.window, self.window_pattern, self.seq_len)[1]

    def attention_layer_params(self) -> int:
        """One layer's attention weights: ``attention_params`` if given, else
        ``attention.attention_param_count`` of this shape (one count for dense and MoE models)."""
        if self.attention_params:
            return self.attention_params
        return attention_param_count(self.hidden, self.heads, self.kv_heads or self.heads, self.head_dim,
                                     bias=self.bias or self.attention_bias, qkv_bias=self.qkv_bias,
                                     qk_norm=self.qk_norm, sinks=self.sinks)

    def attention_shape(self) -> AttentionShape:
        """The attention as the pricing layer reads it (``attention.AttentionShape``)."""
        windowed, full = window_split(self.layers, self.window, self.window_pattern, self.seq_len)
        return AttentionShape(self.heads, self.kv_heads or self.heads, self.head_dim, self.window, windowed, full,
                              self.attention_layer_params())

    def moe_model(self) -> MoEModel:
        """This spec as an ``expert_parallel.MoEModel`` (its dense base, its experts), whose
        counts of total and active parameters this spec reports. Built once per spec (the spec is
        frozen): the search prices thousands of plans of one model."""
        if self.moe is None:
            raise ValueError(f"{self.name} is a dense model (ModelSpec.moe is None)")
        return self._moe_model

    def __hash__(self) -> int:
        """The dataclass's hash of every field, computed once: the cost model memoises its pure
        functions by spec, so a search hashes one spec hundreds of thousands of times."""
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self)))

    def __getstate__(self) -> dict:
        """The fields only: a hash of strings is salted per process, so none is pickled."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @cached_property
    def _moe_model(self) -> MoEModel:
        from parlab.costmodel.specs.moe import MoEModel

        assert self.moe is not None
        base = replace(self, moe=None, kv_heads=0, attention_params=0)
        return MoEModel(self.name, base, self.moe, self.kv_heads, self.attention_params, self.source)

    @property
    def ffn(self) -> int:
        """f, the MLP's inner width (4h unless given)."""
        return self.ffn_hidden or 4 * self.hidden

    # -- parameter count ---------------------------------------------------------------------
    def params_per_layer(self) -> int:
        """Parameters of one transformer block: attention + MLP + norms.

        Attention (``attention_layer_params``): Q, K, V and output projections, 4h^2 (+4h biases)
        for multi-head attention. MLP (``mlp_params``): 2hf (3hf gated) (+f+h biases, +2f+h gated).
        Norms (``norm_params_per_layer``). For the GPT block (f = 4h, biases) this is 12h^2 + 13h,
        the per-layer term of Narayanan et al. 2021, Eq. 2.
        """
        return self.attention_layer_params() + self.mlp_params() + self.norm_params_per_layer()

    def mlp_params(self) -> int:
        """A dense MLP: 2hf weights (3hf gated: gate, up, down), +f+h biases (+2f+h gated)."""
        h, f = self.hidden, self.ffn
        n_in = 2 if self.gated_mlp else 1  # gate and up projections, or just up
        return (n_in + 1) * h * f + ((n_in * f + h) if self.bias else 0)

    def norm_params_per_layer(self) -> int:
        """Two norms (four with ``sandwich_norm``, Gemma 2/3): 2h each with a bias (LayerNorm), h
        without (RMSNorm)."""
        norm = 2 * self.hidden if self.bias else self.hidden
        return (4 if self.sandwich_norm else 2) * norm

    def embedding_params(self) -> int:
        """Input embedding V*h, learned positions s*h, and an untied output layer V*h."""
        h = self.hidden
        n = self.vocab * h
        if self.learned_pos:
            n += self.seq_len * h
        if not self.tied_embeddings:
            n += self.vocab * h
        return n

    def num_params(self) -> int:
        """Exact parameter count: l blocks + embeddings + the final norm (+ BLOOM's embedding norm).

        Equal to Narayanan et al. 2021, Eq. 2 (``megatron_eq2_params``) plus the final LayerNorm
        (2h), which Eq. 2 leaves out, for GPT-style models. Checked against published counts:
        LLaMA-7B 6,738,415,616; BLOOM-176B 176,247,271,424; ChatGLM-6B 6,173,286,400.
        """
        if self.moe is not None:  # every expert counted (MoEModel.total_params)
            return self.moe_model().total_params()
        norm = 2 * self.hidden if self.bias else self.hidden
        n = self.layers * self.params_per_layer() + self.embedding_params() + norm
        if self.embedding_norm:
            n += norm
        return n

    def active_params(self) -> int:
        """Parameters one token uses: all of them for a dense model; for an MoE model its top-k
        routed and its shared experts of every MoE layer (``MoEModel.active_params``)."""
        return self.num_params() if self.moe is None else self.moe_model().active_params()

    def non_embedding_params(self) -> int:
        """Parameters of the transformer blocks only (what BLOOM's tables call "size")."""
        if self.moe is not None:
            return self.num_params() - self.embedding_params() - (2 * self.hidden if self.bias else self.hidden)
        return self.layers * self.params_per_layer()

    def with_(self, **changes) -> ModelSpec:
        """A copy with some fields changed (e.g. ``spec.with_(seq_len=4096)``). A head_dim that was
        derived (h / a) is derived again when hidden or heads change; kv_heads = heads stays "all heads"."""
        if "head_dim" not in changes and self.head_dim * self.heads == self.hidden:
            changes["head_dim"] = 0
        if "kv_heads" not in changes and self.kv_heads == self.heads:  # multi-head stays multi-head
            changes["kv_heads"] = 0
        return replace(self, **changes)


def megatron_eq2_params(m: ModelSpec) -> float:
    """P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)): Narayanan et al. 2021, Eq. 2 (GPT block)."""
    L, h, s, V = m.layers, m.hidden, m.seq_len, m.vocab  # L is the paper's l
    return 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))


# -- presets -------------------------------------------------------------------------------------
# GPT-3 (2020): GeLU MLP of 4h, LayerNorm with biases, dropout, no FlashAttention (it came in 2022):
# the block of Korthikanti et al. 2022, Table 2. LLaMA: SwiGLU of width f, RMSNorm, no biases, no
# dropout; trained with memory-efficient attention (xformers), so FlashAttention on.
_GPT = dict(bias=True, learned_pos=True, tied_embeddings=True, dropout=True, flash_attention=False)
_LLAMA = dict(gated_mlp=True, bias=False, learned_pos=False, tied_embeddings=False, dropout=False,
              flash_attention=True)

#: The dense presets; ``catalogue.MODELS`` adds the MoE ones.
DENSE_MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in [
        ModelSpec("gpt3-175b", 96, 12288, 96, 2048, 50257, **_GPT,
                  source="Brown et al. 2020 (GPT-3), Table 2.1"),
        ModelSpec("gpt3-13b", 40, 5120, 40, 2048, 50257, **_GPT,
                  source="Brown et al. 2020 (GPT-3), Table 2.1"),
        ModelSpec("gpt3-6.7b", 32, 4096, 32, 2048, 50257, **_GPT,
                  source="Brown et al. 2020 (GPT-3), Table 2.1"),
        ModelSpec("llama-7b", 32, 4096, 32, 2048, 32000, 11008, **_LLAMA,
                  source="Touvron et al. 2023 (LLaMA), Table 2; HF config"),
        ModelSpec("llama-13b", 40, 5120, 40, 2048, 32000, 13824, **_LLAMA,
                  source="Touvron et al. 2023 (LLaMA), Table 2; HF config"),
        ModelSpec("llama-65b", 80, 8192, 64, 2048, 32000, 22016, **_LLAMA,
                  source="Touvron et al. 2023 (LLaMA), Table 2; HF config"),
        # BLOOM ran Megatron-DeepSpeed's fused softmax, not FlashAttention (released after the run began)
        ModelSpec("bloom-176b", 70, 14336, 112, 2048, 250880, bias=True, learned_pos=False,
                  tied_embeddings=True, embedding_norm=True, flash_attention=False,
                  source="BigScience 2022 (BLOOM), Table 3; HF config"),
        ModelSpec("chatglm-6b", 28, 4096, 32, 2048, 130528, bias=True, learned_pos=False,
                  tied_embeddings=True, source="THUDM ChatGLM-6B, HF config"),
        ModelSpec("mt-nlg-530b", 105, 20480, 128, 2048, 51200, **_GPT,
                  source="Smith et al. 2022 (MT-NLG 530B), Section 3"),
    ]
}

# GPT-style shapes (hidden, heads, layers) from GPT-3 Table 2.1 and Megatron-LM 2021 Table 1:
# "7B"-style sizes without a preset get the hidden size whose reference depth fits best.
_LADDER = [(768, 12, 12), (1024, 16, 24), (1536, 16, 24), (2048, 16, 24), (2560, 32, 32),
           (4096, 32, 32), (5120, 40, 40), (6144, 48, 40), (8192, 64, 48), (10240, 80, 60),
           (12288, 96, 80), (16384, 128, 96), (20480, 128, 105), (25600, 160, 128)]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmbt])\s*$", re.IGNORECASE)
_UNIT = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_size(text: str) -> float:
    """'7B' -> 7e9, '350M' -> 3.5e8, '1.5T' -> 1.5e12. Raises ValueError on anything else."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"cannot read a model size from {text!r}; write e.g. '7B', '350M', '1.5T'")
    n = float(m.group(1)) * _UNIT[m.group(2).lower()]
    return positive("model size", n)


def gpt_like(n_params: float, seq_len: int = 2048, vocab: int = 51200) -> ModelSpec:
    """A GPT-style shape with about ``n_params`` parameters.

    The hidden size comes from the GPT-3 / Megatron-LM ladder (``_LADDER``), chosen so that the
    depth needed to reach ``n_params`` is closest (in ratio) to that rung's published depth; the
    depth is then l = round((N - embeddings) / (12h^2 + 13h)) (Eq. 2 solved for l).
    """
    positive("n_params", n_params)
    positive("seq_len", seq_len, integer=True)
    positive("vocab", vocab, integer=True)
    best = None
    for h, a, l_ref in _LADDER:
        per_layer = 12 * h * h + 13 * h
        depth = max(1, round((n_params - (vocab + seq_len) * h) / per_layer))
        score = abs(math.log(depth / l_ref))
        if best is None or score < best[0]:
            best = (score, h, a, depth)
    _, h, a, depth = best
    name = f"gpt-{human_count(n_params, 3)}".lower()
    spec = ModelSpec(name, depth, h, a, seq_len, vocab, **_GPT,
                     source="GPT-style shape fitted to the size (parlab.costmodel.specs.models.gpt_like)")
    if not 0.8 <= spec.num_params() / n_params <= 1.25:  # below one layer + embeddings: no such shape
        raise ValueError(f"n_params={n_params:g} is too small for a GPT-style shape with a {vocab:,}-token "
                         f"vocabulary: the smallest gpt_like builds has {human_count(spec.num_params())} parameters")
    return spec
