"""Guide 1.12, "one GPU cannot hold the model": the naive layer split beside the other ways out, each
priced by the cost model on the same GPUs and batch (chapter 04)."""

from __future__ import annotations

from parlab.costmodel.plan.estimate import Estimate, estimate
from parlab.costmodel.plan.spec import Plan
from parlab.costmodel.specs.cluster import make_cluster


def too_big_options(model: str = "llama-13b", gpus: int = 8, global_batch: int = 32,
                    kind: str = "dgx-a100") -> dict[str, Estimate]:
    """The same model and global batch, full recomputation everywhere, five ways: the naive split
    (``gpus`` pipeline stages, one micro-batch: Huang et al. 2019's starting point), the same stages
    with micro-batches (1F1B), tensor parallelism over the node, ZeRO-3 (FSDP) data parallelism, and
    one GPU with its optimizer offloaded to the CPU (ZeRO-Offload, Ren et al. 2021)."""
    many, one = make_cluster(kind, gpus), make_cluster(kind, 1)
    common = dict(global_batch=global_batch, recompute="full")
    plans = {
        "naive split (pp, 1 micro-batch)": (many, Plan(pp=gpus, micro_batch=global_batch, **common)),
        "pipeline, 1F1B micro-batches": (many, Plan(pp=gpus, micro_batch=1, **common)),
        "tensor parallel (TP in the node)": (many, Plan(tp=gpus, micro_batch=1, **common)),
        "ZeRO-3 / FSDP data parallel": (many, Plan(dp=gpus, zero=3, micro_batch=1, **common)),
        "1 GPU, optimizer offloaded": (one, Plan(zero=2, offload="optimizer", micro_batch=1, **common)),
    }
    return {label: estimate(model, cluster, plan) for label, (cluster, plan) in plans.items()}
