"""A mixture-of-experts layer in place of TinyGPT's MLP, on one process (the serial reference).

    moe = MoE(spec, hidden=64, groups=2)      # spec: parlab.costmodel.pricing.expert_parallel.MoESpec
    y = moe(x)                                # x (b, s, h) -> (b, s, h); moe.stats: load, drops

The b s tokens are routed in ``groups`` groups along the batch (GShard's groups, Lepikhin et al.
2020, Sec. 2.2), each with its own capacity: the serial twin of expert parallelism over
``groups`` ranks, each holding b / groups sequences. ``spec.shared_experts`` experts see every
token and are added to the routed ones (DeepSeek-MoE's shared expert isolation, Dai et al. 2024,
Sec. 3.2); fine-grained experts are ``spec.fine_grained(m)`` (Sec. 3.1).

The auxiliary loss joins the gradient without joining the loss: the layer's output passes
through ``_AuxLossAutoScaler`` (Megatron-Core's ``MoEAuxLossAutoScaler``), whose backward adds
``aux_loss_coef * aux_scale`` times the gradient of the groups' mean aux loss, so the model's
forward and its loss stay TinyGPT's and any trainer (DDP, the pipeline executor) trains the
router to balance. Switch Transformer's coefficient alpha = 0.01 (Fedus et al. 2022, Sec. 2.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from parlab.costmodel.specs.moe import MoESpec

from .experts import GroupedExperts, combine, dispatch
from .router import Routing, route

AUX_LOSS_COEF = 0.01  # Switch Transformer's alpha (Fedus et al. 2022, Sec. 2.2)


@dataclass(frozen=True)
class MoEStats:
    """What one forward routed: per group, the assignments sent to each expert (``load``, before
    drops), those past capacity (``dropped``), the slots per expert (``capacity``), and the mean
    auxiliary loss."""

    load: tuple[tuple[int, ...], ...]
    dropped: tuple[int, ...]
    capacity: int
    assignments: int  # per group: T k
    aux: float

    @property
    def drop_fraction(self) -> float:
        """Share of all (token, choice) assignments that were dropped."""
        return sum(self.dropped) / (self.assignments * len(self.dropped))

    @property
    def expert_load(self) -> tuple[int, ...]:
        """Assignments per expert, summed over the groups."""
        return tuple(sum(col) for col in zip(*self.load, strict=True))


class _AuxLossAutoScaler(torch.autograd.Function):
    """Identity on ``out``; its backward also sends ``scale`` as the gradient of ``aux``."""

    @staticmethod
    def forward(ctx, out, aux, scale: float):
        ctx.save_for_backward(aux)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad):
        (aux,) = ctx.saved_tensors
        return grad, torch.full_like(aux, ctx.scale), None


def check_spec(spec: object, hidden: int) -> MoESpec:
    """``spec`` if it is a MoESpec the runtime runs (TinyGPT's experts: GeLU with biases)."""
    if not isinstance(spec, MoESpec):
        raise TypeError(f"spec must be a parlab.costmodel.pricing.expert_parallel.MoESpec, got {spec!r}")
    if spec.gated or not spec.bias:
        raise ValueError(f"the runtime's experts are TinyGPT's MLP (GeLU, with biases): use "
                         f"MoESpec(gated=False, bias=True), got gated={spec.gated}, bias={spec.bias}")
    if not isinstance(hidden, int) or hidden < 1:
        raise ValueError(f"hidden must be a positive integer, got {hidden!r}")
    return spec


class MoE(nn.Module):
    """E routed experts (+ K_s shared) and a router h -> E, on one process, in ``groups``."""

    def __init__(self, spec: MoESpec, hidden: int, groups: int = 1, aux_loss_coef: float = AUX_LOSS_COEF):
        super().__init__()
        self.spec = check_spec(spec, hidden)
        if not isinstance(groups, int) or groups < 1:
            raise ValueError(f"groups must be a positive integer, got {groups!r}")
        self.groups, self.aux_loss_coef, self.aux_scale = groups, float(aux_loss_coef), 1.0
        self.router = nn.Linear(hidden, spec.num_experts, bias=False)
        self.experts = GroupedExperts(spec.num_experts, hidden, spec.expert_ffn)
        self.shared = GroupedExperts(spec.shared_experts, hidden, spec.expert_ffn) if spec.shared_experts else None
        self.stats: MoEStats | None = None
        self.routings: list[Routing] = []

    def init_(self, std: float, residual_std: float, generator: torch.Generator) -> None:
        """GPT-2's initialisation, as ``model.init_weights`` draws the MLP it replaces."""
        with torch.no_grad():
            self.router.weight.normal_(0.0, std, generator=generator)
        for experts in (self.experts, self.shared):
            if experts is not None:
                experts.init_(std, residual_std, generator)

    def _route(self, x: torch.Tensor) -> list[Routing]:
        """Route each group of x (G, T, h)."""
        self.routings = [route(self.router(xg), self.spec) for xg in x]  # (T, h) @ (h, E) each
        return self.routings

    def _run_experts(self, buffers: torch.Tensor) -> torch.Tensor:
        """(G, E, C, h) buffers of the G groups -> the experts' outputs, same shape."""
        g, e, c, h = buffers.shape
        y = self.experts(buffers.transpose(0, 1).reshape(e, g * c, h))  # (E, G C, h)
        return y.view(e, g, c, h).transpose(0, 1)

    def check_input(self, x: object) -> tuple[int, int, int]:
        """(b, s, h) if ``x`` is hidden states this layer takes: a (b, s, hidden) tensor of the
        router's dtype (any floating dtype under autocast, which casts the matmuls' inputs); else
        one ValueError naming the shapes or dtypes."""
        w = self.router.weight
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != w.shape[1]:
            got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"the MoE layer takes hidden states (batch, seq, hidden={w.shape[1]}), "
                             f"got {got}")
        if x.dtype != w.dtype and not torch.is_autocast_enabled(x.device.type):
            raise ValueError(f"the MoE layer's weights are {str(w.dtype).removeprefix('torch.')}, "
                             f"its input is {str(x.dtype).removeprefix('torch.')}: cast one to the other")
        return tuple(x.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = self.check_input(x)
        if b % self.groups:
            raise ValueError(f"the batch ({b} sequences) must split into groups={self.groups} "
                             f"equal groups (one per expert-parallel rank)")
        xg = x.reshape(self.groups, b // self.groups * s, h)  # (G, T, h)
        routings = self._route(xg)
        buffers = torch.stack([dispatch(t, r) for t, r in zip(xg, routings, strict=True)])
        y = self._run_experts(buffers)  # (G, E, C, h)
        out = torch.stack([combine(yg, r) for yg, r in zip(y, routings, strict=True)])  # (G, T, h)
        return self._finish(x, xg, out, routings)

    def _finish(self, x: torch.Tensor, xg: torch.Tensor, out: torch.Tensor,
                routings: list[Routing]) -> torch.Tensor:
        """Add the shared experts, attach the aux loss's gradient, record the stats."""
        if self.shared is not None:  # every token through each shared expert, summed
            n, (g, t, h) = self.shared.num_experts, xg.shape
            out = out + self.shared(xg.reshape(1, g * t, h).expand(n, -1, -1)).sum(0).view(g, t, h)
        aux = torch.stack([r.aux for r in routings]).mean()
        out = _AuxLossAutoScaler.apply(out.reshape(x.shape), aux, self.aux_loss_coef * self.aux_scale)
        self.stats = MoEStats(tuple(tuple(r.load()) for r in routings), tuple(r.dropped() for r in routings),
                              routings[0].capacity, routings[0].expert.numel(), float(aux.detach()))
        return out
