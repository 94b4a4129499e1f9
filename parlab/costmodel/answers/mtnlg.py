"""MT-NLG 530B (Smith et al. 2022, Sec. 2.4): the paper's measured step times beside the cost model's,
and the same layout in Megatron-LM's own 530B run (Narayanan et al. 2021, Table 1), so a chapter can
say how far the model is off for this run and why (chapter 08, issue 19 item 2).

The model prices MT-NLG's plan (tp 8 x pp 35, 1F1B, full recomputation, global batch 1920) about a
fifth faster than measured, while it prices Megatron-LM's run of the same tp 8 x pp 35 layout on the
same kind of cluster within a few percent. Per micro-batch with the bubble taken out, t / (m + (p-1)/v),
MT-NLG is slower than Megatron-LM's run: most of the gap is not the pipeline bubble (MT-NLG's
schedule is not interleaved, v = 1; Megatron-LM's is, v = 3) but the per-micro-batch speed of the
software stack (DeepSpeed's pipeline engine around Megatron's kernels), which the model does not see.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.data import read_csv

PAPER = "Smith et al. 2022 (MT-NLG), Sec. 2.4"


def mtnlg_plan(dp: int = 8) -> Plan:
    """MT-NLG's layout (Smith et al. 2022, Sec. 3): 8-way TP in a DGX A100, 35 stages, ZeRO-1 data
    parallelism over ``dp`` replicas, global batch 1920, full recomputation, micro-batch 1."""
    return Plan(dp=dp, tp=8, pp=35, zero=1, global_batch=1920, recompute="full")


@dataclass(frozen=True)
class MtNlgRow:
    """One of the paper's three cluster sizes: measured against the cost model."""

    dp: int
    gpus: int
    step: float  # s, measured
    tflops: float  # TFLOP/s per GPU, measured
    estimate: Estimate

    @property
    def step_error(self) -> float:
        """Model / measured - 1 for the step time (negative: the model is optimistic)."""
        return self.estimate.step_time / self.step - 1

    @property
    def tflops_error(self) -> float:
        return self.estimate.hardware_tflops_per_gpu / self.tflops - 1

    @property
    def implied_tflops(self) -> float:
        """The measured step time turned into TFLOP/s per GPU with the model's FLOP count (recompute
        included, Narayanan et al. 2021 Eq. 3): it equals the paper's figure, so both count alike."""
        return self.estimate.flops[1] / (self.step * self.gpus) / 1e12

    @property
    def per_microbatch(self) -> float:
        """Measured seconds per micro-batch with the 1F1B bubble taken out: t / (m + p - 1)."""
        p = self.estimate.plan
        return self.step / (p.m + (p.pp - 1) / p.chunks)


def mtnlg_rows() -> list[MtNlgRow]:
    """The paper's three runs (``parlab/data/mtnlg2022_throughput.csv``), each with the model's estimate."""
    model = get_model("mt-nlg-530b")
    out = []
    for r in read_csv("mtnlg2022_throughput"):
        plan = mtnlg_plan(int(r["dp"]))
        out.append(MtNlgRow(plan.dp, int(r["gpus"]), float(r["step_s"]), float(r["tflops_per_gpu"]),
                            estimate(model, make_cluster("dgx-a100", plan.n_gpus), plan)))
    return out


@dataclass(frozen=True)
class MegatronTwin:
    """Megatron-LM's own 530B run with MT-NLG's tp 8 x pp 35 (Narayanan et al. 2021, Table 1)."""

    measured_tflops: float
    estimate: Estimate

    @property
    def error(self) -> float:
        return self.estimate.hardware_tflops_per_gpu / self.measured_tflops - 1

    @property
    def step(self) -> float:
        """The measured step time: the model's FLOP count (Eq. 3) over the measured TFLOP/s."""
        return self.estimate.flops[1] / (self.measured_tflops * 1e12 * self.estimate.plan.n_gpus)

    @property
    def per_microbatch(self) -> float:
        p = self.estimate.plan
        return self.step / (p.m + (p.pp - 1) / p.chunks)


def megatron_twin() -> MegatronTwin:
    """The 529.6B row of Table 1 priced as ``validation.megatron_table1`` prices it (the same plan,
    without the search for the advised one): the same layout, Megatron-LM's stack."""
    from parlab.costmodel.answers.megatron_runs import MEGATRON_TABLE1_RUNS, megatron_model

    r = next(r for r in read_csv("megatron2021_weak_scaling") if (r["tp"], r["pp"]) == ("8", "35"))
    tp, pp, n, batch = int(r["tp"]), int(r["pp"]), int(r["gpus"]), int(r["global_batch"])
    mb, v = MEGATRON_TABLE1_RUNS[float(r["params_b"])]
    plan = Plan(dp=n // (tp * pp), tp=tp, pp=pp, micro_batch=mb, global_batch=batch, recompute="full", dtype="fp16",
                schedule="interleaved" if v > 1 else "1f1b", chunks=v)
    return MegatronTwin(float(r["tflops_per_gpu"]), estimate(megatron_model(r), make_cluster("dgx-a100", n), plan))
