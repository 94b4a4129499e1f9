"""The MoE router: top-k gating with an expert capacity, and the auxiliary load-balancing loss.

Per group of T tokens (GShard, Lepikhin et al. 2020, Sec. 2.2: tokens are routed in groups, each
with its own capacity; under expert parallelism a group is one rank's tokens):

    p = softmax(x W_r)                      (T, E) router probabilities (Shazeer et al. 2017, Eq. 3)
    e_1..e_k = top-k of p per token         the experts a token is sent to
    g_j = p_{e_j} / sum_j p_{e_j}            gates, renormalised over the k (GShard, Algorithm 1);
                                            k = 1 keeps p_{e_1} (Switch Transformer, Eq. 2)
    C = ceil(c T k / E)                     slots per expert (Switch, Eq. 3: ``expert_capacity``)

Slots are given out first to every token's first choice, then to the second choices, ..., each
in token order (GShard, Algorithm 1: "position in expert"); an assignment past the C-th slot of
its expert is dropped: that token skips the expert (the residual stream carries it on).

The auxiliary loss (Switch Transformer, Eq. 4-6; GShard's l_aux for k > 1):

    aux = E * sum_i f_i P_i,   f_i = (assignments to expert i) / (T k),   P_i = mean_t p_i(x_t)

f_i counts the routing before any drop and carries no gradient; P_i does. It is 1 when routing
is uniform and E when every token goes to one expert.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from parlab.costmodel.specs.moe import MoESpec, expert_capacity


@dataclass
class Routing:
    """Where one group's T tokens go: ``expert`` (T, k) their top-k experts, ``gate`` (T, k) the
    weights of the experts' outputs, ``slot`` (T, k) the position in the expert's buffer,
    ``kept`` (T, k) whether it is < ``capacity``, and the group's auxiliary loss ``aux``."""

    expert: torch.Tensor
    gate: torch.Tensor
    slot: torch.Tensor
    kept: torch.Tensor
    capacity: int
    aux: torch.Tensor
    num_experts: int

    @property
    def tokens(self) -> int:
        return self.expert.shape[0]

    def load(self) -> list[int]:
        """Assignments routed to each expert (before drops): the imbalance per expert."""
        return torch.bincount(self.expert.reshape(-1), minlength=self.num_experts).tolist()

    def dropped(self) -> int:
        """Assignments past their expert's capacity."""
        return int((~self.kept).sum())


def route(logits: torch.Tensor, spec: MoESpec) -> Routing:
    """Top-k routing of one group: ``logits`` (T, E) of the router, ``spec``'s k and capacity.
    The logits must be floating point (else ValueError) and finite (else FloatingPointError: a
    nan or inf would route silently: softmax turns the row into nan, topk still picks experts,
    the aux loss is nan)."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or not logits.dtype.is_floating_point:
        raise ValueError(f"router logits must be a floating-point tensor (tokens T, experts E), got "
                         f"{_describe(logits)}")
    t, e = logits.shape
    if e != spec.num_experts:
        raise ValueError(f"router logits have {e} experts, the MoESpec num_experts={spec.num_experts}")
    if not bool(torch.isfinite(logits).all()):
        bad = int((~torch.isfinite(logits)).any(dim=-1).sum())
        raise FloatingPointError(f"router logits must be finite: {bad} of {t} tokens have a nan or "
                                 f"inf logit (diverged weights or inputs?)")
    k, capacity = spec.top_k, expert_capacity(t, spec)
    probs = logits.softmax(dim=-1)  # (T, E)
    top, expert = probs.topk(k, dim=-1)  # (T, k) each
    gate = top / top.sum(dim=-1, keepdim=True) if k > 1 else top
    # slots: all first choices in token order, then all second choices, ... (GShard, Alg. 1)
    onehot = F.one_hot(expert.t().reshape(-1), e)  # (k T, E): choice-major
    slot = ((onehot.cumsum(dim=0) - 1) * onehot).sum(dim=-1).view(k, t).t()  # (T, k)
    return Routing(expert, gate, slot, slot < capacity, capacity,
                   load_balancing_loss(probs, expert), e)


def _describe(x: object) -> str:
    """A tensor's shape and dtype, or the type of anything else, for an error message."""
    if isinstance(x, torch.Tensor):
        return f"shape {tuple(x.shape)}, {str(x.dtype).removeprefix('torch.')}"
    return type(x).__name__


def load_balancing_loss(probs: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """Switch Transformer's aux = E sum_i f_i P_i (Eq. 4-6): ``probs`` (T, E), ``expert`` (T, k)."""
    t, e = probs.shape
    f = torch.bincount(expert.reshape(-1), minlength=e).to(probs.dtype) / expert.numel()  # (E,)
    return e * (f * probs.mean(dim=0)).sum()
