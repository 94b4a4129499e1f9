"""The strategy advisor: enumerate every valid plan for a model, a cluster and a global batch, and
rank those that fit in memory by step time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .assumptions import DEFAULT, Assumptions
from .cluster import Cluster
from .estimate import Estimate, most_loaded_stage
from .memory import RECOMPUTE
from .models import ModelSpec, get_model
from .plan import OFFLOADS, Plan, check_plan
from .step_time import step_time


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def factorizations(n_gpus: int) -> Iterator[tuple[int, int, int]]:
    """Every (dp, tp, pp) with dp x tp x pp = n_gpus."""
    for tp in divisors(n_gpus):
        for pp in divisors(n_gpus // tp):
            yield n_gpus // (tp * pp), tp, pp


@dataclass(frozen=True)
class SearchResult:
    """Plans that fit, fastest first (``ranked``), and how many were tried, valid and fitting."""

    ranked: list[Estimate]
    tried: int
    valid: int
    fitting: int

    def best(self) -> Estimate:
        if not self.ranked:
            raise ValueError(f"no valid plan fits in memory ({self.valid} valid plans tried): add GPUs, "
                             f"allow recomputation or offload, or lower the micro-batch size")
        return self.ranked[0]

    def rows(self, top: int = 10) -> list[list[object]]:
        """Table rows for the fastest ``top`` plans."""
        return [[i + 1, e.plan.describe(), round(e.memory_total / 1e9, 1), round(e.step_time, 3),
                 f"{e.mfu:.1%}", round(e.tokens_per_s)] for i, e in enumerate(self.ranked[:top])]

    HEADERS = ["#", "plan", "memory (GB)", "step (s)", "MFU", "tokens/s"]


def candidate_plans(model: ModelSpec, n_gpus: int, global_batch: int, *,
                    micro_batches: Iterable[int] = (1, 2, 4, 8, 16), zero_stages: Iterable[int] = (0, 1, 2, 3),
                    schedules: Iterable[str] = ("1f1b", "interleaved", "gpipe"), chunks: Iterable[int] = (2, 4),
                    recompute: Iterable[str] = RECOMPUTE, sequence_parallel: Iterable[bool] = (False, True),
                    offload: Iterable[str] = ("none",), dtype: str = "bf16") -> Iterator[Plan]:
    """Every plan that passes the model-independent rules, skipping exact duplicates (ZeRO stages
    with dp = 1, schedules with pp = 1, SP with tp = 1). Plans that break a model rule (tp not
    dividing the heads, pp > layers) are left out here too, which is cheaper than raising."""
    zero_stages, micro_batches, recompute = list(zero_stages), list(micro_batches), list(recompute)
    for dp, tp, pp in factorizations(n_gpus):
        if model.heads % tp or model.hidden % tp or model.ffn % tp or pp > model.layers:
            continue
        for mb in micro_batches:
            if global_batch % (dp * mb):
                continue
            m = global_batch // (dp * mb)
            for sched, v in _schedules(pp, m, model.layers, schedules, chunks):
                for zero, off in _zero_offload(dp, pp, zero_stages, offload):
                    for rec in recompute:
                        for sp in sequence_parallel if tp > 1 else [False]:
                            yield Plan(dp=dp, tp=tp, pp=pp, zero=zero, micro_batch=mb, micro_batches=m,
                                       schedule=sched, chunks=v, recompute=rec, sequence_parallel=sp,
                                       offload=off, dtype=dtype)


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
        for v in chunks:
            if v >= 2 and layers % (pp * v) == 0:
                yield sched, v


def search(model: str | ModelSpec, cluster: Cluster, global_batch: int, *, top: int | None = None,
           assumptions: Assumptions = DEFAULT, **choices) -> SearchResult:
    """Rank every valid plan of ``model`` on ``cluster`` at ``global_batch`` sequences per step.

    ``choices`` narrow or widen the enumeration (see ``candidate_plans``: micro_batches,
    zero_stages, schedules, chunks, recompute, sequence_parallel, offload, dtype). Plans that
    do not fit in GPU memory are dropped; the rest are sorted by step time, ties by memory.
    """
    model = get_model(model)
    for name in choices.get("offload", ()):
        if name not in OFFLOADS:
            raise ValueError(f"unknown offload {name!r}; allowed: {', '.join(OFFLOADS)}")
    capacity = cluster.gpu.memory_bytes
    tried = valid = 0
    fitting: list[Estimate] = []
    for plan in candidate_plans(model, cluster.n_gpus, global_batch, **choices):
        tried += 1
        try:
            check_plan(model, cluster, plan)
        except ValueError:
            continue
        valid += 1
        stage = most_loaded_stage(model, plan, assumptions)  # memory first: most plans stop here
        if stage.total <= capacity:
            fitting.append(Estimate(model, cluster, plan, assumptions, stage,
                                    step_time(model, cluster, plan, assumptions)))
    fitting.sort(key=lambda e: (e.step_time, e.memory_total))
    return SearchResult(fitting[:top] if top else fitting, tried, valid, len(fitting))
