"""The MoE presets (``MOE_MODELS``: Mixtral 8x7B, DeepSeek-V3) as ``moe.MoEModel``s, each with its
source, and the weights of multi-head latent attention (DeepSeek-V2, Sec. 2.1.2-2.1.3)."""

from __future__ import annotations

from parlab.costmodel.specs._check import canonical, positive
from parlab.costmodel.specs.models import ModelSpec
from parlab.costmodel.specs.moe import MoEModel, MoESpec


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
