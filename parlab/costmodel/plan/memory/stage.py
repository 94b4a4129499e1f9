"""Memory of one GPU of the first or last pipeline stage under a plan: its TP/PP shard of the
model states divided by ZeRO over the DP group (Rajbhandari et al. 2020), offloaded to the CPU
(ZeRO-Offload, Ren et al. 2021), its activations (Korthikanti et al. 2022), the optimizer step's
transient fp32 gradients, and the allowance for runtime buffers and fragmentation."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from parlab.costmodel.plan.memory.activations import StageActivations, stage_activations
from parlab.costmodel.plan.memory.zero import zero3_gathered_params, zero_model_states
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.memory import ModelStateMemory, get_precision
from parlab.costmodel.pricing.params import stage_params
from parlab.costmodel.specs.assumptions import Assumptions
from parlab.costmodel.specs.models import ModelSpec


def fp32_gradient_copy(shard: float, plan: Plan) -> float:
    """Bytes of the fp32 gradients the optimizer step makes from 16-bit ones, on the GPU, for the
    ``shard`` parameters it updates: 4 B each, held only while the step runs (after the backward
    pass, when the activations are freed).

    Which framework's accounting each precision follows:

    * 16-bit gradients (``Plan.fp32_grads=False``, the default with fp16, an option with bf16):
      the ZeRO paper's 2 + 2 + 12
      bytes/param (Rajbhandari et al. 2020, Sec. 3.1) plus this transient copy. DeepSpeed's ZeRO
      optimizers convert the rank's gradient partition to fp32 before the update
      (``stage_1_and_2.py`` ``step``; ``stage3.py`` ``_prepare_fp32_grad_for_sub_group``, which
      frees the 16-bit gradients only once the copy exists) and their estimators budget it:
      18 Psi / N for ZeRO-3 (2 + 12 + 4), 16 Psi / N for the sharded part of ZeRO-2 (12 + 4)
      (``estimate_zero3_model_states_mem_needs`` / ``estimate_zero2_model_states_mem_needs``).
      Megatron-LM's fp16 optimizer does the same without ZeRO (``main_param.grad =
      model_grad.float()``), so with ZeRO-0 the copy covers every parameter the GPU holds.
    * fp32 gradients (``fp32_grads=True``, the default with bf16): Megatron-LM's ``main_grad``
      (accumulate_allreduce_grads_in_fp32, which --bf16 turns on) and DeepSpeed's bf16 optimizer
      keep fp32 gradients all the time, 2 + 4 + 12 = 18 bytes/param: no copy is made.
    * fp32 training, or an optimizer offloaded to the CPU (ZeRO-Offload: the fp32 gradients live
      on the host, ``stage_memory``): nothing on the GPU.
    """
    if plan.dtype == "fp32" or plan.fp32_grads or plan.offload != "none":
        return 0.0
    return 4.0 * shard


@dataclass(frozen=True)
class StageMemory:
    """Bytes on one GPU of a pipeline stage, by term, and what was offloaded to the CPU.

    ``grads`` are the gradients held through the step; ``step_grads`` the fp32 copy the optimizer
    step makes (``fp32_gradient_copy``). The step runs after the activations are freed, so the
    peak is the larger of the two moments: ``step_extra`` is what the copy adds above the
    backward pass's peak, max(0, step_grads - activations)."""

    stage: str
    params: float  # parameters this GPU's shard covers (before ZeRO)
    weights: float
    grads: float
    optimizer: float
    activations: StageActivations
    buffers: float
    cpu: float
    step_grads: float = 0.0

    @property
    def step_extra(self) -> float:
        return max(0.0, self.step_grads - self.activations.total)

    @property
    def total(self) -> float:
        return (self.weights + self.grads + self.optimizer + self.activations.total + self.step_extra
                + self.buffers)


def stage_memory(model: ModelSpec, plan: Plan, stage: str, assumptions: Assumptions) -> StageMemory:
    """Memory of one GPU of the 'first' or 'last' stage: its TP/PP shard of the model states,
    divided by ZeRO over the DP group (not over all GPUs), its activations, the optimizer step's
    transient fp32 gradients (``fp32_gradient_copy``), and the allowance for runtime buffers and
    allocator fragmentation (``Assumptions``).

    Offload (ZeRO-Offload, Ren et al. 2021, Sec. 4: fp32 master weights, Adam states and fp32
    gradients live on the host, where CPU-Adam updates them): the GPU keeps no optimizer states
    and, from ZeRO-2 on, no gradient shard either (each micro-batch's reduced partition is copied
    to the host's fp32 buffer and accumulated there; with ZeRO-1 the 16-bit gradients accumulate
    on the GPU un-sharded). The CPU holds 12 + 4 = 16 bytes per parameter of the shard
    (``estimate_zero2_model_states_mem_needs`` with cpu_offload: 16 Psi over the node's GPUs), and
    with the parameters offloaded too (ZeRO-Infinity) their 16-bit shard, 18 bytes.

    With context parallelism the CP ranks hold the same weights and reduce their gradients
    together: ZeRO shards the dense states over dp x cp (Megatron-Core's distributed optimizer over
    the "dp-cp" group). An MoE model's routed experts (``moe_layer.stage_param_split``: E / ep per
    GPU) are sharded over their own expert-data-parallel group, dp x cp / ep ranks.
    """
    params, weights, grads, optimizer, shard, cpu = _stage_states(
        model, plan.tp, plan.pp, stage, plan.ep, plan.dp * plan.cp, plan.edp, plan.zero, plan.precision,
        plan.optimizer, plan.zero3_impl, plan.offload)
    acts = stage_activations(model, plan, stage)
    step_grads = fp32_gradient_copy(shard, plan)
    rest = weights + grads + optimizer + acts.total + max(0.0, step_grads - acts.total)
    buffers = assumptions.runtime_bytes + assumptions.fragmentation * rest
    return StageMemory(stage, params, weights, grads, optimizer, acts, buffers, cpu, step_grads)


def states_floor(model: ModelSpec, plan: Plan, stage: str, assumptions: Assumptions) -> float:
    """A lower bound of ``stage_memory(...).total`` from the model states alone (weights, gradients,
    optimizer states and their share of the allowance; activations and the fp32 step copy are
    >= 0): a plan whose floor exceeds the GPU cannot fit, whatever its micro-batching, recompute
    or schedule, so the search drops it before pricing its activations."""
    _, weights, grads, optimizer, _, _ = _stage_states(
        model, plan.tp, plan.pp, stage, plan.ep, plan.dp * plan.cp, plan.edp, plan.zero, plan.precision,
        plan.optimizer, plan.zero3_impl, plan.offload)
    held = weights + grads + optimizer
    return assumptions.runtime_bytes + held + assumptions.fragmentation * held


@lru_cache(maxsize=4096)
def _stage_states(model: ModelSpec, tp: int, pp: int, stage: str, ep: int, dp: int, edp: int, zero: int,
                  precision: str, optimizer_name: str, zero3_impl: str,
                  offload: str) -> tuple[float, float, float, float, float, float]:
    """(params, weights, grads, optimizer states, ZeRO shard, CPU bytes) of ``stage_memory``: the
    model states, which depend on the layout and ZeRO only, not on micro-batching, recompute or the
    schedule; memoised, as a search prices thousands of plans over the same few layouts."""
    if model.moe is None:
        dense, experts = stage_params(model, tp, pp, stage), 0.0
    else:
        from parlab.costmodel.pricing.moe_layer import stage_param_split

        dense, experts = stage_param_split(model, tp, pp, stage, ep)
    params = dense + experts
    states = zero_model_states(dense, dp, zero, precision, optimizer_name)
    if experts:
        e = zero_model_states(experts, edp, zero, precision, optimizer_name)
        states = ModelStateMemory(params, states.precision, states.optimizer, states.weights + e.weights,
                                  states.grads + e.grads, states.master + e.master,
                                  states.optimizer_states + e.optimizer_states)
    weights, grads = states.weights, states.grads
    optimizer = states.master + states.optimizer_states
    sharded = zero >= 1
    shard = dense / (dp if sharded else 1) + experts / (edp if sharded else 1)
    cpu = 0.0
    if zero == 3:  # what the implementation holds gathered in full (zero3_gathered_params)
        weights += zero3_gathered_params(model, tp, zero3_impl) * get_precision(precision).weight
    if offload != "none":
        cpu, optimizer = optimizer + 4.0 * shard, 0.0  # + the fp32 gradients of the shard
        if zero >= 2:
            grads = 0.0
    if offload == "optimizer+params":
        cpu += states.weights
        weights -= states.weights
    return params, weights, grads, optimizer, shard, cpu
