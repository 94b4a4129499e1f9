"""Activations one GPU of a pipeline stage keeps for the backward pass: the micro-batches in
flight under its schedule (GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2021; interleaved,
Korthikanti et al. 2022, Section 4.2.3) times the per-layer bytes of Korthikanti et al. 2022,
Table 2, plus what the first and last stages keep outside the layers (Section 4.3)."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.memory import layer_activation_bytes
from parlab.costmodel.pricing.moe_layer import stage_layer_kinds
from parlab.costmodel.pricing.params import stage_layers
from parlab.costmodel.pricing.pipeline_split import stage_index
from parlab.costmodel.specs.models import ModelSpec


def in_flight_microbatches(plan: Plan, stage: str | int) -> float:
    """Micro-batches whose activations a 'first', 'last' (or i-th) stage holds at its peak.

    GPipe (Huang et al. 2019): all m forwards run before any backward. 1F1B (PipeDream-Flush,
    Narayanan et al. 2021): stage i holds at most p - i, so the first holds min(p, m), the last
    1. Interleaved with v chunks: the first stage holds p (1 + (p-1)/(p v)) (Korthikanti et al.
    2022, Section 4.2.3), the last p - (p-1)/v (Megatron-LM's warm-up count,
    (p - 1 - rank) 2 + (v - 1) p chunk forwards, plus the one in progress), both capped at m:
    Megatron caps the warm-up at all m v chunk forwards (``get_pp_rank_microbatches``), so with
    m = p the first stage holds m. A middle rank i (an uneven split's most loaded one) holds
    min(p - i, m) under 1F1B and min((2 (p - 1 - i) + (v - 1) p + 1) / v, m) interleaved (the
    same warm-up count). With p = 1 there is no pipeline: the m micro-batches are gradient
    accumulation (Megatron's ``forward_backward_no_pipelining``), one held at a time.
    """
    p, m, v = plan.pp, plan.m, plan.chunks
    if p == 1:
        return 1.0
    if plan.schedule == "gpipe":
        return float(m)
    i = stage_index(stage, p)
    if plan.schedule == "1f1b":
        return float(min(p - i, m))
    if i in (0, p - 1):
        return min(p + (p - 1) / v, m) if i == 0 else min(p - (p - 1) / v, m)
    return min((2 * (p - 1 - i) + (v - 1) * p + 1) / v, m)


@dataclass(frozen=True)
class StageActivations:
    """Activation bytes of one GPU of a stage, by part (all per GPU, bytes)."""

    per_layer: float  # one layer, one micro-batch (Korthikanti Table 2)
    in_flight: float  # micro-batches held
    layers: float  # in_flight x stage layers x per_layer
    ends: float  # embedding inputs (first stage) / output layer and loss (last stage)
    working: float  # one layer's full activations while it is recomputed (full recompute)

    @property
    def total(self) -> float:
        return self.layers + self.ends + self.working


def stage_activations(model: ModelSpec, plan: Plan, stage: str | int) -> StageActivations:
    """Activations one GPU of the 'first', 'last' (or i-th) stage keeps for the backward pass.

    Per layer: Korthikanti et al. 2022, Table 2 (``activation_bytes_per_layer``). Outside the
    layers (Section 4.3; Megatron-LM theoretical_memory_usage.py): the first stage keeps the
    token ids 8 s b and, with dropout, the embedding-dropout mask s b h (/t with SP) per micro-batch in flight;
    the last keeps the output layer's input and the fp32 logits for the loss,
    4 s b (h + V/t) (h/t with SP). Full recompute adds the working set of the one layer being
    recomputed (its Table 2 activations without recompute).
    """
    s, b, h, V, t = model.seq_len / plan.cp, plan.micro_batch, model.hidden, model.vocab, plan.tp
    t_sp = t if plan.sequence_parallel else 1
    n = in_flight_microbatches(plan, stage)
    i, L = stage_index(stage, plan.pp), stage_layers(model, plan.pp, plan.layout(model), stage)
    kinds = _layer_kinds(model, plan, stage)  # (layers, moe_layer) pairs: dense first layers of an MoE model
    by_kind = [(k, layer_activation_bytes(model, b, t, plan.sequence_parallel, plan.recompute, cp=plan.cp,
                                          moe_layer=moe, modules=plan.recompute_modules)) for k, moe in kinds]
    if len(by_kind) == 1:
        per_layer = by_kind[0][1]
        layers = n * L * per_layer
    else:  # the mean over the stage's dense and MoE layers
        layers = n * sum(k * a for k, a in by_kind)
        per_layer = layers / n / L
    ends = 0.0
    if i == 0:
        ends += n * (8 * s * b + (s * b * h / t_sp if model.dropout else 0))
    if i == plan.pp - 1:
        ends += 4 * s * b * (h / t_sp + V / t)
    working = 0.0
    if plan.recompute == "full":
        working = max(layer_activation_bytes(model, b, t, plan.sequence_parallel, "none", cp=plan.cp,
                                             moe_layer=moe) for k, moe in kinds if k)
    return StageActivations(per_layer, n, layers, ends, working)


def _layer_kinds(model: ModelSpec, plan: Plan, stage: str | int) -> list[tuple[int, bool | None]]:
    """How many of the stage's layers are dense and how many MoE (``moe_layer.stage_layer_kinds``);
    one kind, None, for a dense model."""
    layout = plan.layout(model)
    if model.moe is None:
        return [(stage_layers(model, plan.pp, layout, stage), None)]
    dense, moe = stage_layer_kinds(model, plan.pp, stage, layout)
    return [(dense, False), (moe, True)]
