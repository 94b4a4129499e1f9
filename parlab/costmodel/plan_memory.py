"""Memory of one GPU under a plan: model states sharded by TP, PP and ZeRO, and the activations a
pipeline stage holds (Korthikanti et al. 2022), for the first and the last stage."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._check import positive
from .assumptions import Assumptions
from .memory import ModelStateMemory, activation_bytes_per_layer, get_precision, model_state_memory
from .models import ModelSpec
from .plan import Plan


# -- parameters ---------------------------------------------------------------------------------
def layer_params_per_gpu(model: ModelSpec, tp: int = 1) -> float:
    """Parameters of one transformer layer held by one of ``tp`` tensor-parallel ranks.

    Megatron-LM (Shoeybi et al. 2019, Section 3) splits the QKV and MLP-in matrices by columns
    (their biases too) and the attention-output and MLP-out matrices by rows; the row-parallel
    biases and the LayerNorms are replicated. With tp = 1 this is ``ModelSpec.params_per_layer``.
    """
    h, f = model.hidden, model.ffn
    n_in = 2 if model.gated_mlp else 1
    split = 4 * h * h + (n_in + 1) * h * f  # (h, 3h) QKV, (h, h) out, (h, f) in [x2 gated], (f, h) out
    replicated = 2 * (2 * h if model.bias else h)  # two norms
    if model.bias:
        split += 3 * h + n_in * f  # column-parallel biases
        replicated += 2 * h  # row-parallel biases (attention out, MLP out)
    return split / tp + replicated


def stage_layers(model: ModelSpec, pp: int) -> int:
    """Layers on the most loaded pipeline stage: ceil(l / pp)."""
    return math.ceil(model.layers / pp)


def stage_params(model: ModelSpec, tp: int, pp: int, stage: str) -> float:
    """Parameters one GPU of the 'first' or 'last' pipeline stage holds (before ZeRO).

    Its ceil(l/pp) layers (``layer_params_per_gpu``), plus on the first stage the vocabulary-
    parallel input embedding V h / t (Megatron-LM splits it over TP) and the position table, and
    on the last stage the output layer V h / t (a copy of the tied embedding when pp > 1) and the
    final norm. With pp = 1 one stage holds both ends.
    """
    h, V = model.hidden, model.vocab
    norm = 2 * h if model.bias else h
    n = stage_layers(model, pp) * layer_params_per_gpu(model, tp)
    embedding = V * h / tp + (model.seq_len * h if model.learned_pos else 0) + (norm if model.embedding_norm else 0)
    output = norm + (V * h / tp if (pp > 1 or not model.tied_embeddings) else 0)
    if stage == "first" or pp == 1:
        n += embedding
    if stage == "last" or pp == 1:
        n += output
    return n


def zero_model_states(n_params: float, dp: int, stage: int, dtype: str = "mixed",
                      optimizer: str = "adam") -> ModelStateMemory:
    """Model-state bytes per GPU with ZeRO stage 0-3 over ``dp`` data-parallel ranks.

    Rajbhandari et al. 2020 ("ZeRO"), Figure 1 and Section 5: with K bytes of optimizer state per
    parameter (K = 12 for mixed-precision Adam), Psi parameters and Nd ranks:
    stage 0: (2 + 2 + K) Psi;  1 (P_os): 4 Psi + K Psi / Nd;  2 (P_os+g): 2 Psi + (2 + K) Psi / Nd;
    3 (P_os+g+p): (2 + 2 + K) Psi / Nd. The paper's example, 7.5B parameters on 64 GPUs:
    120 GB -> 31.4, 16.6 and 1.9 GB.
    """
    positive("dp", dp, integer=True)
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be one of 0, 1, 2, 3, got {stage!r}")
    full = model_state_memory(n_params, dtype, optimizer)
    return ModelStateMemory(
        n_params, full.precision, full.optimizer,
        full.weights / (dp if stage >= 3 else 1), full.grads / (dp if stage >= 2 else 1),
        full.master / (dp if stage >= 1 else 1), full.optimizer_states / (dp if stage >= 1 else 1))


# -- activations --------------------------------------------------------------------------------
def in_flight_microbatches(plan: Plan, stage: str) -> float:
    """Micro-batches whose activations a 'first' or 'last' stage holds at its peak.

    GPipe (Huang et al. 2019): all m forwards run before any backward. 1F1B (PipeDream-Flush,
    Narayanan et al. 2021): stage i holds at most p - i, so the first holds min(p, m), the last
    1. Interleaved with v chunks: the first stage holds p (1 + (p-1)/(p v)) (Korthikanti et al.
    2022, Section 4.2.3), the last p - (p-1)/v (Megatron-LM's warm-up count,
    (p - 1 - rank) 2 + (v - 1) p chunk forwards, plus the one in progress).
    """
    p, m, v = plan.pp, plan.m, plan.chunks
    if p == 1:
        return 1.0
    if plan.schedule == "gpipe":
        return float(m)
    if plan.schedule == "1f1b":
        return float(min(p, m)) if stage == "first" else 1.0
    return p + (p - 1) / v if stage == "first" else p - (p - 1) / v


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


def stage_activations(model: ModelSpec, plan: Plan, stage: str) -> StageActivations:
    """Activations one GPU of the 'first' or 'last' stage keeps for the backward pass.

    Per layer: Korthikanti et al. 2022, Table 2 (``activation_bytes_per_layer``). Outside the
    layers (Section 4.3; Megatron-LM theoretical_memory_usage.py): the first stage keeps the
    token ids 8 s b and the embedding-dropout mask s b h (/t with SP) per micro-batch in flight;
    the last keeps the output layer's input and the fp32 logits for the loss,
    4 s b (h + V/t) (h/t with SP). Full recompute adds the working set of the one layer being
    recomputed (its Table 2 activations without recompute).
    """
    s, b, h, V, t = model.seq_len, plan.micro_batch, model.hidden, model.vocab, plan.tp
    t_sp = t if plan.sequence_parallel else 1
    per_layer = activation_bytes_per_layer(model, b, t, plan.sequence_parallel, plan.recompute)
    n = in_flight_microbatches(plan, stage)
    layers = n * stage_layers(model, plan.pp) * per_layer
    ends = 0.0
    if stage == "first" or plan.pp == 1:
        ends += n * (8 * s * b + s * b * h / t_sp)
    if stage == "last" or plan.pp == 1:
        ends += 4 * s * b * (h / t_sp + V / t)
    working = 0.0
    if plan.recompute == "full":
        working = activation_bytes_per_layer(model, b, t, plan.sequence_parallel, "none")
    return StageActivations(per_layer, n, layers, ends, working)


# -- one GPU --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageMemory:
    """Bytes on one GPU of a pipeline stage, by term, and what was offloaded to the CPU."""

    stage: str
    params: float  # parameters this GPU's shard covers (before ZeRO)
    weights: float
    grads: float
    optimizer: float
    activations: StageActivations
    buffers: float
    cpu: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations.total + self.buffers


def stage_memory(model: ModelSpec, plan: Plan, stage: str, assumptions: Assumptions) -> StageMemory:
    """Memory of one GPU of the 'first' or 'last' stage: its TP/PP shard of the model states,
    divided by ZeRO over the DP group (not over all GPUs), its activations, and the allowance
    for runtime buffers and allocator fragmentation (``Assumptions``)."""
    params = stage_params(model, plan.tp, plan.pp, stage)
    states = zero_model_states(params, plan.dp, plan.zero, plan.precision, plan.optimizer)
    weights, grads = states.weights, states.grads
    optimizer = states.master + states.optimizer_states
    cpu = 0.0
    if plan.zero == 3:  # the layer in use and the prefetched next one are gathered in full
        weights += 2 * layer_params_per_gpu(model, plan.tp) * get_precision(plan.precision).weight
    if plan.offload != "none":
        cpu, optimizer = optimizer, 0.0
    if plan.offload == "optimizer+params":
        cpu += states.weights
        weights -= states.weights
    acts = stage_activations(model, plan, stage)
    rest = weights + grads + optimizer + acts.total
    buffers = assumptions.runtime_bytes + assumptions.fragmentation * rest
    return StageMemory(stage, params, weights, grads, optimizer, acts, buffers, cpu)
