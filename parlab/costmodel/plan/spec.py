"""A parallel training plan (DP x TP x PP x CP x EP, ZeRO, micro-batching, schedule, recompute,
offload, dtype) and the rules that make it valid for a model and a cluster."""

from __future__ import annotations

from dataclasses import dataclass, replace

from parlab.costmodel.plan.dtypes import (  # noqa: F401  (the dtype vocabulary, re-exported here)
    DTYPE_ALIASES,
    TRAINING_DTYPES,
    fp8_recipe_of,
    training_dtype,
)
from parlab.costmodel.pricing.activation_terms import check_recompute, recompute_modules
from parlab.costmodel.pricing.attention_terms import check_kv_tp, kv_heads_per_rank
from parlab.costmodel.pricing.context_parallel import check_ring, check_ulysses
from parlab.costmodel.pricing.memory import OPTIMIZERS, PLAN_RECOMPUTE
from parlab.costmodel.pricing.pipeline_split import check_split_knobs, pipeline_layout
from parlab.costmodel.specs._check import boolean, canonical, instance, non_negative, positive
from parlab.costmodel.specs.cluster import Cluster
from parlab.costmodel.specs.fp8 import get_fp8_recipe
from parlab.costmodel.specs.models import ModelSpec

SCHEDULES = ("gpipe", "1f1b", "interleaved")
OFFLOADS = ("none", "optimizer", "optimizer+params")
DTYPES = ("fp32", "fp16", "bf16")
ZERO_STAGES = (0, 1, 2, 3)
#: How a ZeRO-3 plan gathers its weights (``Plan.zero3_impl``): DeepSpeed's stage 3 module by
#: module with a prefetch bucket (``plan_memory.DEEPSPEED_STAGE3``), or PyTorch FSDP unit by unit
#: (one transformer block per unit, one unit prefetched ahead).
ZERO3_IMPLS = ("deepspeed", "fsdp")
TRAINING_OPTIMIZERS = tuple(o for o in OPTIMIZERS if o != "none")
#: How a plan with cp > 1 splits attention over the CP ranks (``Plan.cp_impl``): ring attention
#: (K/V blocks passed around the ring, Liu et al. 2023; Megatron-Core's cp_comm_type "p2p", with
#: the load-balanced causal split), DeepSpeed-Ulysses (all-to-all from sequence- to
#: head-sharded and back, Jacobs et al. 2023; Megatron-Core's "a2a") or all-gather attention (K, V
#: of the whole sequence all-gathered before attention, the same split: Llama 3's production CP,
#: Dubey et al. 2024, Sec. 3.3.2; Megatron-Core's "all_gather").
CP_IMPLS = ("ring", "ulysses", "all-gather")

@dataclass(frozen=True)
class Plan:
    """How one training step is spread over ``dp * tp * pp`` GPUs.

    ``micro_batch`` sequences go through the model at a time; each data-parallel replica runs
    ``micro_batches`` of them per step (m, gradient accumulation / pipeline micro-batches), so
    the global batch is dp x micro_batch x m. Give either ``global_batch`` or ``micro_batches``
    (neither: m = 1). ``chunks`` is v, the model chunks per GPU of the interleaved schedule.
    ``dtype`` is the compute type: 'fp16' and 'bf16' mean mixed precision (16-bit weights, fp32
    master weights and Adam states); ``fp32_grads`` keeps the gradients in fp32 (Megatron-LM's
    main_grad, DeepSpeed's bf16 optimizer). Left as None it is what the frameworks do with the
    dtype (``TRAINING_DTYPES``): True for bf16, False for fp16; False keeps 16-bit gradients.
    ``zero3_impl`` says whose ZeRO-3 a ZeRO-3 plan prices (``ZERO3_IMPLS``): DeepSpeed's stage 3
    (module-by-module gathers, ``stage3_prefetch_bucket_size`` / ``stage3_max_live_parameters``)
    or PyTorch FSDP (one block per unit, one unit prefetched).

    ``cp`` splits each sequence over cp ranks (context parallelism, ``cp_impl`` ring, Ulysses or
    all-gather):
    the GPUs are dp x tp x pp x cp, the batch still dp x micro_batch x m. ``ep`` splits an MoE
    model's routed experts over ep of the dp x cp ranks (expert parallelism inside the data-
    parallel domain, Megatron-Core's expert grid: ``parlab.layout``); ep must divide dp x cp.
    ``fp8_recipe`` names the FP8 recipe of a ``dtype="fp8"`` plan (``specs.fp8.FP8_RECIPES``;
    None: TransformerEngine's default, delayed scaling) and must be None for any other dtype.

    ``layout``: the layers on each stage (``pipeline_split.pipeline_layout``: Megatron-Core's
    ``first_stage_layers`` / ``last_stage_layers``, ``embedding_as_layer`` / ``loss_as_layer``;
    unset, even, or balanced where pp x chunks does not divide the layers). ``recompute``: 'none',
    'selective', 'full' or 'modules' with ``recompute_modules`` (Megatron-Core's names, e.g.
    ``("mlp", "core_attn")``: ``activation_terms.RECOMPUTE_MODULES``).

    Names are normalised where they enter: ``schedule="GPipe"`` is ``"gpipe"``, ``dtype="mixed"``
    is ``"bf16"`` with 16-bit gradients (any spelling of ``TRAINING_DTYPES``), so every spelling
    of the same training gives the same numbers.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0
    micro_batch: int = 1
    global_batch: int | None = None
    micro_batches: int | None = None
    schedule: str = "1f1b"
    chunks: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    offload: str = "none"
    dtype: str = "bf16"
    fp32_grads: bool | None = None
    optimizer: str = "adam"
    zero3_impl: str = "deepspeed"
    cp: int = 1
    ep: int = 1
    cp_impl: str = "ring"
    fp8_recipe: str | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    embedding_as_layer: bool = False
    loss_as_layer: bool = False
    recompute_modules: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "micro_batch", "chunks"):
            positive(name, getattr(self, name), integer=True)
        if not (type(self.cp) is int and type(self.ep) is int and self.cp == self.ep == 1):  # (search: fast)
            positive("cp", self.cp, integer=True)
            positive("ep", self.ep, integer=True)
        if non_negative("ZeRO stage", self.zero, integer=True) not in ZERO_STAGES:
            raise ValueError(f"ZeRO stage must be one of 0, 1, 2, 3, got {self.zero!r}")
        for name in ("global_batch", "micro_batches", "first_stage_layers", "last_stage_layers"):
            if getattr(self, name) is not None:
                positive(name, getattr(self, name), integer=True)
        boolean("sequence_parallel", self.sequence_parallel)
        if self.embedding_as_layer is not False or self.loss_as_layer is not False:
            _set(self, "embedding_as_layer", boolean("embedding_as_layer", self.embedding_as_layer))
            _set(self, "loss_as_layer", boolean("loss_as_layer", self.loss_as_layer))
        if self.fp32_grads is not None:
            boolean("fp32_grads", self.fp32_grads)
        spelled = self.dtype
        _, compute, fp32_grads = training_dtype(spelled)
        if compute is None:
            raise ValueError(f"dtype {spelled!r} keeps no fp32 master weights, which a Plan does not model; "
                             f"allowed: {', '.join(n for n, v in TRAINING_DTYPES.items() if v[1])}")
        if (canonical("dtype", spelled, TRAINING_DTYPES, DTYPE_ALIASES) == "mixed-fp32-grad"
                and self.fp32_grads is False):
            raise ValueError(f"dtype {spelled!r} means fp32 gradients; fp32_grads=False contradicts it")
        _set(self, "dtype", compute)
        if compute == "fp8" or self.fp8_recipe is not None:
            _set(self, "fp8_recipe", fp8_recipe_of(compute, self.fp8_recipe))
        _set(self, "fp32_grads", fp32_grads if self.fp32_grads is None else bool(self.fp32_grads))
        for field, names in (("zero3_impl", ZERO3_IMPLS), ("cp_impl", CP_IMPLS), ("schedule", SCHEDULES),
                             ("recompute", PLAN_RECOMPUTE), ("offload", OFFLOADS), ("optimizer", TRAINING_OPTIMIZERS)):
            value = getattr(self, field)
            if type(value) is not str or value not in names:  # (a canonical name is kept as is: search is fast)
                _set(self, field, canonical(field, value, names))
        if self.recompute_modules != () or self.recompute == "modules":
            _set(self, "recompute_modules", recompute_modules(self.recompute_modules))
        _set(self, "sequence_parallel", bool(self.sequence_parallel))
        per_step = self.dp * self.micro_batch
        if self.global_batch is not None and self.global_batch % per_step:
            raise ValueError(f"global batch {self.global_batch} is not divisible by dp x micro_batch = "
                             f"{self.dp} x {self.micro_batch} = {per_step}")
        if (self.global_batch is not None and self.micro_batches is not None
                and self.global_batch != per_step * self.micro_batches):
            raise ValueError(f"global batch {self.global_batch} != dp x micro_batch x micro_batches = "
                             f"{self.dp} x {self.micro_batch} x {self.micro_batches}")
        self._check_rules()

    def _check_rules(self) -> None:
        check_recompute(self.recompute, self.recompute_modules)
        check_split_knobs(self.pp, self.first_stage_layers, self.last_stage_layers, self.embedding_as_layer,
                          self.loss_as_layer)
        if self.schedule == "interleaved":
            if self.pp < 2:
                raise ValueError(f"the interleaved schedule needs pipeline parallelism: pp must be >= 2, got pp={self.pp}")
            if self.chunks < 2:
                raise ValueError(f"the interleaved schedule needs chunks (v) >= 2 model chunks per GPU, got {self.chunks}")
            if self.m % self.pp:
                raise ValueError(f"the interleaved schedule needs the micro-batches per step (m={self.m}) to be a "
                                 f"multiple of pp={self.pp} (Megatron-LM, Narayanan et al. 2021, Section 2.2.2)")
        elif self.chunks != 1:
            raise ValueError(f"chunks (v) = {self.chunks} is only meaningful with the interleaved schedule, "
                             f"not {self.schedule!r}")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence parallelism splits LayerNorm/dropout activations across the TP group: "
                             "it needs tp >= 2, got tp=1 (Korthikanti et al. 2022, Section 4.2.2)")
        if self.zero >= 2 and self.pp > 1:
            raise ValueError(f"ZeRO-{self.zero} shards gradients on every micro-batch, which pipeline engines "
                             f"(DeepSpeed, Megatron-LM) do not support: use ZeRO-0/1 with pp={self.pp}, or pp=1")
        if self.offload == "optimizer" and self.zero < 1:
            raise ValueError("offloading the optimizer (ZeRO-Offload, Ren et al. 2021) partitions it with ZeRO: "
                             "it needs ZeRO stage >= 1, got ZeRO-0")
        if self.offload == "optimizer+params" and self.zero != 3:
            raise ValueError(f"offloading parameters (ZeRO-Infinity, Rajbhandari et al. 2021) needs ZeRO-3, "
                             f"got ZeRO-{self.zero}")
        if self.dtype == "fp32" and self.fp32_grads:
            raise ValueError("fp32_grads is for mixed precision (fp16/bf16); with dtype fp32 gradients already are fp32")
        if (self.dp * self.cp) % self.ep:
            raise ValueError(f"ep must divide dp x cp (the experts are split over data-parallel ranks, "
                             f"Megatron-Core's expert grid): ep={self.ep} does not divide dp={self.dp} x "
                             f"cp={self.cp} = {self.dp * self.cp}")
        if self.ep > 1 and self.tp > 1 and not self.sequence_parallel:
            raise ValueError(f"expert parallelism with tensor parallelism needs sequence_parallel=True "
                             f"(Megatron-Core, model_parallel_config.py): ep={self.ep}, tp={self.tp}")

    # -- derived ---------------------------------------------------------------------------
    @property
    def n_gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def edp(self) -> int:
        """Expert data-parallel degree: the dp x cp / ep replicas of each expert."""
        return self.dp * self.cp // self.ep

    @property
    def m(self) -> int:
        """Micro-batches per step per data-parallel replica (per pipeline)."""
        if self.micro_batches is not None:
            return self.micro_batches
        if self.global_batch is not None:
            return self.global_batch // (self.dp * self.micro_batch)
        return 1

    @property
    def batch(self) -> int:
        """Sequences per optimizer step, over all replicas: dp x micro_batch x m."""
        return self.dp * self.micro_batch * self.m

    @property
    def precision(self) -> str:
        """The name of the model-state precision in ``PRECISIONS``."""
        if self.dtype == "fp32":
            return "fp32"
        return "mixed-fp32-grad" if self.fp32_grads else "mixed"

    def layout(self, model: ModelSpec) -> tuple[int, ...]:
        """Transformer layers on each pipeline rank for ``model`` (``pipeline_layout``'s rules),
        or a ValueError naming the rule the split breaks."""
        return pipeline_layout(model.layers, self.pp, self.chunks, self.first_stage_layers, self.last_stage_layers,
                               self.embedding_as_layer, self.loss_as_layer)

    def describe_recompute(self) -> str:
        """'full', 'selective', 'none', or 'modules(core_attn,mlp)'."""
        return f"modules({','.join(self.recompute_modules)})" if self.recompute == "modules" else self.recompute

    def with_(self, **changes) -> Plan:
        """A copy with some fields changed (validated again). A new ``dtype`` without a new
        ``fp32_grads`` takes that dtype's default gradient precision."""
        if "dtype" in changes and "fp32_grads" not in changes:
            changes["fp32_grads"] = None
        if "dtype" in changes and "fp8_recipe" not in changes:
            changes["fp8_recipe"] = None
        return replace(self, **changes)

    def describe(self) -> str:
        """One line, e.g. 'dp=8 tp=8 pp=4 ZeRO-1 mb=1 m=64 interleaved(v=2) recompute=full SP bf16': the
        gradient precision only where it is not the dtype's default ('bf16+16-bit grads', 'fp16+fp32
        grads'), whose ZeRO-3 a ZeRO-3 plan prices ('ZeRO-3(DeepSpeed)', 'ZeRO-3(FSDP)')."""
        sched = f"interleaved(v={self.chunks})" if self.schedule == "interleaved" else self.schedule
        impl = {"deepspeed": "(DeepSpeed)", "fsdp": "(FSDP)"}[self.zero3_impl] if self.zero == 3 else ""
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}"]
        label = {"ring": "", "ulysses": "(Ulysses)", "all-gather": "(all-gather)"}[self.cp_impl]
        parts += [f"cp={self.cp}{label}"] if self.cp > 1 else []
        parts += [f"ep={self.ep}"] if self.ep > 1 else []
        parts += [f"ZeRO-{self.zero}{impl}", f"mb={self.micro_batch}", f"m={self.m}"]
        parts += [sched] if self.pp > 1 else []
        parts += [f"first={self.first_stage_layers}"] if self.first_stage_layers is not None else []
        parts += [f"last={self.last_stage_layers}"] if self.last_stage_layers is not None else []
        parts += ["embedding-as-layer"] if self.embedding_as_layer else []
        parts += ["loss-as-layer"] if self.loss_as_layer else []
        parts += [f"recompute={self.describe_recompute()}"] if self.recompute != "none" else []
        parts += ["SP"] if self.sequence_parallel else []
        parts += [f"offload={self.offload}"] if self.offload != "none" else []
        default = training_dtype(self.dtype)[2]  # bf16: fp32 gradients; fp16: 16-bit ones
        grads = "" if self.dtype == "fp32" or self.fp32_grads == default else (
            "+fp32 grads" if self.fp32_grads else "+16-bit grads")
        parts += [self.dtype + (f"({self.fp8_recipe})" if self.fp8_recipe else "") + grads]
        return " ".join(parts)


def _set(plan: Plan, field: str, value) -> None:
    object.__setattr__(plan, field, value)  # frozen: normalise once, in __post_init__


def check_plan(model: ModelSpec, cluster: Cluster, plan: Plan) -> None:
    """Raise ValueError naming the rule if ``plan`` cannot run ``model`` on ``cluster``."""
    instance("model", model, ModelSpec, "a preset: get_model('gpt3-175b')")
    instance("cluster", cluster, Cluster, "make_cluster('dgx-a100', n_gpus)")
    instance("plan", plan, Plan)
    if plan.n_gpus != cluster.n_gpus:
        cp = f" x {plan.cp}" if plan.cp > 1 else ""
        raise ValueError(f"dp x tp x pp{' x cp' if cp else ''} must equal the number of GPUs: {plan.dp} x "
                         f"{plan.tp} x {plan.pp}{cp} = {plan.n_gpus} != {cluster.n_gpus}")
    t = plan.tp
    for what, size in (("attention heads", model.heads), ("hidden size", model.hidden),
                       ("MLP width", model.ffn)):
        if size % t:
            raise ValueError(f"tp must divide the {what}: {what} {size} is not divisible by tp={t} "
                             f"(Megatron-LM splits them evenly over the TP group)")
    check_kv_tp(model, t)  # K/V heads: g % tp == 0, or tp % g == 0 (replicated, Megatron-Core)
    if plan.pp > model.layers:
        raise ValueError(f"pp={plan.pp} > {model.layers} layers: every pipeline stage needs at least one layer")
    plan.layout(model)  # the split of the layers over the stages (ValueError naming the rule)
    recompute_modules(plan.recompute_modules, model)  # modules the model has
    if plan.dtype == "bf16" and not cluster.gpu.bf16:
        raise ValueError(f"{cluster.gpu.name} has no bf16 tensor cores; use dtype fp16 or fp32")
    if plan.dtype == "fp8":
        cluster.gpu.check_fp8(get_fp8_recipe(plan.fp8_recipe).mx)
    check_cp_ep(model, plan)


def check_cp_ep(model: ModelSpec, plan: Plan) -> None:
    """The model rules of context and expert parallelism, each a ValueError naming the value and
    the rule: the load-balanced ring (and all-gather attention) cuts the sequence into 2 cp chunks (rank i holds chunks i and
    2cp-1-i: Megatron-Core's CP, Llama 3, Dubey et al. 2024, Sec. 3.3.2); Ulysses gives each CP
    rank whole heads of its TP shard (Jacobs et al. 2023, Sec. 3.1: heads % cp, and the K/V heads
    of the shard too, one when kv_heads < tp, as the all-to-all of K and V splits their heads;
    replicating K/V heads up to cp, which some implementations do, is not modelled); ep needs experts
    and divides their number (each EP rank holds E / ep whole experts); ZeRO-3 of an MoE model is
    not modelled (Megatron-Core shards MoE optimizers ZeRO-1 style)."""
    cp, t = plan.cp, plan.tp
    if cp > 1 and plan.cp_impl in ("ring", "all-gather"):
        check_ring(model.seq_len, cp, who=f"{plan.cp_impl} attention")
    if cp > 1 and plan.cp_impl == "ulysses":
        kv = kv_heads_per_rank(model, t)  # g / t, or one K/V head when g < t
        try:
            check_ulysses(model.heads // t, cp, kv)
        except ValueError as err:
            raise ValueError(f"{err} (the heads of one of tp={t} TP ranks: {model.heads} / {t} query heads, "
                             f"{kv} K/V {'head' if kv == 1 else 'heads'})") from None
    if plan.ep > 1 and model.moe is None:
        raise ValueError(f"ep={plan.ep} splits experts, and {model.name} is a dense model (no MoE layers)")
    if model.moe is not None:
        if model.moe.num_experts % plan.ep:
            raise ValueError(f"ep must divide the routed experts (each EP rank holds E / ep whole experts): "
                             f"{model.moe.num_experts} experts are not divisible by ep={plan.ep}")
        if plan.zero == 3:
            raise ValueError("ZeRO-3 of an MoE model is not modelled: use ZeRO-0/1/2 (Megatron-Core's distributed "
                             "optimizer shards MoE optimizer states ZeRO-1 style)")
