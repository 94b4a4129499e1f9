"""Series the chapters plot and the guide's claims the chapters check, all computed by the model:
memory vs DP size per ZeRO stage, ZeRO-3 vs 3D vs GPU count, communication vs bandwidth, and
guide 1.19 (ZeRO-3 over 10 GbE) and 3.4-3.5 (no NVLink, slow network)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .assumptions import DEFAULT, Assumptions
from .cluster import make_cluster
from .collectives import ring_time
from .estimate import Estimate, estimate
from .links import GBIT, US, get_link
from .memory import get_precision
from .models import ModelSpec, get_model
from .plan import Plan
from .search import search


def memory_vs_dp(model: str | ModelSpec, dp_sizes: Sequence[int], *, kind: str = "dgx-a100",
                 micro_batch: int = 1, recompute: str = "full", dtype: str = "bf16",
                 assumptions: Assumptions = DEFAULT) -> dict[int, list[Estimate]]:
    """For each ZeRO stage 0-3, the estimate of pure data parallelism on each of ``dp_sizes``
    GPUs: model states shrink as 1/dp for what the stage shards (ZeRO paper, Figure 1), the
    activations do not."""
    model = get_model(model)
    return {z: [estimate(model, make_cluster(kind, n), Plan(dp=n, zero=z if n > 1 else 0, micro_batch=micro_batch,
                                                            recompute=recompute, dtype=dtype), assumptions)
                for n in dp_sizes] for z in range(4)}


@dataclass(frozen=True)
class ScalingPoint:
    """The fastest fitting plan of each family at one GPU count (None: no plan of it fits)."""

    gpus: int
    zero3: Estimate | None
    three_d: Estimate | None


def zero3_vs_3d(model: str | ModelSpec, gpu_counts: Sequence[int], global_batch: int, *, kind: str = "dgx-a100",
                assumptions: Assumptions = DEFAULT, dtype: str = "bf16") -> list[ScalingPoint]:
    """Guide 1.17 (Narayanan et al. 2021, Figure 10): at a fixed global batch, the best ZeRO-3
    plan without model parallelism (tp = pp = 1) against the best 3D plan (TP + PP + DP with
    ZeRO-0/1), as the GPU count grows and the batch per GPU shrinks."""
    model = get_model(model)
    out = []
    for n in gpu_counts:
        cluster = make_cluster(kind, n)
        z3 = search(model, cluster, global_batch, zero_stages=(3,), assumptions=assumptions, dtype=dtype)
        z3_plain = [e for e in z3.ranked if e.plan.tp == 1 and e.plan.pp == 1]
        d3 = search(model, cluster, global_batch, zero_stages=(0, 1), assumptions=assumptions, dtype=dtype)
        out.append(ScalingPoint(n, z3_plain[0] if z3_plain else None, d3.ranked[0] if d3.ranked else None))
    return out


def comm_time_vs_bandwidth(nbytes: float, n: int, gbits: Sequence[float], op: str = "all_reduce",
                           latency_us: float = 10.0, efficiency: float = 0.9) -> list[float]:
    """Seconds of a ring ``op`` of ``nbytes`` among ``n`` ranks, one rank per node, at each network
    speed in Gb/s (guide 4.4: 64 vs 800 Gb/s)."""
    return [ring_time(op, nbytes, n, g * GBIT * efficiency, latency_us * US) for g in gbits]


def step_vs_inter_link(model: str | ModelSpec, plan: Plan, links: Sequence[str], *, kind: str = "dgx-a100",
                       assumptions: Assumptions = DEFAULT) -> list[Estimate]:
    """The same plan on clusters that differ only in the inter-node link."""
    model = get_model(model)
    return [estimate(model, make_cluster(kind, plan.n_gpus, inter=link), plan, assumptions) for link in links]


# -- guide 1.19: ZeRO-3 over 10 GbE ------------------------------------------------------------
def zero3_traffic_per_step(n_params: float, dp: int, dtype: str = "bf16", micro_batches: int = 1,
                           recompute: str = "none") -> float:
    """Bytes each GPU sends in one ZeRO-3 step: per micro-batch, all-gather the weights for the
    forward and again for the backward (and the recompute), reduce-scatter the gradients -
    3 Psi elements (ZeRO paper, Sec. 7.2.2), 4 Psi with full recompute, each ring collective
    moving (n-1)/n of its buffer."""
    prec = get_precision("fp32" if dtype == "fp32" else "mixed")
    gathers = 3 if recompute == "full" else 2
    per = n_params * (gathers * prec.weight + prec.grad)
    return micro_batches * per * (dp - 1) / dp


@dataclass(frozen=True)
class Guide119:
    """Guide 1.19 recomputed. The guide counts 3 x 65B = 195 G *elements* and reads them as GB,
    then 1560 Gb at 10 Gb/s = 156 s; in fp16/bf16 every element is 2 bytes."""

    n_params: float
    dp: int
    guide_elements: float  # 3 Psi
    guide_seconds: float  # 3 Psi "bytes" x 8 bits / 10 Gb/s
    bytes_fp16: float  # what a GPU really sends per step (ring, bf16/fp16), no recompute
    seconds_line_rate: float  # bytes_fp16 at the 10 Gb/s line rate
    estimate: Estimate  # the full model: 8-GPU nodes behind one 10 GbE port, full recompute


def guide_1_19(model: str | ModelSpec = "llama-65b", nodes: int = 2, link: str = "10gbe",
               assumptions: Assumptions = DEFAULT) -> Guide119:
    """65B with ZeRO-3 on ``nodes`` commodity nodes (8 GPUs on PCIe, one ``link`` port each)."""
    model = get_model(model)
    psi = float(model.num_params())
    n = 8 * nodes
    rate = get_link(link).bandwidth
    cluster = make_cluster("pcie-10gbe", n, inter=link)
    plan = Plan(dp=n, zero=3, micro_batch=1, recompute="full", dtype="bf16")
    real = zero3_traffic_per_step(psi, n)
    return Guide119(psi, n, 3 * psi, 3 * psi / rate, real, real / rate,
                    estimate(model, cluster, plan, assumptions))


# -- guide 3.4 / 3.5: what wins without NVLink or with a slow network ----------------------------
def advice(model: str | ModelSpec, n_gpus: int, global_batch: int, kinds: Sequence[str] = ("dgx-a100", "pcie-10gbe"),
           top: int = 3, assumptions: Assumptions = DEFAULT) -> dict[str, list[Estimate]]:
    """The fastest fitting plans of ``model`` on ``n_gpus`` GPUs of each cluster kind."""
    model = get_model(model)
    return {k: search(model, make_cluster(k, n_gpus), global_batch, top=top, assumptions=assumptions).ranked
            for k in kinds}
