"""Guide 1.14's "ZeRO-3/FSDP instead of 3D parallelism" at 100B+ scale: what the published runs did
and where the cost model ranks the best ZeRO-3 plan without TP or PP (chapter 08, issue 19 item 3).

The evidence, one position: ZeRO-3/FSDP *alone* does not train a 175B model efficiently on DGX A100
clusters; the runs that train at that scale combine sharding with model parallelism.

* Narayanan et al. 2021, Sec. 5.2, Table 2 (``parlab/data/megatron2021_zero3.csv``): GPT-3 175B,
  batch 1536, ZeRO-3 without model parallelism against PTD-P on 384 / 768 / 1536 A100s.
* Zhang et al. 2022 (OPT), Sec. 2.4: OPT-175B was trained on 992 A100 80GB GPUs with Fully Sharded
  Data Parallel *together with* Megatron-LM tensor parallelism (TP = 8: the paper names no degree;
  metaseq's projects/OPT/download_opt175b.md gives 124 hosts x 8 = 992 shards, 8x tensor parallelism).
* The cost model: ``search`` over every valid plan, ranked by step time; the rank of the fastest
  plan with ZeRO-3, tp = 1 and pp = 1 is 1 + the number of fitting plans faster than it.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate
from parlab.costmodel.search.ranking import search
from parlab.costmodel.specs.cluster import make_cluster
from parlab.data import read_csv

OPT_175B = ("Zhang et al. 2022 (OPT), Sec. 2.4: 992 A100 80GB GPUs, Fully Sharded Data Parallel with "
            "Megatron-LM tensor parallelism, TP = 8")


@dataclass(frozen=True)
class PublishedZero3:
    """One row of Narayanan et al. 2021 Table 2: TFLOP/s per GPU, ZeRO-3 alone against PTD-P."""

    gpus: int
    zero3: float
    ptdp: float


def published_zero3() -> list[PublishedZero3]:
    rows = read_csv("megatron2021_zero3")
    ptdp = {int(r["gpus"]): float(r["tflops_per_gpu"]) for r in rows if r["scheme"] == "ptd-p"}
    return [PublishedZero3(int(r["gpus"]), float(r["tflops_per_gpu"]), ptdp[int(r["gpus"])])
            for r in rows if r["scheme"] == "zero3"]


@dataclass(frozen=True)
class PureZero3Rank:
    """The fastest plan of ``search`` and its fastest ZeRO-3 plan with no TP and no PP."""

    n_gpus: int
    rank: int  # 1-based, among the plans that fit
    fitting: int
    first: Estimate
    pure: Estimate

    def formula(self) -> str:
        return ("rank = 1 + #{fitting plans faster than the fastest ZeRO-3 plan with tp = pp = 1} = "
                f"{self.rank:,} of {self.fitting:,}")


def pure_zero3_rank(n_gpus: int = 768, model: str = "gpt3-175b", global_batch: int = 1536,
                    kind: str = "dgx-a100") -> PureZero3Rank:
    """Where ``search`` ranks the fastest pure ZeRO-3 plan (dp = GPUs, tp = pp = 1) of ``model`` on
    ``n_gpus`` GPUs of ``kind`` at ``global_batch`` (module docstring)."""
    result = search(model, make_cluster(kind, n_gpus), global_batch)
    ranked = result.ranked
    pure = [i for i, e in enumerate(ranked) if e.plan.zero == 3 and e.plan.tp == 1 and e.plan.pp == 1]
    if not pure:
        raise ValueError(f"no pure ZeRO-3 plan of {model} fits on {n_gpus} x {kind} at batch {global_batch}")
    return PureZero3Rank(n_gpus, pure[0] + 1, len(ranked), ranked[0], ranked[pure[0]])
