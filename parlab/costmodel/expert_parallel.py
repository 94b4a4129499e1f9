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

Notation: T tokens per rank per micro-batch (b s), h hidden, E routed experts, k = top-k,
c the capacity factor, C = ceil(c T k / E) slots per expert (Switch Transformer, Eq. 3, for k
experts per token as Megatron-Core's ``get_capacity``), ep the expert-parallel degree.
A capacity-bound layer (GShard, Switch) dispatches a fixed (E, C, h) buffer, padded where an
expert got fewer than C tokens and dropping the tokens beyond C; a dropless one (c = 0 here;
Megatron-Core without a capacity factor) sends each token's k copies, T k rows, in splits that
vary with the routing (their expected size under uniform routing is what is priced).

``parlab.parallel.expert_parallel`` runs the fixed-shape layer on CPU processes; its measured
all-to-all bytes equal ``all_to_all_bytes_per_layer(..., fixed_shape=True)``. Pure Python.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from . import alphabeta
from ._check import boolean, canonical, non_negative, number, positive, text
from .memory import RECOMPUTE, ModelStateMemory, model_state_memory
from .models import ModelSpec
from .tensor_parallel import Collective


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


def expert_forward_flops(tokens: int, hidden: int, moe: MoESpec, padded: bool = True) -> float:
    """Forward FLOPs of one MoE layer's routed experts on T tokens: 2 (3 if gated else 2) h f_e
    per row (one multiply-add per weight, Kaplan et al. 2020, Sec. 2.1), over the padded E C rows
    (capacity-bound: c times the useful work) or the T k useful ones (``padded=False``)."""
    boolean("padded", padded)
    rows = moe.num_experts * expert_capacity(tokens, moe) if padded and not moe.dropless else tokens * moe.top_k
    return 2.0 * rows * (3 if moe.gated else 2) * hidden * moe.expert_ffn


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
        h, b = self.base.hidden, self.base.bias
        if self.attention_params:
            return self.attention_params
        mha = 4 * h * h + (4 * h if b else 0)
        if not self.kv_heads:
            return mha
        kv = self.kv_heads * self.base.head_dim  # K and V: h -> kv_heads x d each
        return 2 * h * h + 2 * h * kv + ((2 * h + 2 * kv) if b else 0)

    def _dense_mlp(self) -> int:
        h = self.base.hidden
        mha = 4 * h * h + (4 * h if self.base.bias else 0)
        return self.base.params_per_layer() - mha - self._norms()

    def _norms(self) -> int:
        return 2 * (2 * self.base.hidden if self.base.bias else self.base.hidden)

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


def mla_params(hidden: int, heads: int, q_lora: int, kv_lora: int, qk_nope: int, qk_rope: int,
               v_head: int) -> int:
    """Weights of one multi-head latent attention (DeepSeek-V2, DeepSeek-AI 2024, Sec. 2.1.2-2.1.3,
    Eq. 9-19): down-projections h -> d_c' (queries) and h -> d_c + d_h^R (keys/values and the
    shared rotary key), their RMSNorms, up-projections to n_h (d_h + d_h^R) queries and n_h
    (d_h + d_v) keys and values, and the output n_h d_v -> h."""
    for name, v in (("hidden", hidden), ("heads", heads), ("q_lora", q_lora), ("kv_lora", kv_lora),
                    ("qk_nope", qk_nope), ("qk_rope", qk_rope), ("v_head", v_head)):
        positive(name, v, integer=True)
    return (hidden * q_lora + q_lora + q_lora * heads * (qk_nope + qk_rope)
            + hidden * (kv_lora + qk_rope) + kv_lora + kv_lora * heads * (qk_nope + v_head)
            + heads * v_head * hidden)


_LLAMA_BLOCK = dict(gated_mlp=True, bias=False, learned_pos=False, tied_embeddings=False,
                    dropout=False, flash_attention=True)

MOE_MODELS: dict[str, MoEModel] = {
    m.name: m
    for m in [
        MoEModel("mixtral-8x7b",
                 ModelSpec("mixtral-8x7b", 32, 4096, 32, 4096, 32000, 14336, **_LLAMA_BLOCK,
                           source="Jiang et al. 2024 (Mixtral of Experts), Table 1"),
                 MoESpec(num_experts=8, top_k=2, expert_ffn=14336), kv_heads=8,
                 source="Jiang et al. 2024 (Mixtral of Experts), Table 1: 8 experts, top-2"),
        MoEModel("deepseek-v3",
                 ModelSpec("deepseek-v3", 61, 7168, 128, 4096, 129280, 18432, **_LLAMA_BLOCK,
                           source="DeepSeek-AI 2024 (DeepSeek-V3 technical report), Sec. 4.2"),
                 MoESpec(num_experts=256, top_k=8, expert_ffn=2048, shared_experts=1, dense_layers=3),
                 attention_params=mla_params(7168, 128, 1536, 512, 128, 64, 128),
                 source="DeepSeek-AI 2024 (DeepSeek-V3), Sec. 4.2: 256 routed + 1 shared experts, "
                        "top-8, first 3 layers dense, MLA"),
    ]
}


def get_moe_model(name: str | MoEModel) -> MoEModel:
    """An MoE preset by name (``MOE_MODELS``), or a MoEModel as is."""
    if isinstance(name, MoEModel):
        return name
    return MOE_MODELS[canonical("MoE model", name, MOE_MODELS)]


def moe_summary(model: str | MoEModel, tokens: int, ep: int, bytes_per_element: float = 2,
                dtype: str = "mixed") -> dict[str, float]:
    """The numbers a chapter prints for one MoE model: total and active parameters, their ratio,
    training FLOPs per token, routed-expert state bytes per GPU and all-to-all bytes per rank per
    layer for T = ``tokens`` per micro-batch on ``ep`` ranks."""
    mm = get_moe_model(model)
    number("bytes_per_element", bytes_per_element)
    return {"total_params": float(mm.total_params()), "active_params": float(mm.active_params()),
            "active_share": mm.active_params() / mm.total_params(),
            "train_flops_per_token": mm.train_flops_per_token(),
            "expert_state_bytes_per_gpu": expert_memory_per_gpu(
                mm.base.hidden, mm.moe, mm.moe_layers, ep, dtype=dtype).total,
            "all_to_all_bytes_per_layer": all_to_all_bytes_per_layer(
                tokens, mm.base.hidden, mm.moe, ep, bytes_per_element)}
