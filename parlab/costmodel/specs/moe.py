"""The MoE part of a model (``MoESpec``), the capacity and dispatch rows it gives a layer, and an MoE
model's total and active parameters (``MoEModel``): E routed experts of width f_e, top-k per token, K_s
shared experts, the capacity factor, and the parameters they come to (Shazeer et al. 2017, Eq. 1
and 3; DeepSeek-MoE, Dai et al. 2024, Sec. 3.1-3.2: fine-grained and shared experts)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from parlab.costmodel.specs._check import boolean, non_negative, positive, text
from parlab.costmodel.specs.attention import attention_param_count

if TYPE_CHECKING:
    from parlab.costmodel.specs.models import ModelSpec


@dataclass(frozen=True)
class MoESpec:
    """The MoE part of a model: ``num_experts`` routed experts (E) of inner width ``expert_ffn``
    (f_e), ``top_k`` (k) of them per token, ``shared_experts`` (K_s) used by every token,
    ``capacity_factor`` (c; 0 = dropless), ``gated`` experts (SwiGLU: three h x f_e matrices, as
    Mixtral and DeepSeek; else GeLU's two), ``bias`` on the experts' linears, ``router_bias`` (a
    bias of E on the router, GPT-OSS: HF ``modeling_gpt_oss.GptOssTopKRouter``), and the first
    ``dense_layers`` layers keeping a dense MLP (DeepSeek-V3: 3)."""

    num_experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int = 0
    capacity_factor: float = 0.0
    gated: bool = True
    bias: bool = False
    dense_layers: int = 0
    router_bias: bool = False

    def __post_init__(self) -> None:
        for name in ("num_experts", "top_k", "expert_ffn"):
            positive(f"MoESpec.{name}", getattr(self, name), integer=True)
        non_negative("MoESpec.shared_experts", self.shared_experts, integer=True)
        non_negative("MoESpec.capacity_factor (0 = dropless)", self.capacity_factor)
        non_negative("MoESpec.dense_layers", self.dense_layers, integer=True)
        boolean("MoESpec.gated", self.gated)
        boolean("MoESpec.bias", self.bias)
        boolean("MoESpec.router_bias", self.router_bias)
        if self.top_k > self.num_experts:
            raise ValueError(f"MoESpec.top_k={self.top_k} must be <= num_experts="
                             f"{self.num_experts}: a token picks k distinct experts")

    @property
    def dropless(self) -> bool:
        return self.capacity_factor == 0

    def params_per_expert(self, hidden: int) -> int:
        """One expert MLP: (3 if gated else 2) h f_e weights (+ biases f_e per input matrix + h)."""
        positive("hidden", hidden, integer=True)
        n_in = 2 if self.gated else 1
        return (n_in + 1) * hidden * self.expert_ffn + ((n_in * self.expert_ffn + hidden) if self.bias else 0)

    def router_params(self, hidden: int) -> int:
        """The router (gate) matrix: h x E (Shazeer et al. 2017, Eq. 3: softmax(x W_g)), + E with
        ``router_bias``."""
        return (positive("hidden", hidden, integer=True) + self.router_bias) * self.num_experts

    def layer_params(self, hidden: int) -> int:
        """One MoE layer's MLP part: E routed + K_s shared experts and the router."""
        return ((self.num_experts + self.shared_experts) * self.params_per_expert(hidden)
                + self.router_params(hidden))

    def active_layer_params(self, hidden: int) -> int:
        """What one token uses of an MoE layer: k routed + K_s shared experts and the router."""
        return ((self.top_k + self.shared_experts) * self.params_per_expert(hidden)
                + self.router_params(hidden))

    def fine_grained(self, m: int) -> MoESpec:
        """DeepSeek-MoE's fine-grained segmentation (Dai et al. 2024, Sec. 3.1): each expert cut
        into m experts of width f_e / m and m k of them routed per token: the same parameters and
        FLOPs, many more combinations of experts per token."""
        positive("m (segments per expert)", m, integer=True)
        if self.expert_ffn % m:
            raise ValueError(f"fine_grained: m={m} must divide expert_ffn={self.expert_ffn}")
        return replace(self, num_experts=self.num_experts * m, top_k=self.top_k * m,
                       expert_ffn=self.expert_ffn // m,
                       shared_experts=self.shared_experts * m)


def expert_capacity(tokens: int, moe: MoESpec) -> int:
    """C = ceil(c T k / E) slots per expert for T tokens (Switch Transformer, Eq. 3: tokens per
    expert x capacity factor; with k assignments per token as GShard, Sec. 2.2, and Megatron-Core
    ``moe_utils.get_capacity``). Dropless (c = 0): T, the most one expert can receive."""
    positive("tokens", tokens, integer=True)
    if moe.dropless:
        return tokens
    return math.ceil(moe.capacity_factor * tokens * moe.top_k / moe.num_experts)


def dispatch_rows(tokens: int, moe: MoESpec, fixed_shape: bool = False) -> int:
    """Rows (tokens of h elements) one rank puts into one all-to-all: the padded E x C buffer of a
    capacity-bound layer, or the T k copies of a dropless one. ``fixed_shape``: the buffer is
    always E x C, as GShard's einsum dispatch and parlab's runtime (equal all-to-all blocks) run
    it, so a dropless layer pads every expert to C = T slots: E T rows, E/k times T k."""
    boolean("fixed_shape", fixed_shape)
    if moe.dropless and not fixed_shape:
        return tokens * moe.top_k
    return moe.num_experts * expert_capacity(tokens, moe)


@dataclass(frozen=True)
class MoEModel:
    """A decoder whose MLPs are MoE layers: ``base`` gives the attention, embeddings and the dense
    layers' MLP width; ``moe`` the experts. ``kv_heads`` (grouped-query attention, Ainslie et al.
    2023: K and V projections of kv_heads x d) and ``attention_params`` (an exact count per layer
    for other attentions, e.g. DeepSeek's multi-head latent attention) override the
    ``base``'s multi-head attention count; 0 keeps it."""

    name: str
    base: ModelSpec
    moe: MoESpec
    kv_heads: int = 0
    attention_params: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        text("MoEModel.name", self.name)
        text("MoEModel.source", self.source)
        non_negative("MoEModel.kv_heads", self.kv_heads, integer=True)
        non_negative("MoEModel.attention_params", self.attention_params, integer=True)
        if self.kv_heads and self.base.heads % self.kv_heads:
            raise ValueError(f"MoEModel.kv_heads={self.kv_heads} must divide heads={self.base.heads}")
        if self.moe.dense_layers > self.base.layers:
            raise ValueError(f"MoESpec.dense_layers={self.moe.dense_layers} exceeds the model's "
                             f"layers={self.base.layers}")

    @property
    def moe_layers(self) -> int:
        return self.base.layers - self.moe.dense_layers

    def _attention(self) -> int:
        """One layer's attention: ``attention_params`` if given, else the base's shape with
        ``kv_heads`` K/V heads (``specs.attention.attention_param_count``, the one count)."""
        if self.attention_params:
            return self.attention_params
        b = self.base
        return attention_param_count(b.hidden, b.heads, self.kv_heads or b.heads, b.head_dim,
                                     bias=b.bias or b.attention_bias, qkv_bias=b.qkv_bias, qk_norm=b.qk_norm,
                                     sinks=b.sinks)

    def _dense_mlp(self) -> int:
        return self.base.mlp_params()

    def _norms(self) -> int:
        return self.base.norm_params_per_layer()

    def _rest(self) -> int:
        """Embeddings, final norm and the dense layers (attention + dense MLP + norms)."""
        dense = self.moe.dense_layers * (self._attention() + self._dense_mlp() + self._norms())
        return self.base.num_params() - self.base.layers * self.base.params_per_layer() + dense

    def total_params(self) -> int:
        """Every parameter: embeddings, l attentions, the dense layers' MLPs and the MoE layers'
        experts and routers. Mixtral 8x7B: 46.7B (Jiang et al. 2024); DeepSeek-V3: 671B (DeepSeek-AI
        2024, Sec. 4.2)."""
        per = self._attention() + self._norms() + self.moe.layer_params(self.base.hidden)
        return self._rest() + self.moe_layers * per

    def active_params(self) -> int:
        """The parameters one token uses: the same with k routed experts of E. Mixtral: 12.9B;
        DeepSeek-V3: 37B."""
        per = self._attention() + self._norms() + self.moe.active_layer_params(self.base.hidden)
        return self._rest() + self.moe_layers * per

    def train_flops_per_token(self) -> float:
        """6 N_active: forward and backward multiply-adds of the weights a token uses (Kaplan et al.
        2020, Sec. 2.1, with N the active parameters; attention's own s^2 terms left out)."""
        return 6.0 * self.active_params()
