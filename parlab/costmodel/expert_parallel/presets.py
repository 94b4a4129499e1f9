"""MoE models (``MoEModel``): a dense decoder whose MLPs are MoE layers, its total and active
parameters and training FLOPs per token (Kaplan et al. 2020, Sec. 2.1), the weights of multi-head
latent attention (DeepSeek-V2, Sec. 2.1.2-2.1.3), the Mixtral 8x7B and DeepSeek-V3 presets, and
the numbers a chapter prints for one (``moe_summary``)."""

from __future__ import annotations

from dataclasses import dataclass

from .._check import canonical, non_negative, number, positive, text
from ..models import ModelSpec
from .layer import all_to_all_bytes_per_layer, expert_memory_per_gpu
from .spec import MoESpec


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
