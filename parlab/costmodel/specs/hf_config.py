"""The door from a Hugging Face ``config.json`` to a ModelSpec (``from_hf_config``), with no network:
the fields of the common decoder architectures read as ``transformers`` reads them (each model's
``configuration_*.py`` and ``modeling_*.py``: Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE,
DeepSeek-V3, GPT-OSS, Gemma, Gemma 2, Gemma 3). An architecture, or a field, whose weights it
cannot count is one ValueError naming it: never a silent multi-head-attention guess."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from parlab.costmodel.specs.models import ModelSpec
from parlab.costmodel.specs.moe import MoESpec

# Per model_type: gated MLP activations, the tie_word_embeddings default of its config class,
# Q/K/V biases (Qwen2 hard-codes them), QK-norm (Qwen3, Gemma 3), sandwich norms (Gemma 2/3),
# and how its windows alternate (0 = every layer; k = one full layer every k; None = read the
# config's layer_types / sliding_window_pattern).
_ARCH: dict[str, dict] = {
    "llama": dict(tied=False),
    "mistral": dict(tied=False, window_every=0),
    "mixtral": dict(tied=False, window_every=0, moe=True),
    "qwen2": dict(tied=False, qkv_bias=True),
    "qwen3": dict(tied=False, qk_norm=True),
    "qwen3_moe": dict(tied=False, qk_norm=True, moe=True),
    "deepseek_v3": dict(tied=False, moe=True),
    "gpt_oss": dict(tied=False, moe=True, sinks=True),
    "gemma": dict(tied=True),
    "gemma2": dict(tied=True, sandwich=True, window_every=2),
    "gemma3_text": dict(tied=True, sandwich=True, qk_norm=True),
}
_GATED = {"silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new"}  # act(gate) * up, then down


def _fail(name: str, why: str) -> ValueError:
    return ValueError(f"config.json of {name}: {why}")


def _read(source: str | Path | Mapping) -> tuple[dict, str]:
    if isinstance(source, Mapping):
        cfg = dict(source)
        return cfg, str(cfg.get("_name_or_path") or cfg.get("model_type") or "hf-model").split("/")[-1]
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    try:
        cfg = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"cannot read a Hugging Face config.json at {str(source)!r}: {err.strerror or err}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{str(source)!r} is not JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{str(source)!r} holds no JSON object, so no config.json")
    stem = path.parent.name if path.stem == "config" else path.stem
    return cfg, stem


def _int(cfg: dict, key: str, name: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(name, f"{key}={value!r} must be a non-negative integer")
    return value


def _window(cfg: dict, arch: dict, layers: int, name: str) -> tuple[int, int]:
    """(window, one full layer every k) from ``sliding_window`` and ``layer_types`` (or Gemma 3's
    ``sliding_window_pattern``); a layout other than a period of k is refused."""
    types = cfg.get("layer_types")
    window = cfg.get("sliding_window") or 0
    if cfg.get("use_sliding_window") is False:  # Qwen: the field is there, switched off
        window = 0
    elif cfg.get("use_sliding_window"):
        raise _fail(name, "use_sliding_window=true (windows on the layers past max_window_layers) is not priced")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise _fail(name, f"layer_types must list num_hidden_layers={layers} layer kinds")
        full = [t == "full_attention" for t in types]
        if any(t not in ("full_attention", "sliding_attention") for t in types):
            raise _fail(name, f"layer_types holds {sorted(set(types))}: only full_attention and sliding_attention "
                              f"are priced")
        if all(full):
            return 0, 0
        k = full.index(True) + 1 if any(full) else 0
        if k and full != [(i + 1) % k == 0 for i in range(layers)]:
            raise _fail(name, "layer_types is not one full-attention layer every k layers, the only mix priced")
        return _int(cfg, "sliding_window", name), k
    if not window:
        return 0, 0
    every = arch.get("window_every", cfg.get("sliding_window_pattern"))
    if every is None:
        raise _fail(name, f"sliding_window={window} without layer_types: which layers are windowed is unknown")
    return _int(cfg, "sliding_window", name), every


def _moe(cfg: dict, model_type: str, name: str) -> tuple[MoESpec, int]:
    """(the MoE part, the dense MLP width of its dense layers) of an MoE config."""
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts")
    top_k = cfg.get("num_experts_per_tok") or cfg.get("experts_per_token")
    if not experts or not top_k:
        raise _fail(name, f"an {model_type} config needs its expert count and num_experts_per_tok")
    if model_type in ("mixtral", "gpt_oss"):  # no dense layers: the experts' width stands for both
        width = dense_ffn = _int(cfg, "intermediate_size", name)
    else:
        width, dense_ffn = _int(cfg, "moe_intermediate_size", name), _int(cfg, "intermediate_size", name, 0)
    dense = 0
    if model_type == "qwen3_moe":
        only, step = cfg.get("mlp_only_layers") or [], cfg.get("decoder_sparse_step", 1)
        if step != 1 or only != list(range(len(only))):
            raise _fail(name, f"decoder_sparse_step={step} / mlp_only_layers={only}: only dense first layers are "
                              f"priced")
        dense = len(only)
    if model_type == "deepseek_v3":
        if cfg.get("moe_layer_freq", 1) != 1:
            raise _fail(name, f"moe_layer_freq={cfg['moe_layer_freq']}: only every layer past the dense ones "
                              f"being MoE is priced")
        dense = _int(cfg, "first_k_dense_replace", name, 0)
    gpt_oss = model_type == "gpt_oss"
    spec = MoESpec(num_experts=experts, top_k=top_k, expert_ffn=width,
                   shared_experts=_int(cfg, "n_shared_experts", name, 0), dense_layers=dense,
                   bias=gpt_oss, router_bias=gpt_oss)
    return spec, dense_ffn


def from_hf_config(source: str | Path | Mapping, seq_len: int | None = None, name: str | None = None) -> ModelSpec:
    """A ModelSpec from a Hugging Face ``config.json`` (a path, its folder, or the parsed dict).

    ``seq_len``: given, else ``rope_scaling.original_max_position_embeddings`` (the context before
    a long-context extension: Llama 3.1's 8192, GPT-OSS's 4096), else ``max_position_embeddings``.
    A multimodal config (``text_config`` with a vision tower) is refused: pass its text part.
    DeepSeek-V3's multi-token-prediction layers (``num_nextn_predict_layers``) are not counted,
    as its 671B excludes them (DeepSeek-AI 2024, Sec. 4.2), nor its routers' correction biases
    (``e_score_correction_bias``, 58 x 256: the ``deepseek-v3`` preset's count, 14,848 below the
    checkpoint's 671,026,419,200)."""
    from parlab.costmodel.specs.moe_presets import mla_params

    cfg, stem = _read(source)
    name = name or stem
    model_type = cfg.get("model_type")
    if "vision_config" in cfg or ("text_config" in cfg and model_type not in _ARCH):
        raise _fail(name, f"model_type={model_type!r} is multimodal (a vision tower is not priced): pass its "
                          f"text_config")
    if model_type not in _ARCH:
        raise _fail(name, f"model_type={model_type!r} is not mapped; from_hf_config reads {', '.join(_ARCH)}")
    arch = _ARCH[model_type]
    act = cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu"
    if act not in _GATED:
        raise _fail(name, f"hidden_act={act!r}: only gated MLPs (SiLU/GeLU: gate, up, down) are mapped")
    for flag in ("mlp_bias",):
        if cfg.get(flag):
            raise _fail(name, f"{flag}=true (biases on the MLP without LayerNorm biases) is not priced")
    layers = _int(cfg, "num_hidden_layers", name)
    hidden, heads = _int(cfg, "hidden_size", name), _int(cfg, "num_attention_heads", name)
    rope = cfg.get("rope_scaling") or {}
    seq = seq_len or rope.get("original_max_position_embeddings") or _int(cfg, "max_position_embeddings", name)
    window, every = _window(cfg, arch, layers, name)
    fields = dict(gated_mlp=True, bias=False, learned_pos=False, dropout=False, flash_attention=True,
                  tied_embeddings=bool(cfg.get("tie_word_embeddings", arch["tied"])),
                  kv_heads=kv if (kv := _int(cfg, "num_key_value_heads", name, heads)) != heads else 0,
                  head_dim=cfg.get("head_dim") or 0,
                  qk_norm=arch.get("qk_norm", False), qkv_bias=arch.get("qkv_bias", False),
                  attention_bias=bool(cfg.get("attention_bias", False)), sinks=arch.get("sinks", False),
                  window=window, window_pattern=every, sandwich_norm=arch.get("sandwich", False))
    moe, ffn = None, _int(cfg, "intermediate_size", name, 0)
    if arch.get("moe"):
        moe, ffn = _moe(cfg, model_type, name)
    if model_type == "deepseek_v3":
        if not cfg.get("q_lora_rank"):
            raise _fail(name, "q_lora_rank=null (latent attention without a query down-projection) is not priced")
        fields.update(kv_heads=0, attention_params=mla_params(
            hidden, heads, cfg["q_lora_rank"], cfg["kv_lora_rank"], cfg["qk_nope_head_dim"],
            cfg["qk_rope_head_dim"], cfg["v_head_dim"]))
    source_note = f"Hugging Face config.json ({model_type}), read by parlab.costmodel.specs.hf_config"
    return ModelSpec(name, layers, hidden, heads, seq, _int(cfg, "vocab_size", name), ffn or 4 * hidden,
                     moe=moe, source=source_note, **fields)
