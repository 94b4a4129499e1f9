"""How far to trust the cost model: its predictions next to published measurements, calibration and
validation apart.

* Megatron-LM 2021, Table 1 (``parlab.data`` megatron2021_weak_scaling): TFLOP/s per GPU on
  Selene for ten GPT models from 1.7B to 1T parameters, one set of A100 defaults for all rows.
* Megatron-LM 2021, Table 2 (megatron2021_zero3, megatron2021_zero3_530b): TFLOP/s per GPU of
  ZeRO-3 without model parallelism, GPT-3 175B and 530B, 384 to 2,240 GPUs.
* BLOOM's preparation runs (``answers.bloom_prelude``, guide 2.3): peak memory per GPU and the
  TFLOP/s BigScience computed with their own formula.
* MT-NLG 530B's step times (``answers.mtnlg``) and the published runs of ``published_runs.csv``
  (BLOOM-176B; Llama 3 405B and NeMo's H100 rows, kept with why they are not priced yet).
* The ZeRO paper's worked example (7.5B parameters on 64 GPUs).

Each published row is a *calibration* row when a number of the model was set on it
(``specs.calibration.CALIBRATION``: Table 1 for ``matmul_efficiency``, the ZeRO-3 rows of Table 2
for ``zero3_overlap`` and the one-port cap) and a *validation* row otherwise; ``samples`` lists
them all, ``in_sample_summary`` and ``out_of_sample_summary`` report their step-time errors apart,
and ``derived_step_time_band`` is the rule ``specs.bands.STEP_TIME_BAND`` follows, on validation
rows only. ``readme_table`` is the README's list of every row with its error and its set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from parlab.costmodel.answers.bloom_prelude import (
    BloomRow,
    bloom_model,
    bloom_rows,
    bloom_summary,
    bloom_table,
)
from parlab.costmodel.answers.errors import ErrorSummary, VsMeasured
from parlab.costmodel.answers.megatron_runs import MEGATRON_TABLE1_RUNS, megatron_model
from parlab.costmodel.answers.mtnlg import mtnlg_rows
from parlab.costmodel.answers.published_runs import bigscience_tflops, published_runs
from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.memory.zero import zero_model_states
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.search.ranking import search
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.bands import BLOOM_MEMORY_BAND, MEGATRON_BAND, STEP_TIME_BAND
from parlab.costmodel.specs.calibration import sample_of
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.data import read_csv


@dataclass(frozen=True)
class MegatronRow(VsMeasured):
    """One row of Table 1: the measured TFLOP/s, ours with the published micro-batch and
    schedule (``estimate``), and ours with the advisor's micro-batch and schedule for the same
    dp/tp/pp (``advised``)."""

    params_b: float
    gpus: int
    dp: int
    tp: int
    pp: int
    measured: float
    estimate: Estimate
    advised: Estimate

    @property
    def advised_error(self) -> float:
        return self.advised.hardware_tflops_per_gpu / self.measured - 1


def megatron_table1(assumptions: Assumptions = DEFAULT) -> list[MegatronRow]:
    """Predicted vs measured TFLOP/s per GPU for Megatron-LM 2021 Table 1.

    Every row: a DGX A100 cluster (NVLink 3 inside a node, 8 x HDR InfiniBand per node), fp16
    mixed precision, full recomputation, ZeRO-0 (Megatron's data parallelism), TFLOP/s counted
    as the paper counts them (Eq. 3, the recompute pass included). Nothing is tuned per row.
    """
    rows = []
    for r in read_csv("megatron2021_weak_scaling"):
        model = megatron_model(r)
        tp, pp, n, batch = int(r["tp"]), int(r["pp"]), int(r["gpus"]), int(r["global_batch"])
        dp = n // (tp * pp)
        mb, v = MEGATRON_TABLE1_RUNS[float(r["params_b"])]
        cluster = make_cluster("dgx-a100", n)
        plan = Plan(dp=dp, tp=tp, pp=pp, micro_batch=mb, global_batch=batch, recompute="full", dtype="fp16",
                    schedule="interleaved" if v > 1 else "1f1b", chunks=v)
        advised = [e for e in search(model, cluster, batch, zero_stages=(0,), recompute=("full",),
                                     sequence_parallel=(False,), schedules=("1f1b", "interleaved"),
                                     chunks=(2, 3, 4, 5, 6, 8), dtype="fp16", assumptions=assumptions).ranked
                   if (e.plan.tp, e.plan.pp) == (tp, pp)][0]
        rows.append(MegatronRow(float(r["params_b"]), n, dp, tp, pp, float(r["tflops_per_gpu"]),
                                estimate(model, cluster, plan, assumptions), advised))
    return rows


def megatron_rows(rows: list[MegatronRow]) -> tuple[list[list[object]], list[str]]:
    """(rows, headers) of the validation table, for ``parlab.tables.table`` or a dashboard."""
    out = [[f"{r.params_b:g}B", r.gpus, f"{r.dp}/{r.tp}/{r.pp}",
            f"{r.estimate.plan.micro_batch}/{r.estimate.plan.chunks}", r.measured, round(r.predicted, 1),
            f"{r.error:+.1%}", round(r.advised.hardware_tflops_per_gpu, 1), f"{r.advised_error:+.1%}"]
           for r in rows]
    headers = ["model", "GPUs", "dp/tp/pp", "mb/v", "measured", "predicted", "error",
               "advisor's mb, v", "error"]
    return out, headers


def megatron_summary(rows: list[MegatronRow], advised: bool = False) -> ErrorSummary:
    """The errors of Table 1 (with the published micro-batch and schedule, or the advisor's)."""
    return ErrorSummary(tuple(r.advised_error if advised else r.error for r in rows), MEGATRON_BAND)


# -- ZeRO paper ---------------------------------------------------------------------------------
def zero_paper_example(n_params: float = 7.5e9, dp: int = 64) -> dict[int, float]:
    """GB of model states per GPU for ZeRO stages 0-3: the paper's 7.5B / 64-GPU example
    (Rajbhandari et al. 2020, Figure 1): 120, 31.4, 16.6, 1.9."""
    return {stage: zero_model_states(n_params, dp, stage).total / 1e9 for stage in range(4)}


# -- ZeRO-3 at scale (guide 1.17) ---------------------------------------------------------------
#: The band the tests hold the ZeRO-3 rows of Narayanan et al. 2021 Table 2 to (issue 19, item 11): an
#: in-sample band, since ``zero3_overlap`` and the one-port cap were set on these rows (``specs.calibration``).
ZERO3_BAND = 0.15


@dataclass(frozen=True)
class Zero3Row(VsMeasured):
    """One row of Narayanan et al. 2021, Table 2: the measured TFLOP/s per GPU of ZeRO-3 (no model
    parallelism) and of PTD-P at the same GPU count (None where the paper has none), and our
    estimate of the same ZeRO-3 run."""

    params_b: float
    gpus: int
    micro_batch: int
    measured: float
    measured_ptdp: float | None
    estimate: Estimate

    @property
    def measured_seconds(self) -> float:
        """The measured step time: the step's FLOPs (Eq. 3, recomputation included) / measured rate."""
        return self.estimate.flops[1] / (self.measured * 1e12 * self.gpus)

    @property
    def traffic_bytes(self) -> float:
        """Bytes each GPU sends in one ZeRO-3 step of this run (``scenarios.zero3_traffic_per_step``)."""
        from parlab.costmodel.answers.scenarios import zero3_traffic_per_step

        p = self.estimate.plan
        return zero3_traffic_per_step(self.estimate.model.num_params(), p.dp, p.dtype, p.m, p.recompute)

    @property
    def measured_rate(self) -> float:
        """Bytes/s per GPU the measured run would need if it did nothing but that traffic."""
        return self.traffic_bytes / self.measured_seconds


def megatron_zero3(assumptions: Assumptions = DEFAULT) -> list[Zero3Row]:
    """The six ZeRO-3 rows of Narayanan et al. 2021, Sec. 5.2, Table 2: GPT-3 175B on 384, 768 and
    1,536 A100s at batch 1536, the 530B model on 640 (batch 2560), 1,120 and 2,240 (batch 2240),
    the published micro-batch (4, 2, 1: one micro-batch per GPU per step), fp16, full
    recomputation, dp = GPUs, DeepSpeed's stage 3. The measured throughput halves with each
    doubling of GPUs: the step time stays flat, bound by per-GPU parameter traffic at one GPU's
    network share (``step_time.zero3_bandwidth``)."""
    rows = read_csv("megatron2021_zero3") + read_csv("megatron2021_zero3_530b")
    ptdp = {(float(r["params_b"]), int(r["gpus"])): float(r["tflops_per_gpu"]) for r in rows
            if r["scheme"] == "ptd-p"}
    models = {174.6: get_model("gpt3-175b"), 529.6: megatron_model(
        {"params_b": "529.6", "layers": "105", "hidden": "20480", "heads": "128"})}
    out = []
    for r in (r for r in rows if r["scheme"] == "zero3"):
        size, n, mb = float(r["params_b"]), int(r["gpus"]), int(r["micro_batch"])
        plan = Plan(dp=n, zero=3, micro_batch=mb, global_batch=int(r["global_batch"]), recompute="full",
                    dtype="fp16", zero3_impl="deepspeed")
        out.append(Zero3Row(size, n, mb, float(r["tflops_per_gpu"]), ptdp.get((size, n)),
                            estimate(models[size], make_cluster("dgx-a100", n), plan, assumptions)))
    return out


def zero3_summary(rows: list[Zero3Row]) -> ErrorSummary:
    """The TFLOP/s errors of the ZeRO-3 rows against ``ZERO3_BAND``."""
    return ErrorSummary(tuple(r.error for r in rows), ZERO3_BAND)


def zero3_scaling(rows: list[Zero3Row], params_b: float = 174.6) -> tuple[float, float]:
    """(measured, predicted) TFLOP/s per GPU at the most GPUs of ``params_b``'s rows over that at
    the fewest: the published x0.31 for GPT-3 175B from 384 to 1,536 GPUs."""
    mine = sorted((r for r in rows if r.params_b == params_b), key=lambda r: r.gpus)
    return mine[-1].measured / mine[0].measured, mine[-1].predicted / mine[0].predicted


# -- calibration and validation apart --------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    """One published measurement beside the model's prediction: where it comes from, what is
    compared, its ``sample`` ('calibration': a number of the model was set on it; 'validation': none
    was, ``specs.calibration.sample_of``), and for throughput rows the step-time error
    (predicted step / measured step - 1; negative: the model is optimistic). ``in_band_rule``: the
    row is one of those ``STEP_TIME_BAND`` is derived from."""

    source: str
    run: str
    compared: str
    measured: float
    predicted: float
    band: str
    sample: str
    step_error: float | None = None
    in_band_rule: bool = False
    estimate: Estimate | None = field(default=None, repr=False, compare=False)

    @property
    def error(self) -> float:
        """(predicted - measured) / measured, in the compared quantity."""
        return self.predicted / self.measured - 1

    @property
    def measured_mfu(self) -> float | None:
        """The MFU the measured run reached: the estimate's model FLOPs over the measured step (None
        for a memory row)."""
        if self.step_error is None or self.estimate is None:
            return None
        return self.estimate.mfu * (1 + self.step_error)


def samples(assumptions: Assumptions = DEFAULT) -> list[Sample]:
    """Every published row the model is checked against, classified calibration or validation.

    The band rule (``derived_step_time_band``) takes the validation rows of production training runs'
    throughput: MT-NLG, BLOOM-176B and every priced row of ``published_runs.csv`` (MT-NLG is priced
    with the default assumptions, as ``answers.mtnlg`` does). BLOOM's prelude
    speed rows are validation rows reported beside them but left out of the rule: short exploratory
    runs of a stack in preparation (the chapter reads their memory, not their speed)."""
    t1, t2 = "Narayanan et al. 2021, Table 1", "Narayanan et al. 2021, Table 2"
    out = [Sample(t1, f"GPT {r.params_b:g}B, {r.gpus:,} GPUs, dp/tp/pp {r.dp}/{r.tp}/{r.pp}", "TFLOP/s per GPU",
                  r.measured, r.predicted, f"±{MEGATRON_BAND:.0%}",
                  sample_of("megatron2021_weak_scaling", {"params_b": f"{r.params_b:g}"}), r.measured / r.predicted - 1,
                  estimate=r.estimate)
           for r in megatron_table1(assumptions)]
    out += [Sample(t2, f"ZeRO-3 {r.params_b:g}B, {r.gpus:,} GPUs, micro-batch {r.micro_batch}", "TFLOP/s per GPU",
                   r.measured, r.predicted, f"±{ZERO3_BAND:.0%}",
                   sample_of("megatron2021_zero3", {"scheme": "zero3"}), r.measured / r.predicted - 1,
                   estimate=r.estimate)
            for r in megatron_zero3(assumptions)]
    bloom, prelude = bloom_table(assumptions), "BigScience BLOOM prelude (guide 2.3)"
    out += [Sample(prelude, f"{r.size}, {r.gpus} GPUs, dp/tp/pp {r.dp}/{r.tp}/{r.pp}", "peak GB per GPU",
                   r.measured_gb, r.predicted_gb, f"±{BLOOM_MEMORY_BAND:.0%}",
                   sample_of("bloom_prelude_experiments", {"gpus": str(r.gpus)})) for r in bloom]
    out += [Sample(prelude, f"{r.size}, {r.gpus} GPUs, dp/tp/pp {r.dp}/{r.tp}/{r.pp}", "TFLOP/s per GPU (BigScience's count)",
                   r.reported_tflops, round(r.predicted_tflops, 1), "none: exploratory, not in the band rule",
                   sample_of("bloom_prelude_experiments", {"gpus": str(r.gpus)}), r.reported_tflops / r.predicted_tflops - 1,
                   estimate=r.estimate)
            for r in bloom]
    out += [Sample("Smith et al. 2022 (MT-NLG), Sec. 2.4", f"530B, {r.gpus:,} GPUs, dp/tp/pp {r.dp}/8/35", "step time (s)",
                   r.step, r.estimate.step_time, f"±{STEP_TIME_BAND:.0%}",
                   sample_of("mtnlg2022_throughput", {"gpus": str(r.gpus)}), r.step_error, True, r.estimate)
            for r in mtnlg_rows()]
    out += [Sample(p.row["source"], p.run, p.row["unit"], p.measured, p.predicted, f"±{STEP_TIME_BAND:.0%}",
                   sample_of("published_runs", p.row), p.step_error, True, p.estimate)
            for p in published_runs(assumptions) if p.priced]
    paper = {0: 120, 1: 31.4, 2: 16.6, 3: 1.9}  # Rajbhandari et al. 2020, Figure 1
    out += [Sample("Rajbhandari et al. 2020, Figure 1", f"7.5B, 64 GPUs, ZeRO-{stage}", "model states GB per GPU",
                   paper[stage], gb, "the paper's rounding", "validation") for stage, gb in zero_paper_example().items()]
    return out


def _step_errors(rows: list[Sample], sample: str, band_rule_only: bool = False) -> tuple[float, ...]:
    return tuple(s.step_error for s in rows if s.step_error is not None and s.sample == sample
                 and (s.in_band_rule or not band_rule_only))


def in_sample_summary(rows: list[Sample] | None = None) -> ErrorSummary:
    """Step-time errors of the calibration rows (Table 1, the ZeRO-3 rows of Table 2): how well the
    model reproduces what it was set on, against ``STEP_TIME_BAND``."""
    return ErrorSummary(_step_errors(samples() if rows is None else rows, "calibration"), STEP_TIME_BAND)


def out_of_sample_summary(rows: list[Sample] | None = None, band_rule_only: bool = True) -> ErrorSummary:
    """Step-time errors of the validation rows: those of the band rule (default), or every one
    (``band_rule_only=False``: BLOOM's exploratory prelude runs too)."""
    return ErrorSummary(_step_errors(samples() if rows is None else rows, "validation", band_rule_only),
                        STEP_TIME_BAND)


def derived_step_time_band(rows: list[Sample] | None = None) -> float:
    """The rule ``STEP_TIME_BAND`` follows: the largest absolute step-time error of the validation
    rows of the band rule (``samples``), rounded up to the next 5%."""
    errors = _step_errors(samples() if rows is None else rows, "validation", band_rule_only=True)
    return math.ceil(round(max(abs(e) for e in errors) / 0.05, 9)) * 0.05


# -- the README's table ----------------------------------------------------------------------------
def validation_rows(assumptions: Assumptions = DEFAULT) -> list[list[str]]:
    """Every published run the model is checked against, one row each: source, run, what is
    compared, measured, predicted, signed error, the band the tests hold it to and its set
    (calibration or validation)."""
    return [[s.source, s.run, s.compared, f"{s.measured:g}", f"{s.predicted:.1f}", f"{s.error:+.1%}", s.band,
             s.sample] for s in samples(assumptions)]


def readme_table(assumptions: Assumptions = DEFAULT) -> str:
    """``validation_rows`` as the Markdown table the README shows (tests/test_costmodel_validation.py
    checks that the README holds exactly this)."""
    headers = ["source", "run", "compared", "measured", "predicted", "error", "band", "set"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in validation_rows(assumptions)]
    return "\n".join(lines)


__all__ = [
    "MEGATRON_TABLE1_RUNS", "ZERO3_BAND", "BloomRow", "ErrorSummary", "MegatronRow", "Sample", "VsMeasured",
    "Zero3Row", "bigscience_tflops", "bloom_model", "bloom_rows", "bloom_summary", "bloom_table",
    "derived_step_time_band", "in_sample_summary", "megatron_model", "megatron_rows", "megatron_summary",
    "megatron_table1", "megatron_zero3", "out_of_sample_summary", "readme_table", "samples", "validation_rows",
    "zero3_scaling", "zero3_summary", "zero_paper_example",
]
