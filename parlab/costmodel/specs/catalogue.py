"""The model catalogue: every preset by name (``MODELS``: the dense ones of ``models`` and the MoE
ones of ``moe_presets``) and ``get_model``, the one door from a name or a size to a ModelSpec."""

from __future__ import annotations

from dataclasses import replace

from parlab.costmodel.specs._check import normalize
from parlab.costmodel.specs.models import _SIZE, DENSE_MODELS, ModelSpec, gpt_like, parse_size
from parlab.costmodel.specs.moe_presets import MOE_MODELS

MODELS: dict[str, ModelSpec] = dict(DENSE_MODELS)


def get_model(name: str | ModelSpec) -> ModelSpec:
    """A preset by name ('llama-7b'), a size ('7B': the one preset of that size if exactly one
    exists, else ``gpt_like``), or a ModelSpec (returned as is)."""
    if isinstance(name, ModelSpec):
        return name
    if not isinstance(name, str):
        raise TypeError(f"model must be a preset name, a size such as '7B' or a ModelSpec, got {name!r}")
    key = normalize(name)
    if key in MODELS:
        return MODELS[key]
    if _SIZE.match(key):
        n = parse_size(key)
        tag = "-" + key.replace(" ", "")
        same = [m for m in MODELS.values() if m.name.endswith(tag)]
        if len(same) == 1:
            return same[0]
        return gpt_like(n)
    raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}, "
                     "or a size such as 7B, 350M, 1.5T")


def _add_moe_presets() -> None:
    """The MoE presets (Mixtral 8x7B, DeepSeek-V3) as ModelSpecs the planner prices: their
    published shapes are written once, in ``moe_presets.MOE_MODELS``, with their sources."""
    for name, mm in MOE_MODELS.items():
        MODELS[name] = replace(mm.base, moe=mm.moe, kv_heads=mm.kv_heads, attention_params=mm.attention_params,
                               source=mm.source)


_add_moe_presets()
