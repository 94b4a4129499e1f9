"""The strategy advisor: enumerate every valid plan for a model, a cluster and a global batch, and
rank those that fit in memory by step time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from parlab.costmodel.plan.estimate import Estimate, _check_inputs, most_loaded_stage
from parlab.costmodel.plan.memory.stage import states_floor
from parlab.costmodel.plan.spec import (
    CP_IMPLS,
    OFFLOADS,
    SCHEDULES,
    ZERO_STAGES,
    Plan,
    check_plan,
    training_dtype,
)
from parlab.costmodel.plan.step_time import step_time
from parlab.costmodel.pricing.attention_terms import kv_splits, ulysses_splits
from parlab.costmodel.pricing.memory import RECOMPUTE
from parlab.costmodel.pricing.pipeline_split import pipeline_layout
from parlab.costmodel.specs._check import boolean, canonical, non_negative, positive
from parlab.costmodel.specs._check import choices as choice_list
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import Cluster, gpu_count
from parlab.costmodel.specs.models import ModelSpec
from parlab.tables import plural


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def factorizations(n_gpus: int) -> Iterator[tuple[int, int, int]]:
    """Every (dp, tp, pp) with dp x tp x pp = n_gpus (at most ``MAX_GPUS``)."""
    gpu_count("n_gpus", n_gpus)
    for tp in divisors(n_gpus):
        for pp in divisors(n_gpus // tp):
            yield n_gpus // (tp * pp), tp, pp


@dataclass(frozen=True)
class SearchResult:
    """Plans that fit, fastest first (``ranked``), and how many were tried, valid and fitting.

    ``reason`` says why no plan was valid, when none was (the global batch does not split over
    the GPUs, no layout suits the model, ...)."""

    ranked: list[Estimate]
    tried: int
    valid: int
    fitting: int
    reason: str = ""

    def best(self) -> Estimate:
        if not self.ranked:
            if self.valid == 0:
                raise ValueError(self.reason or "no valid plan")
            raise ValueError(f"no valid plan fits in memory ({plural(self.valid, 'valid plan')}): add GPUs, "
                             f"allow recomputation or offload, or lower the micro-batch size")
        return self.ranked[0]

    def counts(self) -> str:
        """'4,980 plans tried, all valid; 1,673 fit in memory' (or 'N tried, M valid' when they differ)."""
        if self.tried == self.valid:
            head = f"{plural(self.tried, 'plan')} tried, all valid" if self.tried else "no plan to try"
        else:
            head = f"{plural(self.tried, 'plan')} tried, {self.valid:,} valid"
        return f"{head}; {self.fitting:,} fit in memory" if self.tried else head

    def rows(self, top: int = 10) -> list[list[object]]:
        """Table rows for the fastest ``top`` plans."""
        positive("top", top, integer=True)
        return [[i + 1, e.plan.describe(), round(e.memory_total / 1e9, 1), round(e.step_time, 3),
                 f"{e.mfu:.1%}", round(e.tokens_per_s)] for i, e in enumerate(self.ranked[:top])]

    HEADERS = ["#", "plan", "memory (GB)", "step (s)", "MFU", "tokens/s"]


def _zero_stage(name: str, value) -> int:
    if non_negative(name, value, integer=True) not in ZERO_STAGES:
        raise ValueError(f"{name} must be a ZeRO stage 0, 1, 2 or 3, got {value!r}")
    return int(value)


#: the search's choices and the check of one value of each
CHOICES = {
    "micro_batches": lambda n, v: positive(n, v, integer=True),
    "zero_stages": _zero_stage,
    "schedules": lambda n, v: canonical(n, v, SCHEDULES),
    "chunks": lambda n, v: positive(n, v, integer=True),
    "recompute": lambda n, v: canonical(n, v, RECOMPUTE),
    "sequence_parallel": boolean,
    "offload": lambda n, v: canonical(n, v, OFFLOADS),
    "cp": lambda n, v: positive(n, v, integer=True),
    "cp_impls": lambda n, v: canonical(n, v, CP_IMPLS),
    "ep": lambda n, v: positive(n, v, integer=True),
}

#: From this sequence length on, the search also tries context parallelism unless told which cp
#: to try (a heuristic, not a formula: below it a sequence's activations fit without splitting it,
#: and Megatron-Core's CP pays off for long-context training, e.g. Llama 3's 8K-128K phases,
#: Dubey et al. 2024, Sec. 3.3.2).
LONG_SEQUENCE = 8192


def default_cp(model: ModelSpec, n_gpus: int) -> list[int]:
    """The cp degrees the search tries for ``model``: 1, and for a sequence of ``LONG_SEQUENCE``
    tokens or more the powers of two up to the GPU count that the load-balanced ring can cut the
    sequence for (seq_len % 2cp == 0)."""
    if model.seq_len < LONG_SEQUENCE:
        return [1]
    out, cp = [1], 2
    while cp <= n_gpus and model.seq_len % (2 * cp) == 0:
        out.append(cp)
        cp *= 2
    return out


def default_ep(model: ModelSpec) -> list[int]:
    """The ep degrees the search tries: 1 for a dense model; for an MoE model every divisor of its
    routed experts (each EP rank holds E / ep whole experts)."""
    return [1] if model.moe is None else divisors(model.moe.num_experts)


def check_choices(**given) -> dict:
    """The search choices normalised (names in canonical spelling, numbers checked), or a
    ValueError / TypeError naming the choice, the value and the rule."""
    out = {}
    for name, values in given.items():
        if name == "dtype":
            if training_dtype(values)[1] is None:
                raise ValueError(f"dtype {values!r} keeps no fp32 master weights, which a Plan does not model")
            out[name] = values
        elif name in CHOICES:
            out[name] = list(dict.fromkeys(choice_list(name, values, CHOICES[name])))
        else:
            raise TypeError(f"unknown search choice {name!r}; allowed: {', '.join([*CHOICES, 'dtype'])}")
    return out


#: the micro-batch sizes the search tries unless told otherwise
MICRO_BATCHES = (1, 2, 4, 8, 16)


def candidate_plans(model: ModelSpec, n_gpus: int, global_batch: int, *,
                    micro_batches: Iterable[int] = MICRO_BATCHES, zero_stages: Iterable[int] = (0, 1, 2, 3),
                    schedules: Iterable[str] = ("1f1b", "interleaved", "gpipe"), chunks: Iterable[int] = (2, 4),
                    recompute: Iterable[str] = RECOMPUTE, sequence_parallel: Iterable[bool] = (False, True),
                    offload: Iterable[str] = ("none",), dtype: str = "bf16", cp: Iterable[int] | None = None,
                    cp_impls: Iterable[str] = CP_IMPLS, ep: Iterable[int] | None = None) -> Iterator[Plan]:
    """Every plan that passes the model-independent rules, skipping exact duplicates (ZeRO stages
    with dp = 1, schedules with pp = 1, SP with tp = 1). Plans that break a model rule (tp not
    dividing the heads, pp > layers) are left out here too, which is cheaper than raising.

    ``cp`` and ``ep`` are the context- and expert-parallel degrees to try (None: ``default_cp``,
    which tries cp > 1 for long sequences only, and ``default_ep``, ep > 1 for MoE models only),
    ``cp_impls`` the ways to split attention with cp > 1 (ring, Ulysses, all-gather). With cp = ep = 1 the
    enumeration is the 3D one."""
    c = check_choices(micro_batches=micro_batches, zero_stages=zero_stages, schedules=schedules, chunks=chunks,
                      recompute=recompute, sequence_parallel=sequence_parallel, offload=offload, dtype=dtype,
                      cp_impls=cp_impls, **({} if cp is None else {"cp": cp}), **({} if ep is None else {"ep": ep}))
    micro_batches, zero_stages, schedules, chunks = c["micro_batches"], c["zero_stages"], c["schedules"], c["chunks"]
    recompute, sequence_parallel, offload = c["recompute"], c["sequence_parallel"], c["offload"]
    cps, eps = c.get("cp", default_cp(model, n_gpus)), c.get("ep", default_ep(model))
    positive("global_batch", global_batch, integer=True)
    moe = model.moe is not None
    for cp_ in cps:
        if n_gpus % cp_:
            continue
        impls = ["ring"] if cp_ == 1 else [i for i in c["cp_impls"] if _cp_suits(model, cp_, i)]
        for dp, tp, pp in factorizations(n_gpus // cp_):
            if not _suits(model, tp, pp):
                continue
            for ep_ in (e for e in eps if (dp * cp_) % e == 0 and (not moe or model.moe.num_experts % e == 0)):
                for impl in (i for i in impls if i != "ulysses" or ulysses_splits(model, tp, cp_)):
                    yield from _plans(model, global_batch, dp, tp, pp, cp_, impl, ep_, micro_batches, schedules,
                                      chunks, zero_stages, offload, recompute, sequence_parallel, dtype)


def _cp_suits(model: ModelSpec, cp: int, impl: str) -> bool:
    """The CP rules of ``plan.check_cp_ep`` that do not depend on tp: the 2 cp chunks of the ring's
    (and all-gather attention's) load-balanced split."""
    return impl == "ulysses" or model.seq_len % (2 * cp) == 0


def _plans(model: ModelSpec, global_batch: int, dp: int, tp: int, pp: int, cp: int, impl: str, ep: int,
           micro_batches, schedules, chunks, zero_stages, offload, recompute, sequence_parallel,
           dtype: str) -> Iterator[Plan]:
    """The plans of one dp x tp x pp x cp (x ep) layout: micro-batching, schedule, ZeRO, offload,
    recompute and SP (which expert parallelism with tp > 1 needs: Megatron-Core)."""
    extra = {} if cp == ep == 1 else {"cp": cp, "ep": ep, "cp_impl": impl}
    zeros = [z for z in zero_stages if z != 3] if model.moe is not None else zero_stages
    sps = [sp for sp in sequence_parallel if sp] if ep > 1 else sequence_parallel
    for mb in micro_batches:
        if global_batch % (dp * mb):
            continue
        m = global_batch // (dp * mb)
        for sched, v in _schedules(pp, m, model.layers, schedules, chunks):
            for zero, off in _zero_offload(dp * cp, pp, zeros, offload):
                for rec in recompute:
                    for sp in sps if tp > 1 else [False]:
                        yield Plan(dp=dp, tp=tp, pp=pp, zero=zero, micro_batch=mb, micro_batches=m,
                                   schedule=sched, chunks=v, recompute=rec, sequence_parallel=sp,
                                   offload=off, dtype=dtype, **extra)


def _zero_offload(dp: int, pp: int, zero_stages: list[int], offload: Iterable[str]):
    """(ZeRO stage, offload) pairs that obey the plan rules. With dp = 1 ZeRO shards nothing, so
    only the lowest stage each offload mode allows is kept (ZeRO-Offload on one GPU: Ren et al. 2021)."""
    for off in offload:
        allowed = [z for z in zero_stages if not ((z >= 2 and pp > 1) or (off == "optimizer" and z < 1)
                                                  or (off == "optimizer+params" and z != 3))]
        yield from ((z, off) for z in (allowed[:1] if dp == 1 else allowed))


def _schedules(pp: int, m: int, layers: int, schedules: Iterable[str], chunks: Iterable[int]):
    if pp == 1:
        yield "1f1b", 1
        return
    for sched in schedules:
        if sched != "interleaved":
            yield sched, 1
            continue
        if m % pp:
            continue
        even = [v for v in chunks if v >= 2 and layers % (pp * v) == 0]
        for v in even or [v for v in chunks if v >= 2 and _uneven_split(layers, pp, v)]:
            yield sched, v


@lru_cache(maxsize=4096)
def _uneven_split(layers: int, pp: int, v: int) -> bool:
    """Whether ``pipeline_layout``'s balanced uneven split exists for pp x v (a plan with the
    default split knobs): the search tries uneven interleaved splits only at a pp for which no v
    offered divides the layers, so a model whose layers divide is searched as before."""
    try:
        pipeline_layout(layers, pp, v)
    except ValueError:
        return False
    return True


def _suits(model: ModelSpec, tp: int, pp: int) -> bool:
    """The model rules of ``check_plan`` on a layout: tp divides heads, hidden and MLP, and divides
    the K/V heads or is a multiple of them (``attention_terms.kv_splits``); pp <= layers."""
    return not (model.heads % tp or model.hidden % tp or model.ffn % tp or pp > model.layers
                or not kv_splits(model, tp))


def stages(plan: Plan) -> tuple[str, ...]:
    """The pipeline stages whose GPU may be the most loaded (``most_loaded_stage``)."""
    return ("first",) if plan.pp == 1 else ("first", "last")


def _why_none(model: ModelSpec, n_gpus: int, global_batch: int, micro_batches: list[int]) -> str:
    """Why no plan was generated: no layout suits the model, or the batch does not split."""
    layouts = [(dp, tp, pp) for dp, tp, pp in factorizations(n_gpus) if _suits(model, tp, pp)]
    if not layouts:
        return (f"no dp x tp x pp layout of {plural(n_gpus, 'GPU')} suits {model.name}: tp must divide its "
                f"{model.heads} heads, hidden size and MLP width, and pp can be at most its {model.layers} layers")
    least = min(dp for dp, _, _ in layouts)
    return (f"global batch {global_batch} does not split over {plural(n_gpus, 'GPU')}: dp x micro-batch "
            f"({', '.join(map(str, micro_batches))}) must divide it, and every layout that suits {model.name} "
            f"has dp >= {least:,}; raise the global batch to a multiple of such a dp ({least:,} is one), "
            f"or use fewer GPUs")


def search(model: str | ModelSpec, cluster: Cluster, global_batch: int, *, top: int | None = None,
           assumptions: Assumptions = DEFAULT, **choices) -> SearchResult:
    """Rank every valid plan of ``model`` on ``cluster`` at ``global_batch`` sequences per step.

    ``choices`` narrow or widen the enumeration (see ``candidate_plans``: micro_batches,
    zero_stages, schedules, chunks, recompute, sequence_parallel, offload, dtype, cp, cp_impls, ep). Plans that
    do not fit in GPU memory are dropped; the rest are sorted by step time, ties by memory.
    ``top`` keeps the fastest ``top`` (None: all). Every argument is checked where it enters.
    """
    model = get_model(model)
    _check_inputs(cluster, None, assumptions)
    positive("global_batch", global_batch, integer=True)
    if top is not None:
        positive("top", top, integer=True)
    choices = check_choices(**choices)
    capacity = cluster.gpu.memory_bytes
    floor_cap = capacity * (1 + 1e-9)  # a floor within rounding of the capacity is priced in full
    tried = valid = 0
    first_error = ""
    fitting: list[Estimate] = []
    for plan in candidate_plans(model, cluster.n_gpus, global_batch, **choices):
        tried += 1
        try:
            check_plan(model, cluster, plan)
        except ValueError as err:
            first_error = first_error or str(err)
            continue
        valid += 1
        if any(states_floor(model, plan, s, assumptions) > floor_cap for s in stages(plan)):
            continue  # cannot fit (its model states alone are too big): not worth pricing its activations
        stage = most_loaded_stage(model, plan, assumptions)  # memory first: most plans stop here
        if stage.total <= capacity:
            fitting.append(Estimate(model, cluster, plan, assumptions, stage,
                                    step_time(model, cluster, plan, assumptions)))
    fitting.sort(key=lambda e: (e.step_time, e.memory_total))
    reason = ""
    if not valid:
        reason = (f"no valid plan: {first_error}" if tried else
                  _why_none(model, cluster.n_gpus, global_batch, choices.get("micro_batches", MICRO_BATCHES)))
    return SearchResult(fitting[:top] if top else fitting, tried, valid, len(fitting), reason)
