"""What one pipeline stage computes, for ``step_time``: its layers' forward FLOPs (dense or MoE),
which stage of an uneven split sets the pipeline's pace, which may hold the most parameters, and
its mean layer's stored activations (what its elementwise kernels read and write)."""

from __future__ import annotations

from parlab.costmodel.plan.memory.activations import _layer_kinds
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.layer_flops import layer_forward_flops, logit_forward_flops
from parlab.costmodel.pricing.memory import layer_activation_bytes
from parlab.costmodel.pricing.params import stage_layers
from parlab.costmodel.pricing.pipeline_split import fullest_stage
from parlab.costmodel.specs.models import ModelSpec


def pacing_stage(model: ModelSpec, plan: Plan, layout: tuple[int, ...]) -> int:
    """The pipeline rank whose time per micro-batch sets the pipeline's pace: the last (its layers
    and the output layer) where it holds the most layers, as with an even split; with an uneven
    split whose last stage is lighter, the first most-loaded rank unless the last rank's layers
    and logits take more forward FLOPs (``stage_layer_flops``, ``logit_forward_flops``)."""
    top, p = max(layout), plan.pp
    if layout[-1] == top:
        return p - 1
    fullest = layout.index(top)
    logits = logit_forward_flops(model, plan.micro_batch, plan.tp) / plan.cp
    if stage_layer_flops(model, plan, p - 1) + logits >= stage_layer_flops(model, plan, fullest):
        return p - 1
    return fullest


def param_stages(layout: tuple[int, ...]) -> tuple[int, ...]:
    """The ranks that may hold the most parameters: the first (embedding), the last (output
    layer) and, with an uneven split, a middle rank with the most layers (``fullest_stage``)."""
    fullest = fullest_stage(layout)
    return (0, len(layout) - 1) + (() if fullest is None else (fullest,))


def stage_layer_flops(model: ModelSpec, plan: Plan, stage: str | int, padded: bool = True) -> float:
    """Forward matmul FLOPs of one micro-batch through the stage's layers on one GPU (``Plan.layout``) x
    ``layer_forward_flops`` / cp for a dense model; an MoE model's dense and MoE layers
    (``moe_layer.moe_model_layer_flops``, experts over their padded capacity unless ``padded``
    is False)."""
    b, t, cp = plan.micro_batch, plan.tp, plan.cp
    if model.moe is None:
        flops = stage_layers(model, plan.pp, plan.layout(model), stage) * layer_forward_flops(model, b, t)
        return flops if cp == 1 else flops / cp
    from parlab.costmodel.pricing.moe_layer import moe_model_layer_flops, stage_layer_kinds

    dense, moe = stage_layer_kinds(model, plan.pp, stage, plan.layout(model))
    return (dense * moe_model_layer_flops(model, b, t, cp, False, padded)
            + moe * moe_model_layer_flops(model, b, t, cp, True, padded))


def mean_layer_activations(model: ModelSpec, plan: Plan, stage: str | int = "last",
                            recompute: str = "none") -> float:
    """Activation bytes of the stage's mean layer without recompute (what elementwise
    kernels read and write), or with the plan's module-level recompute (``recompute='modules'``)."""
    kinds = _layer_kinds(model, plan, stage)
    per = [(k, layer_activation_bytes(model, plan.micro_batch, plan.tp, plan.sequence_parallel, recompute,
                                      cp=plan.cp, moe_layer=moe, modules=plan.recompute_modules))
           for k, moe in kinds]
    if len(per) == 1:
        return per[0][1]
    return sum(k * x for k, x in per) / sum(k for k, _ in per)
