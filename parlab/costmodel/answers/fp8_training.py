"""FP8 training beside BF16 and FP16 for chapter 09's mixed-precision section: which tensors run in
FP8 and which stay BF16/FP32, each recipe's scales and extra bytes (``specs.fp8.FP8_RECIPES``), and
one plan priced in each precision. Compositions of ``specs.fp8`` and ``estimate``; no new formula.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import Cluster
from parlab.costmodel.specs.fp8 import DEEPSEEK_SRC, FP8_RECIPES, TE_SRC, FP8Recipe
from parlab.costmodel.specs.models import ModelSpec

_TE = "TransformerEngine docs, 'Using FP8 with Transformer Engine'"
_DS = "DeepSeek-V3 report Sec. 3.3.1, Fig. 6"

#: Each tensor of an FP8 training step and the precision it is kept or computed in, with the
#: source that says so (the summary of ``specs.fp8``'s module docstring, one row a tensor).
FP8_TENSORS: tuple[tuple[str, str, str], ...] = (
    ("linear GEMMs: forward (Fprop), input gradient (Dgrad), weight gradient (Wgrad)",
     "FP8 inputs, FP8 tensor cores; E4M3 (TE HYBRID: E5M2 for gradients)", f"{_TE}; {_DS}"),
    ("FP8 weight copies (the weight and its transpose, Hopper's TN-only FP8 GEMMs)",
     "FP8, held beside the BF16 weight", f"{_TE}; {_DS}"),
    ("scales: per tensor (TE) or per 1x128 / 128x128 tile (DeepSeek-V3) or 1x32 (MXFP8)",
     "FP32 (MXFP8: E8M0 exponents)", f"{TE_SRC}; {DEEPSEEK_SRC}"),
    ("attention scores, softmax, scores x V", "BF16 (TE's DotProductAttention unless fp8_dpa)", f"{_TE}; {_DS}"),
    ("norms, embedding, output layer, MoE router", "BF16 / FP32", f"{_DS} ('embedding module, the output head')"),
    ("working weights", "BF16", f"{_TE}; Megatron-LM --fp8-format with --bf16"),
    ("master weights, gradients the optimizer reads, Adam's moments", "FP32", f"{_DS}; Megatron-LM main_grad"),
)


def recipe_rows(recipes: dict[str, FP8Recipe] | None = None) -> tuple[list[list], list[str], dict]:
    """``(rows, headers, formats)`` of the FP8 recipes (``specs.fp8.FP8_RECIPES``): scaling, scale
    granularity of activations and weights, bytes each linear weight adds
    (``FP8Recipe.weight_bytes_per_param``), FP8 all-gather under FSDP2, whether it needs Blackwell."""

    def grain(n: int) -> str:
        return {0: "one per tensor", 128: "1 x 128 tile", 128 * 128: "128 x 128 block", 32: "1 x 32 block"}.get(
            n, f"{n:,} elements")

    rows = [[r.name, r.scaling, grain(r.activation_scale), grain(r.weight_scale), r.weight_bytes_per_param(),
             "yes" if r.fp8_all_gather else "no", "Blackwell (MXFP8)" if r.mx else "Hopper or newer"]
            for r in (recipes or FP8_RECIPES).values()]
    return rows, ["recipe", "scaling", "activation scale", "weight scale", "added B / linear weight",
                  "FP8 all-gather (FSDP2)", "GPUs"], {"added B / linear weight": ".3f"}


@dataclass(frozen=True)
class PrecisionRow:
    """One plan priced in one precision (``label``: 'fp16', 'bf16', 'fp8 (te-delayed)', ...)."""

    label: str
    estimate: Estimate


def precisions(model: str | ModelSpec, cluster: Cluster, plan: Plan) -> list[PrecisionRow]:
    """``plan`` priced in fp16, bf16 and FP8 with every recipe the cluster's GPU runs (MXFP8 only on
    GPUs with MXFP8 tensor cores, ``GPUSpec.mxfp8``)."""
    m = get_model(model) if isinstance(model, str) else model
    out = [PrecisionRow(d, estimate(m, cluster, plan.with_(dtype=d))) for d in ("fp16", "bf16")]
    for r in FP8_RECIPES.values():
        if r.mx and not cluster.gpu.mxfp8:
            continue
        out.append(PrecisionRow(f"fp8 ({r.name})", estimate(m, cluster, plan.with_(dtype="fp8", fp8_recipe=r.name))))
    return out


def precision_rows(rows: list[PrecisionRow]) -> tuple[list[list], list[str], dict]:
    """``(rows, headers, formats)`` of ``precisions``: memory per GPU, its weights term (the FP8
    copies land there), the gradients, the step, its matmul time and MFU."""
    out = []
    for r in rows:
        mem, t = r.estimate.memory_terms(), r.estimate.time_terms()
        out.append([r.label, r.estimate.memory_total / 1e9, mem["parameters"] / 1e9, mem["gradients"] / 1e9,
                    r.estimate.step_time * 1e3, t["compute: matmuls"] * 1e3, r.estimate.mfu])
    headers = ["precision", "memory/GPU (GB)", "weights (GB)", "gradients (GB)", "step (ms)", "matmuls (ms)", "MFU"]
    return out, headers, {"memory/GPU (GB)": ",.1f", "weights (GB)": ",.1f", "gradients (GB)": ",.1f",
                          "step (ms)": ",.0f", "matmuls (ms)": ",.0f", "MFU": ".1%"}
