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


@dataclass(frozen=True)
class DeepSpeedStage3:
    """The ``zero_optimization`` values of DeepSpeed's stage 3 that decide how many parameters are
    gathered at once (DeepSpeed's defaults, and what chapter 11's generated config writes):
    ``stage3_prefetch_bucket_size`` 5e7 parameters fetched ahead of the module in use,
    ``stage3_max_live_parameters`` 1e9 parameters gathered at most before prefetching stops,
    ``stage3_max_reuse_distance`` 1e9 (a parameter used again within that many parameters of
    compute, as a recomputed layer's are by its backward, is kept, not released and gathered again)
    and ``stage3_param_persistence_threshold`` 1e5 (smaller tensors stay gathered all the time)."""

    prefetch_bucket_size: float = 5e7
    max_live_parameters: float = 1e9
    max_reuse_distance: float = 1e9
    param_persistence_threshold: float = 1e5

    @classmethod
    def for_model(cls, model: ModelSpec) -> DeepSpeedStage3:
        """The values chapter 11's generated config writes for ``model`` (``parlab.deepspeed_config``),
        Hugging Face's rule for DeepSpeed's ``"auto"`` (transformers integrations/deepspeed.py):
        prefetch bucket 0.9 h^2, persistence threshold 10 h, DeepSpeed's defaults for the other two."""
        h = model.hidden
        return cls(prefetch_bucket_size=float(int(0.9 * h * h)), param_persistence_threshold=float(10 * h))

    def config(self) -> dict[str, int]:
        """The four keys as a DeepSpeed config writes them."""
        return {f"stage3_{k}": int(getattr(self, k)) for k in
                ("prefetch_bucket_size", "max_live_parameters", "max_reuse_distance", "param_persistence_threshold")}


DEEPSPEED_STAGE3 = DeepSpeedStage3()


def zero3_units(model: ModelSpec, tp: int = 1, impl: str = "fsdp") -> list[float]:
    """Parameters of each unit ZeRO-3 gathers with one collective, on one of ``tp`` TP ranks, in
    forward order, for ``impl`` 'fsdp' or 'deepspeed' (``plan.ZERO3_IMPLS``).

    FSDP (``impl='fsdp'``) wraps each transformer block as a unit and leaves the embeddings to the
    root unit: the input embedding (V h / t, the position table, BLOOM's embedding norm), the l
    blocks (``layer_params_per_gpu``), and the output end (the final norm and the output layer
    V h / t, which with tied embeddings is the embedding matrix gathered again for the logits).
    DeepSpeed's stage 3 (``impl='deepspeed'``) fetches module by module in the order it traced
    (partitioned_param_coordinator.py): the embedding, then per block its four linear modules
    (fused QKV, attention output, MLP in, MLP out, biases with their weights), the output end; the
    norms and row-parallel biases sit below ``stage3_param_persistence_threshold`` and stay gathered.
    """
    if impl not in ("fsdp", "deepspeed"):
        raise ValueError(f"zero3 implementation must be 'fsdp' or 'deepspeed', got {impl!r}")
    h, V, f = model.hidden, model.vocab, model.ffn
    norm = 2 * h if model.bias else h
    embedding = V * h / tp + (model.seq_len * h if model.learned_pos else 0) + (norm if model.embedding_norm else 0)
    output = norm + V * h / tp
    if impl == "fsdp":
        return [embedding, *[layer_params_per_gpu(model, tp)] * model.layers, output]
    n_in = 2 if model.gated_mlp else 1
    b = 1 if model.bias else 0
    block = [(3 * h * h + b * 3 * h) / tp, h * h / tp, n_in * (h * f + b * f) / tp, f * h / tp]
    return [embedding, *block * model.layers, output]


def _deepspeed_live(units: list[float], ds: DeepSpeedStage3) -> float:
    """The most parameters DeepSpeed's stage 3 holds gathered at once: the module in use and the
    modules its prefetch starts. After fetching the module in use it prefetches the next ones in
    trace order while fewer than min(stage3_prefetch_bucket_size, stage3_max_live_parameters -
    live) are in flight; it fetches whole parameters, so the last one can overshoot the bucket
    (``PartitionedParameterCoordinator.fetch_sub_module``)."""
    peak = 0.0
    for i, unit in enumerate(units):
        budget = min(ds.prefetch_bucket_size, ds.max_live_parameters - unit)
        ahead, j = 0.0, i + 1
        while j < len(units) and ahead < budget:
            ahead += units[j]
            j += 1
        peak = max(peak, unit + ahead)
    return peak


def zero3_gathered_params(model: ModelSpec, tp: int = 1, impl: str = "fsdp",
                          deepspeed: DeepSpeedStage3 | None = None) -> float:
    """Parameters ZeRO-3 holds gathered in full at its peak, on top of its 1/dp shard.

    FSDP (``impl='fsdp'``): the unit in use and the next one, prefetched while the first computes:
    ``forward_prefetch`` / ``BackwardPrefetch.BACKWARD_PRE`` prefetch exactly one unit ahead
    (torch.distributed.fsdp; Zhao et al. 2023, "PyTorch FSDP", Section 3.3). So the largest sum of
    two units next to each other in execution order (``zero3_units``): for a deep model two blocks,
    for a model of one or two layers the embedding and a block.

    DeepSpeed (``impl='deepspeed'``): the module in use plus what ``stage3_prefetch_bucket_size``
    lets it fetch ahead, bounded by ``stage3_max_live_parameters`` (``_deepspeed_live``), with
    ``deepspeed``'s values (default: ``DeepSpeedStage3.for_model``, what chapter 11's config writes): for
    GPT-3 175B the MLP's two linear modules, 1.2B parameters, about a third of FSDP's two blocks.
    DeepSpeed's own estimator (``estimate_zero3_model_states_mem_needs``) budgets the largest
    layer's parameters and gradients, 4 B x largest_layer_params, on top of 18 Psi / N.

    Never more than the model's own weights (the units are disjoint parts of it).
    """
    units = zero3_units(model, tp, impl)
    if impl == "fsdp":
        peak = max(a + b for a, b in zip(units, units[1:], strict=False))
    else:
        peak = _deepspeed_live(units, deepspeed or DeepSpeedStage3.for_model(model))
    return min(peak, stage_params(model, tp, 1, "first"))


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
    (p - 1 - rank) 2 + (v - 1) p chunk forwards, plus the one in progress), both capped at m:
    Megatron caps the warm-up at all m v chunk forwards (``get_pp_rank_microbatches``), so with
    m = p the first stage holds m. With p = 1 there is no pipeline: the m micro-batches are
    gradient accumulation (Megatron's ``forward_backward_no_pipelining``), one held at a time.
    """
    p, m, v = plan.pp, plan.m, plan.chunks
    if p == 1:
        return 1.0
    if plan.schedule == "gpipe":
        return float(m)
    if plan.schedule == "1f1b":
        return float(min(p, m)) if stage == "first" else 1.0
    return min(p + (p - 1) / v, m) if stage == "first" else min(p - (p - 1) / v, m)


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
    token ids 8 s b and, with dropout, the embedding-dropout mask s b h (/t with SP) per micro-batch in flight;
    the last keeps the output layer's input and the fp32 logits for the loss,
    4 s b (h + V/t) (h/t with SP). Full recompute adds the working set of the one layer being
    recomputed (its Table 2 activations without recompute).
    """
    s, b, h, V, t = model.seq_len / plan.cp, plan.micro_batch, model.hidden, model.vocab, plan.tp
    t_sp = t if plan.sequence_parallel else 1
    n = in_flight_microbatches(plan, stage)
    kinds = _layer_kinds(model, plan, stage)  # (layers, moe_layer) pairs: dense first layers of an MoE model
    by_kind = [(k, activation_bytes_per_layer(model, b, t, plan.sequence_parallel, plan.recompute, cp=plan.cp,
                                              moe_layer=moe)) for k, moe in kinds]
    if len(by_kind) == 1:
        per_layer = by_kind[0][1]
        layers = n * stage_layers(model, plan.pp) * per_layer
    else:  # the mean over the stage's dense and MoE layers
        layers = n * sum(k * a for k, a in by_kind)
        per_layer = layers / n / stage_layers(model, plan.pp)
    ends = 0.0
    if stage == "first" or plan.pp == 1:
        ends += n * (8 * s * b + (s * b * h / t_sp if model.dropout else 0))
    if stage == "last" or plan.pp == 1:
        ends += 4 * s * b * (h / t_sp + V / t)
    working = 0.0
    if plan.recompute == "full":
        working = max(activation_bytes_per_layer(model, b, t, plan.sequence_parallel, "none", cp=plan.cp,
                                                 moe_layer=moe) for k, moe in kinds if k)
    return StageActivations(per_layer, n, layers, ends, working)


def _layer_kinds(model: ModelSpec, plan: Plan, stage: str) -> list[tuple[int, bool | None]]:
    """How many of the stage's layers are dense and how many MoE (``moe_layer.stage_layer_kinds``);
    one kind, None, for a dense model."""
    if model.moe is None:
        return [(stage_layers(model, plan.pp), None)]
    from .moe_layer import stage_layer_kinds

    dense, moe = stage_layer_kinds(model, plan.pp, stage)
    return [(dense, False), (moe, True)]


# -- one GPU --------------------------------------------------------------------------------------
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
    if model.moe is None:
        dense, experts = stage_params(model, plan.tp, plan.pp, stage), 0.0
    else:
        from .moe_layer import stage_param_split

        dense, experts = stage_param_split(model, plan.tp, plan.pp, stage, plan.ep)
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
    if plan.offload != "none":
        cpu, optimizer = optimizer + 4.0 * shard, 0.0  # + the fp32 gradients of the shard
        if plan.zero >= 2:
            grads = 0.0
    if plan.offload == "optimizer+params":
        cpu += states.weights
        weights -= states.weights
    acts = stage_activations(model, plan, stage)
    step_grads = fp32_gradient_copy(shard, plan)
    rest = weights + grads + optimizer + acts.total + max(0.0, step_grads - acts.total)
    buffers = assumptions.runtime_bytes + assumptions.fragmentation * rest
    return StageMemory(stage, params, weights, grads, optimizer, acts, buffers, cpu, step_grads)


# -- when ZeRO-3 holds more than ZeRO-2 ----------------------------------------------------------
@dataclass(frozen=True)
class Zero3VsZero2:
    """Weight bytes per GPU under ZeRO-2 (every weight, 16-bit) and ZeRO-3 (a 1/dp shard plus the
    gathered units); gradients and optimizer states are sharded alike by both, so the weights
    decide which peak is higher."""

    model: ModelSpec
    dp: int
    tp: int
    params: float  # parameters on one TP rank
    gathered: float  # parameters ZeRO-3 holds gathered (zero3_gathered_params)
    weight_bytes: int  # bytes per 16-bit (or fp32) weight

    @property
    def zero2_weights(self) -> float:
        return self.params * self.weight_bytes

    @property
    def zero3_weights(self) -> float:
        return (self.params / self.dp + self.gathered) * self.weight_bytes

    @property
    def excess(self) -> float:
        """ZeRO-3's weight bytes minus ZeRO-2's (> 0: ZeRO-3's peak is the higher one)."""
        return self.zero3_weights - self.zero2_weights

    @property
    def break_even_dp(self) -> int | None:
        """The smallest dp at which ZeRO-3 holds no more than ZeRO-2: P/dp + G <= P, so
        dp >= P / (P - G); None when the gathered units are the whole model (never)."""
        if self.gathered >= self.params:
            return None
        return max(2, math.ceil(self.params / (self.params - self.gathered) - 1e-12))

    def note(self, width: int | None = None) -> str:
        """Two sentences a chapter can print: which is higher, by how much, and why (wrapped at
        ``width`` characters if given)."""
        if width is not None:
            import textwrap

            return textwrap.fill(self.note(), width, break_on_hyphens=False)
        from parlab.tables import human_bytes, human_count

        share = self.gathered / self.params
        why = (f"ZeRO-3 keeps 1/{self.dp} of the {human_count(self.params)} weights but gathers the unit in "
               f"use and the prefetched next one in full ({human_count(self.gathered)} parameters, "
               f"{share:.0%} of the model)")
        if self.excess <= 0:
            return (f"{self.model.name} at dp={self.dp}: ZeRO-3 holds {human_bytes(-self.excess, 'auto')} less "
                    f"weight memory than ZeRO-2. {why}.")
        fix = (f"it pays from dp={self.break_even_dp}" if self.break_even_dp else
               "with this few layers it never pays")
        return (f"{self.model.name} at dp={self.dp}: ZeRO-3's peak is {human_bytes(self.excess, 'auto')} above "
                f"ZeRO-2's. {why}, more than the {1 - 1 / self.dp:.0%} that sharding saves; {fix}.")


def zero3_vs_zero2(model: ModelSpec, dp: int, tp: int = 1, dtype: str = "bf16", impl: str = "fsdp") -> Zero3VsZero2:
    """ZeRO-3 against ZeRO-2 for ``model`` over ``dp`` ranks (``Zero3VsZero2``): for a deep model
    ZeRO-3 holds far less; for a model of a few layers over few ranks it can hold more."""
    from .plan import training_dtype

    positive("dp", dp, integer=True)
    positive("tp", tp, integer=True)
    precision = get_precision(training_dtype(dtype)[0])
    return Zero3VsZero2(model, dp, tp, stage_params(model, tp, 1, "first"), zero3_gathered_params(model, tp, impl),
                        precision.weight)
