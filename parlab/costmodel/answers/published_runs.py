"""Published runs the model was not set on (``parlab/data/published_runs.csv``), priced where it can.

Each row keeps its exact layout and its source; the rows the model cannot price yet say why in
their ``priced`` column (FP8, dense GQA, uneven pipeline stages, context parallelism), and the rest
are estimated here and join ``answers.validation``'s out-of-sample set.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.links import LinkSpec, custom_link
from parlab.costmodel.specs.models import ModelSpec
from parlab.data import read_csv

FILE = "published_runs"

#: links of the published clusters that are not presets: Jean Zay's Omni-Path, 100 Gb/s per port
#: (GENCI; latency and efficiency as chapter 08 prices BLOOM-176B: 5 us, 90%)
LINKS: dict[str, LinkSpec] = {"omni-path": custom_link(100, latency_us=5, efficiency=0.9, name="omni-path")}

#: models of the file that are not presets: MosaicML's MPT as its benchmark configs build it
#: (mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-7b.yaml, mpt-13b.yaml, mpt-30b.yaml: no biases,
#: no dropout, flash/triton attention, tied embeddings, vocab 50368, a learned position table)
_MPT = dict(bias=False, learned_pos=True, tied_embeddings=True, dropout=False, flash_attention=True,
            source="mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml")
MODELS: dict[str, ModelSpec] = {
    "mpt-7b": ModelSpec("mpt-7b", 32, 4096, 32, 2048, 50368, **_MPT),
    "mpt-13b": ModelSpec("mpt-13b", 40, 5120, 40, 2048, 50368, **_MPT),
    "mpt-30b": ModelSpec("mpt-30b", 48, 7168, 56, 2048, 50368, **_MPT),
}

#: the cluster kind whose node (GPU, links inside) each GPU of the file sits in
_NODE = {"a100-80gb": "dgx-a100", "h100-sxm": "dgx-h100"}


def bigscience_tflops(non_embedding_params: float, seconds: float, gpus: int, batch: int = 2048,
                      seq: int = 2048) -> float:
    """TFLOP/s per GPU the way the BLOOM table computed it: params x 4 x 2 x seq x batch /
    (time x GPUs) - four passes (forward, recompute, backward x 2) of 2 FLOPs per parameter per
    token, no attention-score or logit FLOPs."""
    return non_embedding_params * 4 * 2 * seq * batch / (seconds * gpus) / 1e12


@dataclass(frozen=True)
class PublishedRun:
    """One row of the file: its columns, and the model's estimate where the row is priced (None:
    ``refused`` says why)."""

    row: dict[str, str]
    estimate: Estimate | None

    @property
    def run(self) -> str:
        return self.row["run"]

    @property
    def priced(self) -> bool:
        return self.estimate is not None

    @property
    def refused(self) -> str:
        """Why the model cannot price the row yet ('' when it can)."""
        return "" if self.priced else self.row["priced"].removeprefix("no:").strip()

    @property
    def measured(self) -> float:
        return float(self.row["measured"])

    @property
    def predicted(self) -> float:
        """Predicted throughput in the row's unit: tokens/s per GPU, BigScience's count (8 x
        non-embedding params x tokens) for BLOOM, model TFLOP/s per GPU otherwise."""
        est = self._priced()
        if self.row["unit"] == "tokens/s per GPU":
            return est.tokens_per_s / est.plan.n_gpus
        if "BigScience" in self.row["unit"]:
            return bigscience_tflops(est.model.non_embedding_params(), est.step_time, est.plan.n_gpus,
                                     est.plan.batch, est.model.seq_len)
        return est.model_tflops_per_gpu

    @property
    def step_error(self) -> float:
        """Predicted step time / measured - 1 (= measured / predicted throughput - 1; negative: the
        model is optimistic)."""
        return self.measured / self.predicted - 1

    def _priced(self) -> Estimate:
        if self.estimate is None:
            raise ValueError(f"published run {self.run!r} is not priced: {self.refused}")
        return self.estimate


def published_plan(row: dict[str, str]) -> Plan:
    """The row's plan, as its source states it (ZeRO 0 and no recompute where it says nothing)."""
    vp = int(row["vp"] or 1)
    return Plan(dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]), cp=int(row["cp"] or 1),
                zero=int(row["zero"] or 0), zero3_impl=row["zero3_impl"] or "deepspeed", micro_batch=int(row["micro_batch"]),
                global_batch=int(row["global_batch"]), recompute=row["recompute"] or "none",
                dtype=row["dtype"], fp32_grads=row["fp32_grads"] == "yes",
                schedule="interleaved" if vp > 1 else "1f1b", chunks=vp)


def published_runs(assumptions: Assumptions = DEFAULT) -> list[PublishedRun]:
    """Every row of the file, estimated where its ``priced`` column says 'yes'."""
    out = []
    for r in read_csv(FILE):
        est = None
        if r["priced"] == "yes":
            inter = None if r["inter"] == "-" else LINKS.get(r["inter"], r["inter"])  # '-': one node
            cluster = make_cluster(_NODE[r["gpu"]], int(r["gpus"]), intra=r["intra"], inter=inter,
                                   nics_per_node=int(r["nics_per_node"]))
            model = MODELS.get(r["model"]) or get_model(r["model"])
            if model.seq_len != int(r["seq_len"]):
                model = model.with_(seq_len=int(r["seq_len"]))
            est = estimate(model, cluster, published_plan(r), assumptions)
        out.append(PublishedRun(r, est))
    return out
