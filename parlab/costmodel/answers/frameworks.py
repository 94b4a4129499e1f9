"""The landscape of training frameworks as data: which parallelism each provides (the ones the guide
names in 1.20, 1.22, 3.1 and 3.2, and today's), which parlab module teaches each kind of
parallelism, the two technology stacks of guide 3.2 layer by layer, and how the search space of
``search`` compares with Alpa's (Zheng et al., "Alpa: Automating Inter- and Intra-Operator
Parallelism for Distributed Deep Learning", OSDI 2022).

Facts are from each project's own documentation (as of 2024-2025); a framework "provides" a kind
when it ships it for training, not when a third-party library adds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.search.ranking import divisors, factorizations
from parlab.costmodel.specs._check import positive

#: the kinds of parallelism and memory saving the table has a column for, in its order. "SP" is
#: Megatron-style sequence parallelism (Korthikanti et al. 2022: inside the TP group, the LayerNorm
#: and dropout activations split along the sequence, TP's all-reduce becoming an all-gather + a
#: reduce-scatter); "CP" splits the *attention* over the sequence across GPUs, by ring attention
#: (Liu et al. 2023; Megatron-Core's and torchtitan's context parallelism pass K/V blocks round a
#: ring) or by DeepSpeed-Ulysses (Jacobs et al. 2023: an all-to-all turns a sequence split into a
#: head split for the attention and back), which DeepSpeed calls "sequence parallelism".
KINDS: tuple[str, ...] = ("DP", "ZeRO/FSDP", "TP", "SP", "CP", "PP", "offload", "auto")

#: kind -> the parlab modules that teach it (run for real, or model it)
TAUGHT_BY: dict[str, tuple[str, ...]] = {
    "DP": ("parlab.parallel.data_parallel",),
    "ZeRO/FSDP": ("parlab.parallel.zero", "parlab.costmodel.plan.memory"),
    "TP": ("parlab.parallel.tensor_parallel", "parlab.costmodel.pricing.tensor_parallel"),
    "SP": ("parlab.parallel.tensor_parallel",),
    "CP": ("parlab.parallel.context_parallel", "parlab.costmodel.pricing.context_parallel"),
    "PP": ("parlab.parallel.pipeline_parallel", "parlab.schedules"),
    "offload": ("parlab.parallel.zero.offload", "parlab.costmodel.pricing.memory"),
    "auto": ("parlab.costmodel.search", "parlab.costmodel.search.advisor"),
}


@dataclass(frozen=True)
class Framework:
    """One framework: its era ('guide' for those the guide names, 'today' for current ones), its
    class in guide 1.22 ('built in': a deep-learning framework's own; 'extension': built on one),
    the kinds of parallelism it provides (``KINDS``) and a note on how."""

    name: str
    era: str
    klass: str
    provides: frozenset[str]
    note: str

    def __post_init__(self) -> None:
        unknown = self.provides - set(KINDS)
        if unknown:
            raise ValueError(f"{self.name}: unknown kind {sorted(unknown)[0]!r}; kinds: {', '.join(KINDS)}")


def _fw(name: str, era: str, klass: str, provides: str, note: str) -> Framework:
    return Framework(name, era, klass, frozenset(provides.split()), note)


FRAMEWORKS: tuple[Framework, ...] = (
    _fw("TensorFlow", "guide", "built in", "DP TP",
        "tf.distribute strategies (mirrored, multi-worker) for DP; DTensor layouts shard tensors"),
    _fw("PyTorch DDP / FSDP", "guide", "built in", "DP ZeRO/FSDP TP SP CP PP offload",
        "DDP; FSDP (ZeRO-3 style, CPU offload); DTensor for TP/SP; context_parallel (ring attention); "
        "torch.distributed.pipelining"),
    _fw("MindSpore", "guide", "built in", "DP ZeRO/FSDP TP PP auto",
        "operator-level sharding, pipeline stages, optimizer sharding; semi-auto and auto parallel"),
    _fw("OneFlow", "guide", "built in", "DP ZeRO/FSDP TP PP",
        "global tensors with SBP signatures (split, broadcast, partial) place any mix of DP/TP/PP"),
    _fw("PaddlePaddle", "guide", "built in", "DP ZeRO/FSDP TP SP PP offload auto",
        "Fleet hybrid parallelism (DP, TP, PP, sharding stages) and an auto-parallel API"),
    _fw("Megatron-LM", "guide", "extension", "DP ZeRO/FSDP TP SP CP PP",
        "1D TP (column/row splits), SP, context parallelism (--context-parallel-size, ring of K/V "
        "blocks), 1F1B and interleaved PP, distributed optimizer (ZeRO-1)"),
    _fw("DeepSpeed", "guide", "extension", "DP ZeRO/FSDP TP CP PP offload",
        "ZeRO stages 1-3, ZeRO-Offload / Infinity, a pipeline engine; AutoTP shards Hugging Face "
        "models' linear layers (inference, and training since 2025), Megatron's TP and SP via "
        "Megatron-DeepSpeed; DeepSpeed-Ulysses is its 'sequence parallelism': an all-to-all over heads (CP)"),
    _fw("Colossal-AI", "guide", "extension", "DP ZeRO/FSDP TP SP CP PP offload auto",
        "1D/2D/2.5D/3D TP, ZeRO with Gemini offload, PP; ring self-attention (CP); an experimental "
        "auto-parallel search"),
    _fw("Alpa", "guide", "extension", "DP ZeRO/FSDP TP PP auto",
        "on JAX/XLA: an ILP picks each operator's sharding, a DP slices layers into stages"),
    _fw("JAX / XLA on TPU", "guide", "built in", "DP ZeRO/FSDP TP SP",
        "GSPMD: sharding annotations on a device mesh give DP, FSDP and TP; PP via libraries"),
    _fw("torchtitan", "today", "extension", "DP ZeRO/FSDP TP SP CP PP",
        "PyTorch-native 4D: FSDP2, TP/SP with DTensor, PP schedules, context parallelism"),
    _fw("Megatron-Core", "today", "extension", "DP ZeRO/FSDP TP SP CP PP",
        "Megatron-LM as a library: TP, SP, PP, context and expert parallelism, distributed optimizer"),
    _fw("nanotron", "today", "extension", "DP ZeRO/FSDP TP SP PP",
        "Hugging Face's minimal 3D trainer: DP, TP/SP, 1F1B and all-forward-all-backward PP, ZeRO-1"),
)


def framework_rows(frameworks: tuple[Framework, ...] = FRAMEWORKS) -> tuple[list[list[object]], list[str]]:
    """(rows, headers): one row per framework, a 'yes' or '' per kind, and the note."""
    rows = [[f.name, f.era, f.klass, *("yes" if k in f.provides else "" for k in KINDS), f.note]
            for f in frameworks]
    return rows, ["framework", "era", "class (1.22)", *KINDS, "how"]


def taught_rows() -> tuple[list[list[object]], list[str]]:
    """(rows, headers): per kind of parallelism, the frameworks providing it and the parlab modules
    that teach it."""
    rows = [[k, ", ".join(f.name for f in FRAMEWORKS if k in f.provides), ", ".join(TAUGHT_BY[k])] for k in KINDS]
    return rows, ["kind", "provided by", "taught in parlab by"]


def kinds_of(plan: Plan) -> frozenset[str]:
    """The kinds (``KINDS``) a plan uses: dp > 1 is DP, a ZeRO stage is ZeRO/FSDP, and so on."""
    used = {"DP": plan.dp > 1, "ZeRO/FSDP": plan.zero > 0 and plan.dp > 1, "TP": plan.tp > 1,
            "SP": plan.sequence_parallel, "PP": plan.pp > 1, "offload": plan.offload != "none"}
    return frozenset(k for k, on in used.items() if on)


def frameworks_for(plan: Plan, frameworks: tuple[Framework, ...] = FRAMEWORKS) -> list[Framework]:
    """The frameworks that provide every kind of parallelism ``plan`` uses (guide 3.1: "does it
    support the parallelism we need?")."""
    need = kinds_of(plan)
    return [f for f in frameworks if need <= f.provides]


# -- the stacks of guide 3.2 --------------------------------------------------------------------------
#: the layers of a training stack, bottom to top
LAYERS: tuple[str, ...] = ("accelerator", "compiler / kernels", "framework", "parallelism library",
                           "collective library", "launcher")

#: guide 3.2's two stacks and the one parlab runs on, layer by layer (``LAYERS`` order)
STACKS: dict[str, tuple[str, ...]] = {
    "Google": ("TPU", "XLA", "TensorFlow / JAX", "GSPMD, pjit (Alpa, Pax)", "ICI / DCN collectives in XLA",
               "Cloud TPU runtime"),
    "NVIDIA + PyTorch": ("GPU (A100, H100)", "CUDA, cuBLAS, Triton", "PyTorch", "Megatron-LM + DeepSpeed",
                         "NCCL", "torchrun / deepspeed"),
    "parlab": ("CPU processes", "PyTorch CPU kernels", "PyTorch", "parlab.parallel",
               "parlab.comm (shared memory, gloo)", "parlab.comm.launch / torchrun"),
}


# -- what Alpa searches that search does not -----------------------------------------------------------
@dataclass(frozen=True)
class SearchSpaces:
    """The size of two search spaces for one model on ``n_gpus`` GPUs.

    ``search`` enumerates layouts ``dp x tp x pp = n_gpus`` with equal pipeline stages, the same
    Megatron split of every layer, and one ZeRO stage for the whole model. Alpa's inter-operator
    pass chooses where to cut the layers into stages (any contiguous slicing: for L layers and S
    stages, C(L-1, S-1) of them) and a device submesh for each stage, by dynamic programming; its
    intra-operator pass chooses a sharding of every operator on its submesh by an integer linear
    program (Zheng et al. 2022, Sec. 4 and 5). The counts below are exact for the stage slicings;
    per-operator sharding grows as (choices per operator)^(operators), which no enumeration covers."""

    layers: int
    n_gpus: int
    layouts: int  # dp x tp x pp factorisations of n_gpus
    equal_slicings: int  # pipeline depths pp dividing n_gpus, at most the layers: one slicing each
    contiguous_slicings: int  # Alpa: every way to cut the layers into at most n_gpus contiguous stages

    @property
    def ratio(self) -> float:
        return self.contiguous_slicings / self.equal_slicings


def search_spaces(layers: int, n_gpus: int) -> SearchSpaces:
    """Stage slicings of ``layers`` layers over ``n_gpus`` GPUs: ``search``'s (one per pipeline depth)
    against Alpa's (sum over S of C(L-1, S-1) contiguous slicings into S stages)."""
    positive("layers", layers, integer=True)
    positive("n_gpus", n_gpus, integer=True)
    layouts = sum(1 for _ in factorizations(n_gpus))
    depths = [pp for pp in divisors(n_gpus) if pp <= layers]
    contiguous = sum(comb(layers - 1, s - 1) for s in range(1, min(layers, n_gpus) + 1))
    return SearchSpaces(layers, n_gpus, layouts, len(depths), contiguous)
