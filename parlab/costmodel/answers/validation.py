"""How far to trust the cost model: its predictions next to published measurements.

* Megatron-LM 2021, Table 1 (``parlab.data`` megatron2021_weak_scaling): TFLOP/s per GPU on
  Selene for ten GPT models from 1.7B to 1T parameters, one set of A100 defaults for all rows.
* BLOOM's preparation runs (bloom_prelude_experiments, guide 2.3): peak memory per GPU and the
  TFLOP/s BigScience computed with their own formula.
* Megatron-LM 2021, Table 2 (megatron2021_zero3, megatron2021_zero3_530b): TFLOP/s per GPU of
  ZeRO-3 without model parallelism, GPT-3 175B and 530B, 384 to 2,240 GPUs.
* The ZeRO paper's worked example (7.5B parameters on 64 GPUs).

``STEP_TIME_BAND`` is the one error band every verdict against the guide uses (``margin_verdict``);
``readme_table`` is the README's list of every run above with its error.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.memory.zero import zero_model_states
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.search.ranking import search
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.bands import BLOOM_MEMORY_BAND, MEGATRON_BAND
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.models import ModelSpec
from parlab.data import read_csv

#: micro-batch size and interleaving (v = layers / pp / layers-per-virtual-stage) of each Table 1
#: row, which the paper does not print: NVIDIA/Megatron-LM examples/sc21/run_table_1.sh.
MEGATRON_TABLE1_RUNS: dict[float, tuple[int, int]] = {
    1.7: (16, 1), 3.6: (16, 1), 7.5: (16, 1), 18.4: (8, 1), 39.1: (4, 1), 76.1: (2, 3),
    145.6: (2, 2), 310.1: (1, 2), 529.6: (1, 3), 1008.0: (1, 1),
}


class _VsMeasured:
    """A row's predicted TFLOP/s per GPU (its ``estimate``) and the signed relative error against
    its ``measured`` TFLOP/s per GPU: (predicted - measured) / measured."""

    estimate: Estimate
    measured: float

    @property
    def predicted(self) -> float:
        return self.estimate.hardware_tflops_per_gpu

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return self.predicted / self.measured - 1


@dataclass(frozen=True)
class MegatronRow(_VsMeasured):
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


def megatron_model(row: dict[str, str]) -> ModelSpec:
    """The GPT model of a Table 1 row (seq 2048, vocab 51200): GPT's block of Table 2 (dropout, no
    FlashAttention, which postdates the 2021 runs)."""
    return ModelSpec(f"gpt-{row['params_b']}b", int(row["layers"]), int(row["hidden"]), int(row["heads"]),
                     2048, 51200, source="Narayanan et al. 2021, Table 1")


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


@dataclass(frozen=True)
class ErrorSummary:
    """How a set of predictions misses its measurements: the signed relative errors, how many are
    high, their mean (the bias) and the largest in size, against the ``band`` the tests hold."""

    errors: tuple[float, ...]
    band: float

    @property
    def n(self) -> int:
        return len(self.errors)

    @property
    def high(self) -> int:
        """How many predictions are above their measurement."""
        return sum(e > 0 for e in self.errors)

    @property
    def mean(self) -> float:
        """Mean signed error: the systematic part (a bias), as opposed to scatter."""
        return sum(self.errors) / self.n

    @property
    def worst(self) -> float:
        """The signed error of largest size."""
        return max(self.errors, key=abs)

    @property
    def within_band(self) -> bool:
        return all(abs(e) < self.band for e in self.errors)

    def describe(self, what: str) -> str:
        inside = "all within" if self.within_band else "NOT all within"
        return (f"{what}: {self.high} of {self.n} predictions high, mean error {self.mean:+.1%}, "
                f"largest {self.worst:+.1%}; {inside} the tested ±{self.band:.0%}")


def megatron_summary(rows: list[MegatronRow], advised: bool = False) -> ErrorSummary:
    """The errors of Table 1 (with the published micro-batch and schedule, or the advisor's)."""
    return ErrorSummary(tuple(r.advised_error if advised else r.error for r in rows), MEGATRON_BAND)


# -- BLOOM (guide 2.3) ----------------------------------------------------------------------------
def bloom_model(layers: int, heads: int) -> ModelSpec:
    """A BLOOM-preparation shape: hidden 14400, ALiBi (no position table), embedding LayerNorm.

    GPT's block as Korthikanti et al. 2022, Table 2 counts it (GeLU 4h, LayerNorm with biases,
    dropout masks): Megatron-DeepSpeed's fused softmax, no FlashAttention (which appeared in May
    2022, after these February 2022 runs)."""
    return ModelSpec(f"bloom-prelude-{layers}l", layers, 14400, heads, 2048, 250880, bias=True, learned_pos=False,
                     tied_embeddings=True, embedding_norm=True,
                     source="BigScience tr11-176B-ml chronicles-prequel (2022-02-17)")


def bigscience_tflops(non_embedding_params: float, seconds: float, gpus: int, batch: int = 2048,
                      seq: int = 2048) -> float:
    """TFLOP/s per GPU the way the BLOOM table computed it: params x 4 x 2 x seq x batch /
    (time x GPUs) - four passes (forward, recompute, backward x 2) of 2 FLOPs per parameter per
    token, no attention-score or logit FLOPs."""
    return non_embedding_params * 4 * 2 * seq * batch / (seconds * gpus) / 1e12


@dataclass(frozen=True)
class BloomRow:
    gpus: int
    size: str
    dp: int
    tp: int
    pp: int
    measured_gb: float
    reported_tflops: float
    seconds: float
    estimate: Estimate

    @property
    def predicted_gb(self) -> float:
        return self.estimate.memory_total / 1e9

    @property
    def memory_error(self) -> float:
        return self.predicted_gb / self.measured_gb - 1

    @property
    def recomputed_tflops(self) -> float:
        """BigScience's formula applied to their measured time: should equal the reported value."""
        return bigscience_tflops(self.estimate.model.non_embedding_params(), self.seconds, self.gpus)

    @property
    def predicted_tflops(self) -> float:
        """BigScience's formula applied to our predicted step time."""
        return bigscience_tflops(self.estimate.model.non_embedding_params(), self.estimate.step_time, self.gpus)

    @property
    def predicted_seconds(self) -> float:
        return self.estimate.step_time

    @property
    def flops_ratio(self) -> float:
        """FLOPs the GPUs really execute per step (Eq. 3 with recomputation: attention scores and
        the logits over a 250k vocabulary included) / the FLOPs BigScience's formula counts."""
        counted = self.estimate.model.non_embedding_params() * 4 * 2 * self.estimate.model.seq_len * 2048
        return self.estimate.flops[1] / counted

    @property
    def deepspeed_bf16_extra_gb(self) -> float:
        """What DeepSpeed's bf16 optimizer of early 2022 kept on top of our accounting: the bf16
        gradients beside the fp32 ones (2 B/param) and an un-partitioned fp32 master copy
        (4 (1 - 1/dp) B/param): deepspeed/runtime/bf16_optimizer.py of the time keeps a full fp32 copy
        and marks tracking only this partition's fp32 parameters as still to do."""
        return self.estimate.stage.params * (2 + 4 * (1 - 1 / self.dp)) / 1e9


def bloom_table(assumptions: Assumptions = DEFAULT) -> list[BloomRow]:
    """The three BLOOM preparation runs: A100 80GB, bf16 with fp32 gradient accumulation
    (DeepSpeed's bf16 optimizer), ZeRO-1, micro-batch 1, global batch 2048, full recompute."""
    rows = []
    for r in read_csv("bloom_prelude_experiments"):
        dp, tp, pp, n = int(r["dp"]), int(r["tp"]), int(r["pp"]), int(r["gpus"])
        plan = Plan(dp=dp, tp=tp, pp=pp, zero=1, micro_batch=int(r["micro_batch"]), global_batch=2048,
                    recompute="full", dtype="bf16", fp32_grads=True)
        est = estimate(bloom_model(int(r["layers"]), int(r["heads"])), make_cluster("dgx-a100", n), plan,
                       assumptions)
        rows.append(BloomRow(n, r["size"], dp, tp, pp, float(r["mem_gb"]), float(r["tflops_per_gpu"]),
                             float(r["seconds_per_iteration"]), est))
    return rows


def bloom_rows(rows: list[BloomRow]) -> tuple[list[list[object]], list[str]]:
    out = [[r.gpus, r.size, f"{r.dp}/{r.tp}/{r.pp}", r.measured_gb, round(r.predicted_gb, 1),
            f"{r.memory_error:+.1%}", r.reported_tflops, round(r.recomputed_tflops, 2),
            round(r.predicted_tflops, 1)] for r in rows]
    headers = ["GPUs", "size", "dp/tp/pp", "mem (GB)", "predicted", "error", "TFLOP/s reported",
               "recomputed", "predicted"]
    return out, headers


def bloom_summary(rows: list[BloomRow]) -> ErrorSummary:
    """The peak-memory errors of the BLOOM rows."""
    return ErrorSummary(tuple(r.memory_error for r in rows), BLOOM_MEMORY_BAND)


# -- ZeRO paper ---------------------------------------------------------------------------------
def zero_paper_example(n_params: float = 7.5e9, dp: int = 64) -> dict[int, float]:
    """GB of model states per GPU for ZeRO stages 0-3: the paper's 7.5B / 64-GPU example
    (Rajbhandari et al. 2020, Figure 1): 120, 31.4, 16.6, 1.9."""
    return {stage: zero_model_states(n_params, dp, stage).total / 1e9 for stage in range(4)}


# -- ZeRO-3 at scale (guide 1.17) ---------------------------------------------------------------
#: The band the tests hold the ZeRO-3 rows of Narayanan et al. 2021 Table 2 to (issue 19, item 11).
ZERO3_BAND = 0.15


@dataclass(frozen=True)
class Zero3Row(_VsMeasured):
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


# -- the README's table ----------------------------------------------------------------------------
def validation_rows(assumptions: Assumptions = DEFAULT) -> list[list[str]]:
    """Every published run the model is checked against, one row each: source, run, what is
    compared, measured, predicted, signed error and the band the tests hold it to."""
    out = []
    for r in megatron_table1(assumptions):
        out.append(["Narayanan et al. 2021, Table 1", f"GPT {r.params_b:g}B, {r.gpus:,} GPUs, dp/tp/pp "
                    f"{r.dp}/{r.tp}/{r.pp}", "TFLOP/s per GPU", f"{r.measured:g}", f"{r.predicted:.1f}",
                    f"{r.error:+.1%}", f"±{MEGATRON_BAND:.0%}"])
    for r in megatron_zero3(assumptions):
        out.append(["Narayanan et al. 2021, Table 2", f"ZeRO-3 {r.params_b:g}B, {r.gpus:,} GPUs, micro-batch "
                    f"{r.micro_batch}", "TFLOP/s per GPU", f"{r.measured:g}", f"{r.predicted:.1f}",
                    f"{r.error:+.1%}", f"±{ZERO3_BAND:.0%}"])
    for r in bloom_table(assumptions):
        out.append(["BigScience BLOOM prelude (guide 2.3)", f"{r.size}, {r.gpus} GPUs, dp/tp/pp {r.dp}/{r.tp}/{r.pp}",
                    "peak GB per GPU", f"{r.measured_gb:g}", f"{r.predicted_gb:.1f}", f"{r.memory_error:+.1%}",
                    f"±{BLOOM_MEMORY_BAND:.0%}"])
    paper = {0: 120, 1: 31.4, 2: 16.6, 3: 1.9}  # Rajbhandari et al. 2020, Figure 1
    for stage, gb in zero_paper_example().items():
        out.append(["Rajbhandari et al. 2020, Figure 1", f"7.5B, 64 GPUs, ZeRO-{stage}", "model states GB per GPU",
                    f"{paper[stage]:g}", f"{gb:.1f}", f"{gb / paper[stage] - 1:+.1%}", "the paper's rounding"])
    return out


def readme_table(assumptions: Assumptions = DEFAULT) -> str:
    """``validation_rows`` as the Markdown table the README shows (tests/test_costmodel_validation.py
    checks that the README holds exactly this)."""
    headers = ["source", "run", "compared", "measured", "predicted", "error", "band"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in validation_rows(assumptions)]
    return "\n".join(lines)
