"""Memory of one GPU of the first or last pipeline stage under a plan: its TP/PP shard of the
model states divided by ZeRO over the DP group (Rajbhandari et al. 2020), offloaded to the CPU
(ZeRO-Offload, Ren et al. 2021), its activations (Korthikanti et al. 2022), the optimizer step's
transient fp32 gradients, and the allowance for runtime buffers and fragmentation."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.memo import plan_memo
from parlab.costmodel.plan.memory.activations import StageActivations, stage_activations
from parlab.costmodel.plan.memory.zero import zero3_gathered_params, zero_model_states
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.pricing.fp8 import fp8_weight_bytes, stage_linear_params
from parlab.costmodel.pricing.memory import ModelStateMemory, get_precision
from parlab.costmodel.pricing.moe_layer import stage_param_split
from parlab.costmodel.pricing.params import stage_layers, stage_params
from parlab.costmodel.pricing.pipeline_split import fullest_stage
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.fp8 import get_fp8_recipe
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

    stage: str | int  # 'first', 'last', or the rank of a middle stage (uneven splits)
    params: float  # parameters this GPU's shard covers (before ZeRO)
    weights: float
    grads: float
    optimizer: float
    activations: StageActivations
    buffers: float
    cpu: float
    step_grads: float = 0.0
    fp8_weights: float = 0.0  # of ``weights``: an FP8 plan's FP8 weight copies and scales

    @property
    def step_extra(self) -> float:
        return max(0.0, self.step_grads - self.activations.total)

    @property
    def total(self) -> float:
        return (self.weights + self.grads + self.optimizer + self.activations.total + self.step_extra
                + self.buffers)


def stage_memory(model: ModelSpec, plan: Plan, stage: str | int, assumptions: Assumptions) -> StageMemory:
    """Memory of one GPU of the 'first', 'last' (or i-th: ``Plan.layout``) stage: its TP/PP shard of the model states,
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
    params, weights, grads, optimizer, shard, cpu, fp8 = _stage_states(model, plan, stage)
    acts = stage_activations(model, plan, stage)
    step_grads = fp32_gradient_copy(shard, plan)
    rest = weights + grads + optimizer + acts.total + max(0.0, step_grads - acts.total)
    buffers = assumptions.runtime_bytes + assumptions.fragmentation * rest
    return StageMemory(stage, params, weights, grads, optimizer, acts, buffers, cpu, step_grads, fp8)


def fp8_stage_weights(model: ModelSpec, plan: Plan, stage: str, params: float) -> float:
    """Bytes of an FP8 plan's FP8 weight copies and scales on one GPU (``pricing.fp8``): of the
    stage's linear weights, or with ZeRO-3 of the weights gathered at the peak only (the shard is
    cast when it is gathered; FSDP2 casts before gathering: torchao float8 README)."""
    recipe = get_fp8_recipe(plan.fp8_recipe)
    layout = plan.layout(model)
    layers = stage_layers(model, plan.pp, layout, stage)
    if plan.zero == 3:
        return fp8_weight_bytes(zero3_gathered_params(model, plan.tp, plan.zero3_impl), layers, recipe)
    return fp8_weight_bytes(stage_linear_params(model, params, plan.tp, plan.pp, stage, layout), layers, recipe)


def most_loaded_stage(model: ModelSpec, plan: Plan, assumptions: Assumptions = DEFAULT) -> StageMemory:
    """The memory of the GPU that needs the most: the first pipeline stage (embeddings, most
    micro-batches in flight) or the last (output layer, logits), whichever is larger; with an
    uneven split (``Plan.layout``) also the first middle rank that holds the most layers (of
    those, the one with the most micro-batches in flight: ``pipeline_split.fullest_stage``)."""
    first = stage_memory(model, plan, "first", assumptions)
    if plan.pp == 1:
        return first
    last = stage_memory(model, plan, "last", assumptions)
    best = last if last.total > first.total else first
    fullest = fullest_stage(plan.layout(model))
    if fullest is not None:
        middle = stage_memory(model, plan, fullest, assumptions)
        best = middle if middle.total > best.total else best
    return best


def states_floor(model: ModelSpec, plan: Plan, stage: str | int, assumptions: Assumptions) -> float:
    """A lower bound of ``stage_memory(...).total`` from the model states alone (weights, FP8
    copies, gradients, optimizer states and their share of the allowance; activations and the
    fp32 step copy are >= 0): a plan whose floor exceeds the GPU cannot fit, whatever its
    micro-batching, recompute or schedule, so the search drops it before pricing its activations."""
    _, weights, grads, optimizer, _, _, _ = _stage_states(model, plan, stage)
    held = weights + grads + optimizer
    return assumptions.runtime_bytes + held + assumptions.fragmentation * held


#: The Plan fields a stage's model states cannot depend on: how a step is cut into micro-batches
#: (micro_batch, micro_batches, global_batch) and ordered (schedule; the layout's v is ``chunks``,
#: which stays in the key), what is recomputed (recompute, recompute_modules), and what only
#: activations and communication see (sequence_parallel, cp_impl). ``plan_memo`` refuses any read
#: of them inside ``_stage_states``.
_NOT_MODEL_STATES = ("micro_batch", "micro_batches", "global_batch", "schedule", "recompute", "recompute_modules",
                     "sequence_parallel", "cp_impl")


@plan_memo(maxsize=4096, ignore=_NOT_MODEL_STATES)
def _stage_states(model: ModelSpec, plan: Plan, stage: str | int
                  ) -> tuple[float, float, float, float, float, float, float]:
    """(params, weights, grads, optimizer states, ZeRO shard, CPU bytes, FP8 weight copies) of
    ``stage_memory``: the model states, which depend on the model, the layout (tp, pp, chunks, the
    split's knobs), ep, dp x cp, ZeRO, precision, optimizer, offload and the FP8 recipe, never on
    micro-batching, recompute or the schedule (``_NOT_MODEL_STATES``); memoised on the whole model
    and every other plan field, as a search prices thousands of plans over the same few layouts."""
    layout = plan.layout(model)
    if model.moe is None:
        dense, experts = stage_params(model, plan.tp, plan.pp, stage, layout), 0.0
    else:
        dense, experts = stage_param_split(model, plan.tp, plan.pp, stage, plan.ep, layout)
    params = dense + experts
    states = zero_model_states(dense, plan.dp * plan.cp, plan.zero, plan.precision, plan.optimizer)
    if experts:
        e = zero_model_states(experts, plan.edp, plan.zero, plan.precision, plan.optimizer)
        states = ModelStateMemory(params, states.precision, states.optimizer, states.weights + e.weights,
                                  states.grads + e.grads, states.master + e.master,
                                  states.optimizer_states + e.optimizer_states)
    weights, grads = states.weights, states.grads
    optimizer = states.master + states.optimizer_states
    sharded = plan.zero >= 1
    shard = dense / (plan.dp * plan.cp if sharded else 1) + experts / (plan.edp if sharded else 1)
    cpu = 0.0
    if plan.zero == 3:  # what the implementation holds gathered in full (zero3_gathered_params)
        weights += zero3_gathered_params(model, plan.tp, plan.zero3_impl) * get_precision(plan.precision).weight
    fp8 = fp8_stage_weights(model, plan, stage, params) if plan.dtype == "fp8" else 0.0
    weights += fp8
    if plan.offload != "none":
        cpu, optimizer = optimizer + 4.0 * shard, 0.0  # + the fp32 gradients of the shard
        if plan.zero >= 2:
            grads = 0.0
    if plan.offload == "optimizer+params":
        cpu += states.weights
        weights -= states.weights
    return params, weights, grads, optimizer, shard, cpu, fp8
