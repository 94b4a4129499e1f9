"""Chapter 13's scenarios, priced by ``estimate``: memory per GPU as the sequence grows for each
context-parallel degree, and the two published MoE models on their layouts (Mixtral 8x7B on 64
H100s, DeepSeek-V3 on its own 2,048-GPU layout: 16-way PP, 64-way EP, ZeRO-1; DeepSeek-AI 2024,
Sec. 3.2). Pure Python, as the rest of the cost model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.catalogue import get_model
from parlab.costmodel.specs.cluster import make_cluster
from parlab.costmodel.specs.models import ModelSpec


def cp_plan(n_gpus: int, cp: int, tp: int = 1, ep: int = 1, cp_impl: str = "ring", recompute: str = "selective",
            micro_batches: int = 8) -> Plan:
    """The chapter's 5D plan on ``n_gpus``: dp = n / (tp cp), pp = 1, ZeRO-1, micro-batch 1, SP
    with tp > 1 (the dashboard's, ``widgets.beyond_3d``)."""
    return Plan(dp=n_gpus // (tp * cp), tp=tp, cp=cp, cp_impl=cp_impl, ep=ep, sequence_parallel=tp > 1, zero=1,
                micro_batches=micro_batches, recompute=recompute)


def memory_vs_sequence(model: str | ModelSpec, seq_lens: Sequence[int], cps: Sequence[int], n_gpus: int = 8,
                       cluster: str = "dgx-h100", tp: int = 1) -> dict[int, list[Estimate]]:
    """Per cp, the estimate of ``cp_plan`` at each sequence length (memory per GPU falls as 1/cp in
    its activations, the model states stay: CP ranks hold whole weights)."""
    spec, machines = get_model(model), make_cluster(cluster, n_gpus)
    return {cp: [estimate(spec.with_(seq_len=s), machines, cp_plan(n_gpus, cp, tp)) for s in seq_lens] for cp in cps}


@dataclass(frozen=True)
class MoEPricing:
    """One MoE model on one layout: its parameters (total, active per token) and the estimate."""

    name: str
    layout: str
    estimate: Estimate

    @property
    def total_params(self) -> float:
        return float(self.estimate.model.num_params())

    @property
    def active_params(self) -> float:
        return float(self.estimate.model.active_params())

    @property
    def expert_params_per_gpu(self) -> float:
        """Routed-expert parameters of the GPU that holds the most (the last pipeline stage, whose
        layers are all MoE layers; the first also holds the dense first layers)."""
        from parlab.costmodel.pricing.moe_layer import stage_param_split

        e = self.estimate
        return max(stage_param_split(e.model, e.plan.tp, e.plan.pp, stage, e.plan.ep)[1] for stage in ("first", "last"))

    @property
    def ep_share(self) -> float:
        """The EP all-to-alls' share of the step time."""
        return self.estimate.time.ep_comm / self.estimate.step_time


#: DeepSeek-V3's layout from its report (DeepSeek-AI 2024, Sec. 3.2 and 4.2): pp 16, ep 64 over 8
#: nodes, ZeRO-1 data parallelism, batch 15,360 sequences of 4,096 tokens; full recomputation is
#: what lets it fit in parlab's count (the report recomputes only RMSNorm and MLA's
#: up-projections, Sec. 3.2.3, which ``ModelSpec`` cannot describe: no latent widths). Priced with
#: 1F1B: DualPipe is not a ``Plan`` schedule (chapter 13 simulates its bubble on its own).
V3_PLAN = Plan(dp=128, pp=16, ep=64, zero=1, global_batch=15360, recompute="full")


def deepseek_v3_h800() -> list[MoEPricing]:
    """DeepSeek-V3 on its own cluster: 2,048 H800s, 8 a node on the H800's NVLink (160 GB/s achieved)
    and one 400 Gb/s InfiniBand port per GPU (``make_cluster("h800-ndr")``, report Sec. 3.1 and
    3.2.2), in the report's layout (``V3_PLAN``),
    in bf16 and in FP8 with the report's fine-grained recipe (Sec. 3.3, ``deepseek-blockwise``)."""
    cluster = make_cluster("h800-ndr", 2048)
    fp8 = V3_PLAN.with_(dtype="fp8", fp8_recipe="deepseek-blockwise")
    return [MoEPricing("deepseek-v3", "2,048 x H800, " + p.describe(), estimate("deepseek-v3", cluster, p))
            for p in (V3_PLAN, fp8)]


def moe_pricing() -> list[MoEPricing]:
    """Mixtral 8x7B (Jiang et al. 2024) on 64 H100s, tp 2 x ep 8 with SP, and DeepSeek-V3 on
    2,048 H100s in its report's layout (pp 16, ep 64, ZeRO-1 data parallelism, batch 15,360 of
    4,096 tokens: DeepSeek-AI 2024, Sec. 3.2 and 4.2), bf16, with the recomputation each needs to fit."""
    mixtral = Plan(dp=32, tp=2, ep=8, sequence_parallel=True, zero=1, micro_batches=8, recompute="selective")
    v3 = V3_PLAN
    return [MoEPricing("mixtral-8x7b", "64 x H100, " + mixtral.describe(),
                       estimate("mixtral-8x7b", make_cluster("dgx-h100", 64), mixtral)),
            MoEPricing("deepseek-v3", "2,048 x H100, " + v3.describe(),
                       estimate("deepseek-v3", make_cluster("dgx-h100", 2048), v3))]
