"""Series the chapters plot and the guide's claims the chapters check, all computed by the model:
memory vs DP size per ZeRO stage, ZeRO-3 vs 3D vs GPU count, communication vs bandwidth, and
guide 1.19 (ZeRO-3 over 10 GbE) and 3.4-3.5 (no NVLink, slow network)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan, training_dtype
from parlab.costmodel.pricing.collectives import ring_time
from parlab.costmodel.pricing.memory import RECOMPUTE, get_precision
from parlab.costmodel.search.ranking import search
from parlab.costmodel.specs._check import canonical, choices, fraction, non_negative, positive
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.links import GBIT, US, LinkSpec, get_link
from parlab.costmodel.specs.models import ModelSpec


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
    """Guide 1.17 (Narayanan et al. 2021, Sec. 5.2, Table 2 / Figure 10): at a fixed global batch,
    the best ZeRO-3 plan without model parallelism (tp = pp = 1) against the best 3D plan (TP + PP +
    DP with ZeRO-0/1), as the GPU count grows and the batch per GPU shrinks. ZeRO-3 loses because
    each GPU still moves 3 Psi elements per step, at one port's rate across nodes
    (``step_time.zero3_bandwidth``), behind less and less compute (``step_time.zero3_exposed``);
    ``validation.megatron_zero3`` holds it to the paper's six rows."""
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
    non_negative("nbytes", nbytes)
    positive("n", n, integer=True)
    gbits = choices("gbits", gbits, positive)
    non_negative("latency_us", latency_us)
    fraction("efficiency", efficiency)
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
    forward and again for the backward, reduce-scatter the gradients - 3 Psi elements (ZeRO
    paper, Sec. 7.2.2), each ring collective moving (n-1)/n of its buffer.

    Full recomputation adds no third gather: the backward's gather serves the recomputed forward
    too. DeepSpeed keeps a parameter that is used again within ``stage3_max_reuse_distance``
    (1e9 parameters; the recompute and the backward of a layer use it back to back), and FSDP's
    pre-backward hook all-gathers a unit before its recomputed forward runs. ``recompute`` is
    checked and kept for the callers that pass it; it does not change the count. The gradients
    are reduce-scattered in the 16-bit dtype (DeepSpeed's communication_data_type) even when the
    optimizer keeps fp32 ones."""
    positive("n_params", n_params)
    positive("dp", dp, integer=True)
    positive("micro_batches", micro_batches, integer=True)
    recompute = canonical("recompute", recompute, RECOMPUTE)
    prec = get_precision("fp32" if training_dtype(dtype)[0] == "fp32" else "mixed")
    per = n_params * 3 * prec.weight  # 2 gathers of the weights + 1 reduce-scatter of the gradients
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
    n = 8 * positive("nodes", nodes, integer=True)
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


# -- guide 1.18 / 3.4 against the advisor: when TP without NVLink wins ---------------------------
@dataclass(frozen=True)
class TPWithoutNVLink:
    """The advisor's fastest plan and its fastest plan without TP on a cluster whose GPUs talk over
    PCIe inside a node, at the modelled PCIe speed and at ``slowdown`` times slower (real PCIe
    all-reduces often reach less than the model's 75% of line rate: GPUs behind one switch or on
    two CPU sockets share the path)."""

    model: ModelSpec
    kind: str
    n_gpus: int
    global_batch: int
    intra_per_gpu: float  # bytes/s one GPU gets inside a node (achievable)
    network_per_gpu: float  # bytes/s one GPU gets between nodes when all GPUs of a node talk
    rows: list[tuple[float, Estimate, Estimate | None]]  # (PCIe slowdown, fastest, fastest with tp = 1)

    @property
    def speed_ratio(self) -> float:
        """How many times faster a GPU's PCIe share is than its share of the node's network."""
        return self.intra_per_gpu / self.network_per_gpu

    @property
    def tp_wins_up_to(self) -> float | None:
        """The largest slowdown tried at which the fastest plan still uses TP (None: never)."""
        wins = [k for k, best, _ in self.rows if best.plan.tp > 1]
        return max(wins) if wins else None

    def table(self) -> tuple[list[list[object]], list[str]]:
        """(rows, headers): per PCIe slowdown, the fastest plan, its TP term, and the tp = 1 plan
        ('none fits' where no plan without TP fits in memory)."""
        out = [[f"{k:g}x", b.plan.describe(), round(b.step_time, 1), round(b.time.tp_comm, 1),
                round(t1.step_time, 1) if t1 is not None else "none fits"] for k, b, t1 in self.rows]
        return out, ["PCIe slower by", "fastest plan", "step (s)", "of which TP (s)", "best tp=1 (s)"]


def tp_without_nvlink(model: str | ModelSpec = "gpt3-175b", n_gpus: int = 1024, global_batch: int = 1536,
                      kind: str = "pcie-10gbe", slowdowns: Sequence[float] = (1, 2, 4),
                      assumptions: Assumptions = DEFAULT) -> TPWithoutNVLink:
    """Guide 1.18 says TP needs NVLink. On ``kind`` (PCIe inside a node, one slow NIC per node)
    the advisor may still pick TP: each GPU's PCIe share is ~170x its share of a 10 GbE port, so
    TP's traffic inside a node is cheap next to anything that crosses nodes, and TP shrinks what
    does cross (each GPU's gradient shard, the pipeline's sends) and the memory that otherwise
    forces full recompute or a deep pipeline with few micro-batches (a large bubble). Rerun at
    ``slowdowns`` times slower PCIe to see how robust that choice is."""
    model = get_model(model)
    base = make_cluster(kind, n_gpus)
    rows = []
    for k in slowdowns:
        intra = base.intra if k == 1 else LinkSpec(f"{base.intra.name}/{k:g}", base.intra.bandwidth / k,
                                                     base.intra.latency, base.intra.efficiency)
        result = search(model, make_cluster(kind, n_gpus, intra=intra), global_batch, assumptions=assumptions)
        no_tp = [e for e in result.ranked if e.plan.tp == 1]
        rows.append((float(k), result.best(), no_tp[0] if no_tp else None))
    return TPWithoutNVLink(model, base.name, n_gpus, global_batch, base.intra.achievable, base.net_share_per_gpu,
                           rows)


# -- ZeRO-3 against the advisor's first plan (guide 1.17) -----------------------------------------
@dataclass(frozen=True)
class Zero3Ranking:
    """The advisor's fastest ZeRO-3 plan beside its fastest plan without ZeRO-3, and the ZeRO-3 plan
    that perfect overlap would have put first (``Assumptions.zero3_overlap = 1``), priced both ways.

    With perfect prefetching a ZeRO-3 plan (dp=256 tp=4 for GPT-3 175B on 1,024 A100s) tied the
    3D plans: every byte of its traffic hid behind compute. Priced group by group, with the ring's
    (dp - 1) alpha per collective, one port per GPU across nodes and half of the overlapped time
    hidden, its gathers are exposed and a TP x PP x DP plan with ZeRO-1 ranks first, as in the
    published runs at that scale."""

    zero3: Estimate  # the fastest ZeRO-3 plan
    other: Estimate  # the fastest plan with ZeRO-0/1/2
    optimistic: Estimate  # the fastest ZeRO-3 plan under perfect overlap, priced with it
    optimistic_now: Estimate  # the same plan priced with the given assumptions

    @property
    def first(self) -> Estimate:
        """What ``search`` ranks first of the two."""
        return self.zero3 if self.zero3.step_time <= self.other.step_time else self.other

    @property
    def traffic(self) -> float:
        """Seconds of the fastest ZeRO-3 plan's collectives per step (all of them, hidden or not)."""
        return self.zero3.time.facts["dp_total"]

    @property
    def hidden(self) -> float:
        return self.zero3.time.facts["dp_hidden"]

    @property
    def latency(self) -> float:
        """Seconds of that traffic that are ring latency, (dp - 1) alpha per collective."""
        return self.zero3.time.facts["zero3_latency"]

    @property
    def exposed_step(self) -> float:
        """The ZeRO-3 step time with none of its traffic hidden behind compute."""
        return self.zero3.step_time + self.hidden

    @property
    def hidden_share_to_tie(self) -> float:
        """The fraction of ZeRO-3's traffic that would have to hide behind compute for it to tie the
        other plan (compare with ``hidden / traffic``, what the model grants)."""
        if not self.traffic:
            return 0.0
        return min(1.0, max(0.0, (self.exposed_step - self.other.step_time) / self.traffic))


def zero3_ranking(model: str | ModelSpec = "gpt3-175b", n_gpus: int = 1024, global_batch: int = 1536,
                  kind: str = "dgx-a100", assumptions: Assumptions = DEFAULT) -> Zero3Ranking:
    """The fastest ZeRO-3 plan and the fastest plan without ZeRO-3 on ``kind``, and the ZeRO-3 plan
    that perfect overlap would rank first, priced with and without it."""
    cluster = make_cluster(kind, n_gpus)
    result = search(model, cluster, global_batch, assumptions=assumptions)
    zero3 = [e for e in result.ranked if e.plan.zero == 3]
    other = [e for e in result.ranked if e.plan.zero < 3]
    if not zero3 or not other:
        raise ValueError(f"no fitting ZeRO-3 plan and other plan to compare on {n_gpus} x {kind}")
    perfect = assumptions.with_(zero3_overlap=1.0)
    optimistic = search(model, cluster, global_batch, assumptions=perfect, zero_stages=(3,)).best()
    return Zero3Ranking(zero3[0], other[0], optimistic, estimate(model, cluster, optimistic.plan, assumptions))


def term_table(estimates: dict[str, Estimate]) -> tuple[list[list[object]], list[str]]:
    """(rows, headers): the step-time terms of several estimates side by side, in seconds, with
    the memory per GPU and the total last, to see what one plan pays that another does not."""
    names = list(estimates)
    terms = list(next(iter(estimates.values())).time_terms())
    rows = [[t, *(round(estimates[n].time_terms()[t], 2) for n in names)] for t in terms]
    rows.append(["step time", *(round(estimates[n].step_time, 2) for n in names)])
    rows.append(["memory per GPU (GB)", *(round(estimates[n].memory_total / 1e9, 1) for n in names)])
    return rows, ["term (s)", *names]
