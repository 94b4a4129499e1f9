"""DeepSpeed-Ulysses: causal self-attention over a sequence split across the cp ranks of
``comm``, by turning the sequence split into a head split for the attention and back.

Jacobs et al. 2023 ("DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme
Long Sequence Transformer Models", Section 3.1, Figure 2): each rank holds Q, K, V for its s / cp
positions and all a heads; one all-to-all each turns them into all s positions for a / cp heads;
every rank runs ordinary attention on its heads (here ``model.causal_attention``, the serial
model's own); one all-to-all turns the output back into s / cp positions of all heads. The
backward runs the same all-to-alls reversed (dO in, dQ, dK, dV out): 4 per pass, each sending
(cp - 1) / cp of the rank's block (``costmodel.context_parallel.ulysses_bytes``). The heads bound
the degree: cp must divide a (``check_ulysses``). Rank r holds the r-th contiguous block of the
sequence (the naive split: every rank attends over the whole sequence, so there is no causal
imbalance to fix).

    q, k, v: (b, a, s / cp, d), rank r's block of the sequence
    out = ulysses_attention(q, k, v, comm)      # (b, a, s / cp, d)
"""

from __future__ import annotations

import torch

from parlab.costmodel.pricing.context_parallel import check_ulysses

from ..model import causal_attention
from .blocks import check_qkv


def seq_to_head(x: torch.Tensor, comm) -> torch.Tensor:
    """(b, a, s / cp, d) on every rank -> (b, a / cp, s, d): rank r's heads r a / cp ... for the
    whole sequence (one all-to-all; block j of the send buffer goes to rank j)."""
    cp = comm.world_size
    b, a, n, d = x.shape
    send = x.reshape(b, cp, a // cp, n, d).transpose(0, 1).contiguous()  # (cp, b, a/cp, n, d)
    got = comm.all_to_all(send)  # (cp, b, a/cp, n, d): block i is rank i's positions
    return got.permute(1, 2, 0, 3, 4).reshape(b, a // cp, cp * n, d)  # (b, a/cp, s, d)


def head_to_seq(x: torch.Tensor, comm) -> torch.Tensor:
    """(b, a / cp, s, d) -> (b, a, s / cp, d): the inverse of ``seq_to_head``."""
    cp = comm.world_size
    b, g, s, d = x.shape
    send = x.reshape(b, g, cp, s // cp, d).permute(2, 0, 1, 3, 4).contiguous()  # (cp, b, a/cp, n, d)
    got = comm.all_to_all(send)  # (cp, b, a/cp, n, d): block i is rank i's heads
    return got.transpose(0, 1).reshape(b, cp * g, s // cp, d)  # (b, a, s/cp, d)


class _SeqToHead(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return seq_to_head(x, comm)

    @staticmethod
    def backward(ctx, grad):
        return head_to_seq(grad.contiguous(), ctx.comm), None


class _HeadToSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return head_to_seq(x, comm)

    @staticmethod
    def backward(ctx, grad):
        return seq_to_head(grad.contiguous(), ctx.comm), None


def ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, comm) -> torch.Tensor:
    """Causal attention of this rank's block of the sequence over the whole sequence (collective
    over ``comm``, the CP group): q, k, v (b, a, s / cp, d); returns (b, a, s / cp, d),
    differentiable in q, k, v."""
    check_qkv(q, k, v)
    check_ulysses(q.shape[1], comm.world_size)
    qh, kh, vh = (_SeqToHead.apply(t.contiguous(), comm) for t in (q, k, v))  # (b, a/cp, s, d)
    return _HeadToSeq.apply(causal_attention(qh, kh, vh), comm)  # (b, a/cp, s, d) -> (b, a, n, d)
