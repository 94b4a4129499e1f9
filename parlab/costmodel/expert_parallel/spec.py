"""The MoE part of a model (``MoESpec``): E routed experts of width f_e, top-k per token, K_s
shared experts, the capacity factor, and the parameters they come to (Shazeer et al. 2017, Eq. 1
and 3; DeepSeek-MoE, Dai et al. 2024, Sec. 3.1-3.2: fine-grained and shared experts)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .._check import boolean, non_negative, positive


@dataclass(frozen=True)
class MoESpec:
    """The MoE part of a model: ``num_experts`` routed experts (E) of inner width ``expert_ffn``
    (f_e), ``top_k`` (k) of them per token, ``shared_experts`` (K_s) used by every token,
    ``capacity_factor`` (c; 0 = dropless), ``gated`` experts (SwiGLU: three h x f_e matrices, as
    Mixtral and DeepSeek; else GeLU's two), ``bias`` on the experts' linears, and the first
    ``dense_layers`` layers keeping a dense MLP (DeepSeek-V3: 3)."""

    num_experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int = 0
    capacity_factor: float = 0.0
    gated: bool = True
    bias: bool = False
    dense_layers: int = 0

    def __post_init__(self) -> None:
        for name in ("num_experts", "top_k", "expert_ffn"):
            positive(f"MoESpec.{name}", getattr(self, name), integer=True)
        non_negative("MoESpec.shared_experts", self.shared_experts, integer=True)
        non_negative("MoESpec.capacity_factor (0 = dropless)", self.capacity_factor)
        non_negative("MoESpec.dense_layers", self.dense_layers, integer=True)
        boolean("MoESpec.gated", self.gated)
        boolean("MoESpec.bias", self.bias)
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
        """The router (gate) matrix: h x E (Shazeer et al. 2017, Eq. 3: softmax(x W_g))."""
        return positive("hidden", hidden, integer=True) * self.num_experts

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
