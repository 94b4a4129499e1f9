"""The model catalogue: every preset by name (``MODELS``: the guide's dense ones of ``models``, the
MoE ones of ``moe_presets`` and today's of ``modern_presets``) and ``get_model``, the one door
from a name, a size or a Hugging Face ``config.json`` to a ModelSpec."""

from __future__ import annotations

from dataclasses import replace

from parlab.costmodel.specs._check import normalize
from parlab.costmodel.specs.models import _SIZE, DENSE_MODELS, ModelSpec, gpt_like, parse_size
from parlab.costmodel.specs.modern_presets import MODERN_MODELS
from parlab.costmodel.specs.moe_presets import MOE_MODELS

MODELS: dict[str, ModelSpec] = dict(DENSE_MODELS)
#: The presets a size such as '7B' picks from: the guide's (the modern ones are named in full,
#: so '7B' stays LLaMA-7B and '8B' a GPT-style shape).
SIZED: list[str] = list(DENSE_MODELS) + list(MOE_MODELS)
#: Llama 3 8B / 70B have the shapes of Llama 3.1's (Dubey et al. 2024, Table 3; 3.1 extends the
#: context with RoPE scaling only): the same presets.
ALIASES: dict[str, str] = {"llama-3-8b": "llama-3.1-8b", "llama-3-70b": "llama-3.1-70b"}


def get_model(name: str | ModelSpec) -> ModelSpec:
    """A preset by name ('llama-7b'), a size ('7B': the one guide preset of that size if exactly
    one exists (``SIZED``), else ``gpt_like``; two such presets are ambiguous: a ValueError names
    both), a path to a Hugging Face ``config.json`` (``hf_config.from_hf_config``), or a ModelSpec
    (returned as is)."""
    if isinstance(name, ModelSpec):
        return name
    if not isinstance(name, str):
        raise TypeError(f"model must be a preset name, a size such as '7B', a config.json path or a ModelSpec, "
                        f"got {name!r}")
    key = normalize(name)
    key = ALIASES.get(key, key)
    if key in MODELS:
        return MODELS[key]
    if name.strip().lower().endswith(".json"):
        from parlab.costmodel.specs.hf_config import from_hf_config

        return from_hf_config(name.strip())
    if _SIZE.match(key):
        n = parse_size(key)
        tag = "-" + key.replace(" ", "")
        same = [m for m in SIZED if m.endswith(tag)]
        if len(same) == 1:
            return MODELS[same[0]]
        if same:
            raise ValueError(f"model size {name!r} is ambiguous: {' and '.join(same)} both have it; "
                             f"name the preset")
        return gpt_like(n)
    raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}, "
                     "a size such as 7B, 350M, 1.5T, or a path to a Hugging Face config.json")


def _add_moe_presets() -> None:
    """The MoE presets (Mixtral 8x7B, DeepSeek-V3) as ModelSpecs the planner prices: their
    published shapes are written once, in ``moe_presets.MOE_MODELS``, with their sources."""
    for name, mm in MOE_MODELS.items():
        MODELS[name] = replace(mm.base, moe=mm.moe, kv_heads=mm.kv_heads, attention_params=mm.attention_params,
                               source=mm.source)


_add_moe_presets()
MODELS.update(MODERN_MODELS)
