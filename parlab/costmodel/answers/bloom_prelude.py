"""BLOOM's preparation runs (guide 2.3; ``parlab/data/bloom_prelude_experiments.csv``): the peak memory
per GPU BigScience measured and the TFLOP/s they computed with their own formula, beside the model's."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.answers.errors import ErrorSummary
from parlab.costmodel.answers.published_runs import bigscience_tflops
from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.bands import BLOOM_MEMORY_BAND
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.models import ModelSpec
from parlab.data import read_csv

FILE = "bloom_prelude_experiments"


def bloom_model(layers: int, heads: int) -> ModelSpec:
    """A BLOOM-preparation shape: hidden 14400, ALiBi (no position table), embedding LayerNorm.

    GPT's block as Korthikanti et al. 2022, Table 2 counts it (GeLU 4h, LayerNorm with biases,
    dropout masks): Megatron-DeepSpeed's fused softmax, no FlashAttention (which appeared in May
    2022, after these February 2022 runs)."""
    return ModelSpec(f"bloom-prelude-{layers}l", layers, 14400, heads, 2048, 250880, bias=True, learned_pos=False,
                     tied_embeddings=True, embedding_norm=True,
                     source="BigScience tr11-176B-ml chronicles-prequel (2022-02-17)")


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
    for r in read_csv(FILE):
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
