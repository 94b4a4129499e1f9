"""Expert parallelism (mixture of experts; chapter 13, beyond the guide): top-k routing with a
capacity and the load-balancing loss, experts split over the EP ranks, tokens moved by all-to-all.
The shapes and their costs are ``parlab.costmodel.pricing.expert_parallel`` (``MoESpec``).

    router.py          top-k gating, capacity slots, Switch Transformer's auxiliary loss
    experts.py         E expert MLPs run batched; dispatch to and combine from their buffers
    layer.py           MoE: the serial layer (routing groups, shared experts, aux-loss gradient)
    parallel_layer.py  ExpertParallelMoE, the autograd all-to-all, finalize_grads
    model.py           MoEGPT, expert_parallel_step, train_expert_parallel, drops_vs_capacity
"""

from .experts import GroupedExperts, combine, dispatch
from .layer import AUX_LOSS_COEF, MoE, MoEStats
from .model import (
    DropRow,
    ExpertParallelRun,
    MoEGPT,
    drops_vs_capacity,
    expert_parallel_step,
    train_expert_parallel,
)
from .parallel_layer import (
    ExpertParallelMoE,
    all_to_all,
    expert_parallel,
    finalize_grads,
    is_expert_param,
)
from .router import Routing, load_balancing_loss, route

__all__ = [
    "Routing", "load_balancing_loss", "route", "GroupedExperts", "combine", "dispatch",
    "AUX_LOSS_COEF", "MoE", "MoEStats", "ExpertParallelMoE", "all_to_all", "expert_parallel",
    "finalize_grads", "is_expert_param", "DropRow", "ExpertParallelRun", "MoEGPT",
    "drops_vs_capacity", "expert_parallel_step", "train_expert_parallel",
]
