"""Expert parallelism: the experts of an MoE layer split over the EP ranks, tokens sent to their
experts and back by all-to-all (GShard, Lepikhin et al. 2020, Sec. 3.2 and Fig. 3; Megatron-Core's
``MoEAlltoAllTokenDispatcher``), on any parlab communicator.

Rank r of ep holds experts r E/ep .. (r+1) E/ep - 1 and its own b/ep sequences (EP inside the
data-parallel group). Per MoE layer and micro-batch:

    route        its T tokens: (E, C, h) buffer, C = ceil(c T k / E)          local
    dispatch     (E, C, h) = (ep, E/ep, C, h): block j to rank j              all-to-all
    experts      (E/ep, ep C, h): its experts on every rank's slots          local, batched
    combine      block i of the outputs back to rank i: (E, C, h)            all-to-all
    gates        y_t = sum_j g_tj E_{e_tj}(x_t)                               local

The backward runs the two all-to-alls again (the gradient of an all-to-all is the all-to-all of
the gradient): 4 per layer and step, each sending (ep - 1)/ep of the E C h buffer, which is
``parlab.costmodel.pricing.expert_parallel.all_to_all_bytes_per_layer``. With the same tokens on the same
ranks the routing is the serial ``MoE``'s with groups = ep, so the outputs and gradients are too.
"""

from __future__ import annotations

import torch
from torch import nn

from parlab.costmodel.pricing.expert_parallel import check_ep

from ..agree import agree, digest
from ..tensor_parallel.split_backward import communicated
from .experts import GroupedExperts, combine, dispatch
from .layer import MoE


class _AllToAll(torch.autograd.Function):
    """Block j (dim 0) of x to rank j, block i of the result from rank i; backward: the same."""

    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return comm.all_to_all(x.contiguous())

    @staticmethod
    def backward(ctx, grad):
        return communicated(ctx, lambda: ctx.comm.all_to_all(grad.contiguous())), None


def all_to_all(x: torch.Tensor, comm) -> torch.Tensor:
    """The all-to-all of ``x`` (dim 0 in comm.world_size blocks) as an autograd operator
    (Megatron-Core's ``tensor_parallel.mappings.all_to_all``); the identity on one rank."""
    return x if comm.world_size == 1 else _AllToAll.apply(x, comm)


class ExpertParallelMoE(MoE):
    """An ``MoE`` whose routed experts are split over the ranks of ``comm`` (the EP group): this
    rank's E/ep of them, copied from ``serial`` (a MoE built with the same spec and seed on every
    rank); the router and the shared experts are replicated, like the dense layers. Built
    collectively: the ranks compare a CRC-32 of the replicated weights (``agree``), and a
    ``serial`` that differs between ranks is refused (``CollectiveMismatch``)."""

    def __init__(self, serial: MoE, comm):
        if not isinstance(serial, MoE) or isinstance(serial, ExpertParallelMoE):
            raise TypeError(f"serial must be a parlab MoE layer, got {type(serial).__name__}")
        spec, hidden = serial.spec, serial.router.in_features
        ep = check_ep(spec, comm.world_size)
        super().__init__(spec, hidden, 1, serial.aux_loss_coef)
        self.comm, self.ep = comm, ep
        self.local = spec.num_experts // ep
        self.load_state_dict({k: v for k, v in serial.state_dict().items() if not k.startswith("experts.")},
                             strict=False)
        self.experts = GroupedExperts(self.local, hidden, spec.expert_ffn).slice_(
            serial.experts, comm.rank * self.local)
        replicated = [p for n, p in self.named_parameters() if not n.startswith("experts.")]
        agree(comm, "ExpertParallelMoE (build the serial MoE with the same seed on every rank)",
              {"router and shared-expert weights (CRC-32)": digest(replicated)})

    @property
    def first_expert(self) -> int:
        return self.comm.rank * self.local

    def _run_experts(self, buffers: torch.Tensor) -> torch.Tensor:
        """(1, E, C, h), this rank's tokens -> dispatch, local experts, combine -> (1, E, C, h)."""
        _, e, c, h = buffers.shape
        sent = all_to_all(buffers.view(e, c, h), self.comm)  # (ep, E/ep, C, h): block i from rank i
        mine = sent.view(self.ep, self.local, c, h).transpose(0, 1).reshape(self.local, self.ep * c, h)
        y = self.experts(mine)  # (E/ep, ep C, h)
        back = y.view(self.local, self.ep, c, h).transpose(0, 1).reshape(e, c, h)  # block j to rank j
        return all_to_all(back, self.comm).unsqueeze(0)  # (1, E, C, h): every expert's outputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = self.check_input(x)
        xg = x.reshape(1, b * s, h)  # (1, T, h): this rank's tokens, one group
        routings = self._route(xg)
        y = self._run_experts(dispatch(xg[0], routings[0]).unsqueeze(0))
        return self._finish(x, xg, combine(y[0], routings[0]).unsqueeze(0), routings)


def expert_parallel(model: nn.Module, comm) -> nn.Module:
    """``model`` with every ``MoE`` layer replaced (in place) by its ``ExpertParallelMoE`` on
    ``comm``; returns the model."""
    for module in list(model.modules()):
        for child, sub in list(module.named_children()):
            if type(sub) is MoE:
                setattr(module, child, ExpertParallelMoE(sub, comm))
    return model


def is_expert_param(name: str) -> bool:
    """Whether parameter ``name`` is a routed expert's (held by one EP rank, not replicated)."""
    return ".experts." in f".{name}"


def finalize_grads(model: nn.Module, comm) -> int:
    """After backward on every EP rank: the replicated parameters' gradients averaged over the
    ranks (data parallelism), the routed experts' divided by ep, since each expert's gradient
    already sums the ranks' tokens that reached it (Megatron-Core ``finalize_model_grads``, the
    expert-data-parallel group being one rank here). Returns the all-reduces made."""
    calls = 0
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        if is_expert_param(name):
            p.grad.div_(comm.world_size)
        elif comm.world_size > 1:
            p.grad.copy_(comm.all_reduce(p.grad.contiguous()))
            p.grad.div_(comm.world_size)
            calls += 1
    return calls
