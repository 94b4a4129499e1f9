"""An FP8 plan's step-time terms (``pricing.fp8`` on a plan): the matmul time with the linear
layers' GEMMs at the FP8 peak, ZeRO-3's parameter all-gather in FP8, and the line ``explain``
prints for them. MFU stays model FLOPs over the bf16 peak, so that a BF16 and an FP8 plan are
compared on one scale (a convention, said here: some reports divide by the FP8 peak)."""

from __future__ import annotations

from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.fp8 import (
    attention_core_flops,
    fp8_gather_bytes,
    fp8_gemm_flops,
    stage_linear_params,
)
from parlab.costmodel.pricing.memory import get_precision
from parlab.costmodel.specs.assumptions import Assumptions
from parlab.costmodel.specs.cluster import Cluster
from parlab.costmodel.specs.fp8 import get_fp8_recipe
from parlab.costmodel.specs.models import ModelSpec


def fp8_matmuls(model: ModelSpec, cluster: Cluster, plan: Plan, a: Assumptions, f: dict, layers: float) -> None:
    """Write an FP8 plan's matmul time of one micro-batch into the step's facts ``f``: of
    ``f["flops_mb"]``, the linear layers' GEMMs (``pricing.fp8.fp8_gemm_flops`` over ``layers``,
    the stage's forward layer FLOPs) at the FP8 peak x ``fp8_matmul_efficiency``, the rest
    (attention cores, logits, recomputed scores) at the bf16 peak x ``matmul_efficiency``."""
    core = attention_core_flops(model, plan.micro_batch, plan.tp, plan.cp)
    fp8 = fp8_gemm_flops(layers, f["L"], core, f["passes"])
    f["fp8_flops_mb"], f["fp8_peak"] = fp8, cluster.gpu.peak_flops("fp8")
    f["t_mm_mb"] = (fp8 / (f["fp8_peak"] * a.fp8_matmul_efficiency)
                    + (f["flops_mb"] - fp8) / (f["peak"] * a.matmul_efficiency))


def zero3_fp8_gather_bytes(model: ModelSpec, plan: Plan, params: float) -> float:
    """Bytes of one ZeRO-3 all-gather of an FP8 plan's ``params`` (pp = 1 under ZeRO-3, so one
    stage holds both ends): ``pricing.fp8.fp8_gather_bytes``, FP8 for the linears with FSDP."""
    linear = stage_linear_params(model, params, plan.tp, plan.pp, "first")
    return fp8_gather_bytes(params, linear, get_precision(plan.precision).weight, get_fp8_recipe(plan.fp8_recipe),
                            plan.zero3_impl == "fsdp")


def matmul_formula(f: dict, a: Assumptions, plan: Plan, rec: str, pace: str = "last stage") -> str:
    """The ``compute: matmuls`` line of ``Estimate.explain``: one rate, or FP8's two; ``pace`` names
    the stage whose time sets the pipeline's pace."""
    head = f"m {plan.m} x {f['flops_mb']:.3g} FLOPs per micro-batch on the {pace}{rec}"
    bf16 = f"({f['peak'] / 1e12:g} TFLOP/s x {a.matmul_efficiency:g})"
    if plan.dtype != "fp8":
        return f"{head} / {bf16}"
    fp8 = f["fp8_flops_mb"]
    return (f"{head}: {fp8:.3g} in the linear layers' GEMMs, FP8 ({plan.fp8_recipe}) / "
            f"({f['fp8_peak'] / 1e12:g} TFLOP/s x {a.fp8_matmul_efficiency:g}), + {f['flops_mb'] - fp8:.3g} "
            f"in BF16 (attention scores and x V, logits) / {bf16}")
