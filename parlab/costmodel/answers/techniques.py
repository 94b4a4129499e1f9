"""Guide 1.20's landscape as trade-offs, computed: what each technique divides and what it pays
with, each one a ``Plan`` knob priced on a worked example (chapter 10, section 6).

Every row turns one knob of a baseline plan, at the same global batch, and prices both plans
with ``estimate``: the memory
of the most loaded GPU before and after, the step time before and after, and the time term that
grows the most (what the technique pays with, as the cost model counts it). The words in each row
(what it divides, when it wins) are the course's summary of the chapters that price it; the
numbers are the model's. No new formula here: compositions of ``estimate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster


@dataclass(frozen=True)
class Technique:
    """One technique: its ``Plan`` knob, what it divides, when it wins, and a worked example
    (``model`` on ``gpus`` GPUs of ``cluster``: ``base`` against ``plan``, which turns the knob)."""

    name: str
    knob: str
    divides: str
    wins: str
    model: str
    cluster: str
    gpus: int
    base: Plan
    plan: Plan
    seq_len: int | None = None  # the example's sequence length, where not the preset's
    base_gpus: int | None = None  # the baseline's GPUs, where not ``gpus`` (data parallelism adds GPUs)

    def estimates(self) -> tuple[Estimate, Estimate]:
        """The baseline's and the technique's estimates."""
        m = get_model(self.model)
        if self.seq_len is not None:
            m = m.with_(seq_len=self.seq_len)
        c0 = make_cluster(self.cluster, self.base_gpus or self.gpus)
        return estimate(m, c0, self.base), estimate(m, make_cluster(self.cluster, self.gpus), self.plan)

    def example(self) -> str:
        """The example in a few words: model, GPUs, and the plan fields the knob changed."""
        a, b = self.base.describe().split(), self.plan.describe().split()
        turned = f"{' '.join(t for t in a if t not in b) or '—'} -> {' '.join(t for t in b if t not in a)}"
        seq = f", s = {self.seq_len:,}" if self.seq_len else ""
        gpus = f"{self.base_gpus} -> {self.gpus}" if self.base_gpus else f"{self.gpus}"
        return f"{self.model}{seq}, {gpus} x {self.cluster}: {turned}"


def pays_with(before: Estimate, after: Estimate) -> str:
    """What the technique pays with, as the cost model counts it: the time term that grows the
    most from ``before`` to ``after``, else the memory term that grows the most, else '—'
    (nothing it counts grows: the cost is hidden, e.g. an all-reduce overlapped with backward)."""
    for terms, unit, scale in ((Estimate.time_terms, "ms", 1e3), (Estimate.memory_terms, "GB", 1e-9)):
        t0, t1 = terms(before), terms(after)
        name, by = max(((k, v - t0.get(k, 0.0)) for k, v in t1.items()), key=lambda kv: kv[1])
        if by * scale >= 0.05:
            return f"{name} (+{by * scale:,.1f} {unit})"
    return "—"


_EIGHT = dict(model="llama-7b", cluster="dgx-a100", gpus=8)

#: The techniques of chapter 10's table, each with its worked example. LLaMA-7B on one DGX A100
#: unless the technique needs another setting: a long sequence for context parallelism, an MoE
#: model for expert parallelism, an H100 for FP8.
TECHNIQUES: tuple[Technique, ...] = (
    Technique("data parallelism", "dp", "the batch (time)",
              "the model fits and the all-reduce hides behind backward",
              base=Plan(micro_batches=8), plan=Plan(dp=8), base_gpus=1, **_EIGHT),
    Technique("ZeRO-1/2 (sharded optimizer, gradients)", "zero", "the optimizer states (and gradients) by dp",
              "DP would fit but for the states", base=Plan(dp=8), plan=Plan(dp=8, zero=2), **_EIGHT),
    Technique("ZeRO-3 / FSDP", "zero = 3, zero3_impl", "the weights too",
              "the work per GPU is large enough to hide the gathers (chapter 07)",
              base=Plan(dp=8), plan=Plan(dp=8, zero=3), **_EIGHT),
    Technique("tensor parallelism", "tp", "each layer's weights and activations", "NVLink inside a node",
              base=Plan(dp=8), plan=Plan(tp=8, micro_batches=8), **_EIGHT),
    Technique("Megatron-style SP", "sequence_parallel", "the norm/dropout activations, by tp", "always, with TP",
              base=Plan(tp=8), plan=Plan(tp=8, sequence_parallel=True), **_EIGHT),
    Technique("pipeline parallelism", "pp, schedule, chunks", "the layers", "slow links, many micro-batches",
              base=Plan(dp=8, micro_batches=8), plan=Plan(pp=8, micro_batches=64), **_EIGHT),
    Technique("context parallelism (ring, all-gather, Ulysses)", "cp, cp_impl", "the sequence inside attention",
              "sequences too long for one GPU", base=Plan(dp=2, tp=4, sequence_parallel=True, recompute="selective"),
              plan=Plan(tp=4, cp=2, micro_batches=2, sequence_parallel=True, recompute="selective"), seq_len=32768,
              model="llama-7b", cluster="dgx-h100", gpus=8),
    Technique("expert parallelism", "ep", "the experts of an MoE layer", "MoE models: experts too many for one GPU",
              base=Plan(dp=8, zero=1), plan=Plan(dp=8, ep=8, zero=1),
              model="mixtral-8x7b", cluster="dgx-h100", gpus=8),
    Technique("recomputation", "recompute", "the stored activations", "activations, not states, are the wall",
              base=Plan(tp=8), plan=Plan(tp=8, recompute="full"), **_EIGHT),
    Technique("offload", "offload", "GPU memory for the states", "one GPU, full training",
              base=Plan(zero=2), plan=Plan(zero=2, offload="optimizer"),
              model="llama-7b", cluster="dgx-a100", gpus=1),
    Technique("mixed precision", "dtype", "bytes per element and time per FLOP", "always on modern GPUs",
              base=Plan(tp=8, dtype="fp32"), plan=Plan(tp=8, dtype="bf16"), **_EIGHT),
    Technique("FP8 training", "dtype = fp8, fp8_recipe", "time per FLOP of the linear layers",
              "Hopper or newer, GEMM-bound steps", base=Plan(tp=8), plan=Plan(tp=8, dtype="fp8"),
              model="llama-7b", cluster="dgx-h100", gpus=8),
)


def technique_table(techniques: tuple[Technique, ...] = TECHNIQUES) -> tuple[list[list], list[str], dict]:
    """``(rows, headers, formats)`` for ``parlab.viz.html.show_table``: each technique, its knob,
    what it divides, its example, memory per GPU and step time ('before -> after'), what it pays
    with (``pays_with``) and when it wins."""
    rows = []
    for t in techniques:
        before, after = t.estimates()
        rows.append([t.name, t.knob, t.divides, t.example(),
                     f"{before.memory_total / 1e9:,.1f} -> {after.memory_total / 1e9:,.1f}",
                     f"{before.step_time * 1e3:,.0f} -> {after.step_time * 1e3:,.0f}", pays_with(before, after), t.wins])
    return rows, ["technique", "knob in Plan", "divides", "example", "memory/GPU (GB)", "step (ms)",
                  "pays with (term that grows)", "wins when"], {}
