"""The models a learner is asked about today, as presets with exact parameter counts: Llama 2 and
3.1, Qwen2.5 and Qwen3 (dense and MoE), Mistral 7B, Mixtral 8x22B, GPT-OSS and Nemotron-4. Each
shape is its Hugging Face ``config.json`` (or paper table), cited in ``source``; ``PUBLISHED``
holds the total each one is checked against (``tests/test_costmodel_presets.py``) and where it
was read. ``seq_len`` is the pre-training context the paper states (not the longest the
released model serves)."""

from __future__ import annotations

from parlab.costmodel.specs.models import ModelSpec
from parlab.costmodel.specs.moe import MoESpec

# Llama's block (Touvron et al. 2023): SwiGLU, RMSNorm, no biases, untied embeddings, no dropout.
_LLAMA = dict(gated_mlp=True, bias=False, learned_pos=False, tied_embeddings=False, dropout=False,
              flash_attention=True)


def _llama(name: str, layers: int, hidden: int, heads: int, kv_heads: int, seq: int, vocab: int, ffn: int,
           source: str, **more) -> ModelSpec:
    return ModelSpec(name, layers, hidden, heads, seq, vocab, ffn, **{**_LLAMA, **more},
                     kv_heads=0 if kv_heads == heads else kv_heads, source=source)


_HF = "HF config.json of "
DENSE_2024: list[ModelSpec] = [
    _llama("llama-2-7b", 32, 4096, 32, 32, 4096, 32000, 11008,
           "Touvron et al. 2023 (Llama 2), Table 1; " + _HF + "meta-llama/Llama-2-7b-hf"),
    _llama("llama-2-13b", 40, 5120, 40, 40, 4096, 32000, 13824,
           "Touvron et al. 2023 (Llama 2), Table 1; " + _HF + "meta-llama/Llama-2-13b-hf"),
    _llama("llama-2-70b", 80, 8192, 64, 8, 4096, 32000, 28672,
           "Touvron et al. 2023 (Llama 2), Table 1 (GQA); " + _HF + "meta-llama/Llama-2-70b-hf"),
    _llama("llama-3.1-8b", 32, 4096, 32, 8, 8192, 128256, 14336,
           "Dubey et al. 2024 (Llama 3), Table 3; " + _HF + "meta-llama/Llama-3.1-8B"),
    _llama("llama-3.1-70b", 80, 8192, 64, 8, 8192, 128256, 28672,
           "Dubey et al. 2024 (Llama 3), Table 3; " + _HF + "meta-llama/Llama-3.1-70B"),
    _llama("llama-3.1-405b", 126, 16384, 128, 8, 8192, 128256, 53248,
           "Dubey et al. 2024 (Llama 3), Table 3; " + _HF + "meta-llama/Llama-3.1-405B"),
    _llama("qwen2.5-7b", 28, 3584, 28, 4, 4096, 152064, 18944,
           "Qwen Team 2024 (Qwen2.5 technical report), Table 1; " + _HF + "Qwen/Qwen2.5-7B", qkv_bias=True),
    _llama("qwen2.5-72b", 80, 8192, 64, 8, 4096, 152064, 29568,
           "Qwen Team 2024 (Qwen2.5 technical report), Table 1; " + _HF + "Qwen/Qwen2.5-72B", qkv_bias=True),
    _llama("qwen3-8b", 36, 4096, 32, 8, 4096, 151936, 12288,
           "Qwen Team 2025 (Qwen3 technical report), Table 1; " + _HF + "Qwen/Qwen3-8B-Base",
           head_dim=128, qk_norm=True),
    _llama("qwen3-32b", 64, 5120, 64, 8, 4096, 151936, 25600,
           "Qwen Team 2025 (Qwen3 technical report), Table 1; " + _HF + "Qwen/Qwen3-32B",
           head_dim=128, qk_norm=True),
    _llama("mistral-7b", 32, 4096, 32, 8, 8192, 32000, 14336,
           "Jiang et al. 2023 (Mistral 7B), Table 1 (window 4096 on every layer); "
           + _HF + "mistralai/Mistral-7B-v0.1", window=4096),
    # Nemotron-4: squared-ReLU MLP (not gated), no biases, untied embeddings, GQA (Megatron-LM).
    ModelSpec("nemotron-4-15b", 32, 6144, 48, 4096, 256000, 24576, bias=False, learned_pos=False,
              tied_embeddings=False, dropout=False, flash_attention=True, kv_heads=8,
              source="Parmar et al. 2024 (Nemotron-4 15B), Table 1: 32 layers, 6144 hidden, 48 heads, "
                     "8 KV heads, 4096 seq, 256k vocab, squared ReLU"),
    ModelSpec("nemotron-4-340b", 96, 18432, 96, 4096, 256000, 73728, bias=False, learned_pos=False,
              tied_embeddings=False, dropout=False, flash_attention=True, kv_heads=8,
              source="NVIDIA 2024 (Nemotron-4 340B technical report), Table 1: 96 layers, 18432 hidden, "
                     "96 heads, 8 KV heads, 4096 seq, 256k vocab, squared ReLU"),
]


def _moe(base: ModelSpec, moe: MoESpec) -> ModelSpec:
    return base.with_(moe=moe)


MOE_2024: list[ModelSpec] = [
    _moe(_llama("qwen3-30b-a3b", 48, 2048, 32, 4, 4096, 151936, 6144,
                "Qwen Team 2025 (Qwen3), Table 2: 128 experts, top-8; " + _HF + "Qwen/Qwen3-30B-A3B-Base",
                head_dim=128, qk_norm=True),
         MoESpec(num_experts=128, top_k=8, expert_ffn=768)),
    _moe(_llama("qwen3-235b-a22b", 94, 4096, 64, 4, 4096, 151936, 12288,
                "Qwen Team 2025 (Qwen3), Table 2: 128 experts, top-8; " + _HF + "Qwen/Qwen3-235B-A22B",
                head_dim=128, qk_norm=True),
         MoESpec(num_experts=128, top_k=8, expert_ffn=1536)),
    _moe(_llama("mixtral-8x22b", 56, 6144, 48, 8, 4096, 32000, 16384,
                "Mistral AI 2024 (Mixtral 8x22B announcement: 141B total, 39B active); "
                + _HF + "mistral-community/Mixtral-8x22B-v0.1"),
         MoESpec(num_experts=8, top_k=2, expert_ffn=16384)),
    # GPT-OSS: attention with biases and sinks, bands of 128-token windows on every other layer
    # (layer 0 windowed), experts with biases and a router with one, untied embeddings.
    _moe(_llama("gpt-oss-20b", 24, 2880, 64, 8, 4096, 201088, 2880,
                "OpenAI 2025 (gpt-oss-120b & gpt-oss-20b model card), Sec. 2; " + _HF + "openai/gpt-oss-20b",
                head_dim=64, attention_bias=True, sinks=True, window=128, window_pattern=2),
         MoESpec(num_experts=32, top_k=4, expert_ffn=2880, bias=True, router_bias=True)),
    _moe(_llama("gpt-oss-120b", 36, 2880, 64, 8, 4096, 201088, 2880,
                "OpenAI 2025 (gpt-oss-120b & gpt-oss-20b model card), Sec. 2; " + _HF + "openai/gpt-oss-120b",
                head_dim=64, attention_bias=True, sinks=True, window=128, window_pattern=2),
         MoESpec(num_experts=128, top_k=4, expert_ffn=2880, bias=True, router_bias=True)),
]

#: Every preset of this module by name.
MODERN_MODELS: dict[str, ModelSpec] = {m.name: m for m in DENSE_2024 + MOE_2024}

#: (published count, its rounding (0 = exact), which count: "total" or "non_embedding", where it
#: was read) per preset. An exact total is the bf16 checkpoint's ``model.safetensors.index.json``
#: ``total_size`` / 2 bytes (each also found in public copies of that index or of its count).
PUBLISHED: dict[str, tuple[int, float, str, str]] = {
    "llama-2-7b": (6_738_415_616, 0, "total", "safetensors index total_size 13,476,831,232 B / 2"),
    "llama-2-13b": (13_015_864_320, 0, "total", "safetensors index total_size 26,031,728,640 B / 2"),
    "llama-2-70b": (68_976_648_192, 0, "total", "safetensors index total_size 137,953,296,384 B / 2"),
    "llama-3.1-8b": (8_030_261_248, 0, "total", "safetensors index total_size 16,060,522,496 B / 2"),
    "llama-3.1-70b": (70_553_706_496, 0, "total", "safetensors index total_size 141,107,412,992 B / 2"),
    "llama-3.1-405b": (405_853_388_800, 0, "total", "safetensors index total_size 811,706,777,600 B / 2"),
    "qwen2.5-7b": (7_615_616_512, 0, "total", "safetensors index total_size 15,231,233,024 B / 2"),
    "qwen2.5-72b": (72_706_203_648, 0, "total", "safetensors index total_size 145,412,407,296 B / 2"),
    "qwen3-8b": (8_190_735_360, 0, "total", "safetensors index total_size 16,381,470,720 B / 2"),
    "qwen3-32b": (32_762_123_264, 0, "total", "safetensors index total_size 65,524,246,528 B / 2"),
    "qwen3-30b-a3b": (30_532_122_624, 0, "total", "safetensors index total_size 61,064,245,248 B / 2"),
    "qwen3-235b-a22b": (235_093_634_560, 0, "total", "safetensors index total_size 470,187,269,120 B / 2"),
    "mistral-7b": (7_241_732_096, 0, "total", "safetensors index total_size 14,483,464,192 B / 2"),
    "mixtral-8x22b": (140_620_634_112, 0, "total", "safetensors index total_size 281,241,268,224 B / 2 (v0.1)"),
    "gpt-oss-20b": (20_910_000_000, 0.005e9, "total", "model card, Table 1: 20.91B total (an MXFP4 "
                                                      "checkpoint: its index does not give the count)"),
    "gpt-oss-120b": (116_830_000_000, 0.005e9, "total", "model card, Table 1: 116.83B total (MXFP4 checkpoint)"),
    # The paper also states 3.2B embedding parameters; 2 V h = 3.146B rounds to 3.1B (not verified here).
    "nemotron-4-15b": (12_500_000_000, 0.05e9, "non_embedding", "Parmar et al. 2024, Sec. 2: 12.5B "
                                                                "non-embedding parameters"),
    "nemotron-4-340b": (331_600_000_000, 0.05e9, "non_embedding", "NVIDIA 2024, Sec. 2.1: 9.4B embedding + "
                                                                  "331.6B non-embedding parameters"),
}
