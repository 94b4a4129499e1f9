"""Attention one block at a time with an online softmax: a block of queries against a block of
keys gives a running (max, sum, accumulator) state; two states merge exactly; the final state is
the softmax attention over every block seen. And the backward of one block, given the rows'
final log-sum-exp: what ring attention computes at each step of the ring.

Online softmax (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; as
FlashAttention tiles it: Dao et al. 2022, Algorithm 1, and Dao 2023, FlashAttention-2,
Algorithm 1-2): for scores S_j = Q K_j^T / sqrt(d) of key block j, a block keeps per query row
m_j = max S_j, l_j = sum exp(S_j - m_j) and A_j = exp(S_j - m_j) V_j. Two blocks merge as

    m = max(m_1, m_2)
    l = l_1 exp(m_1 - m) + l_2 exp(m_2 - m)
    A = A_1 exp(m_1 - m) + A_2 exp(m_2 - m)

and softmax(S) V over both is A / l, its log-sum-exp m + log l. The backward of a block needs only
Q, K_j, V_j, dO, the rows' log-sum-exp L and D = rowsum(dO * O) (FlashAttention-2, Algorithm 2):
P_j = exp(S_j - L), dV_j = P_j^T dO, dS_j = P_j * (dO V_j^T - D), dQ += dS_j K_j / sqrt(d),
dK_j = dS_j^T Q / sqrt(d). Shapes: b batch, a heads, n query rows, m key rows, d head dim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SoftmaxState:
    """The online softmax of some query rows over the key blocks merged so far: ``max`` m and
    ``sum`` l per row (b, a, n), ``acc`` = sum exp(S - m) V (b, a, n, d)."""

    max: torch.Tensor
    sum: torch.Tensor
    acc: torch.Tensor

    def output(self) -> torch.Tensor:
        """softmax(S) V over every block merged: A / l, (b, a, n, d)."""
        return self.acc / self.sum.unsqueeze(-1)

    def lse(self) -> torch.Tensor:
        """Each row's log-sum-exp of its scores, m + log l, (b, a, n)."""
        return self.max + torch.log(self.sum)


_GROUPED = " (k, v: (b, a_kv, n, d), a_kv dividing a)"


def check_qkv(q: object, k: object, v: object, grouped: bool = False) -> tuple[int, int, int, int]:
    """(b, a, n, d) if q, k, v are one attention's inputs: floating-point tensors of one shape
    (b, a, n, d) and one dtype, none of the four empty; else one ValueError (TypeError) naming
    the rule and the values. ``grouped``: k and v may have fewer heads a_kv than q, a_kv dividing
    a (grouped-query attention, Ainslie et al. 2023; multi-query when a_kv = 1)."""
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        raise TypeError(f"q, k, v must be torch tensors, got {', '.join(type(t).__name__ for t in (q, k, v))}")
    kv_like = q.shape[:1] + k.shape[1:2] + q.shape[2:] if grouped and q.dim() == 4 == k.dim() else q.shape
    if k.shape != kv_like or v.shape != kv_like or q.dim() != 4:
        raise ValueError(f"q, k, v must share one shape (b, a, n, d){_GROUPED if grouped else ''}, got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if grouped and (k.shape[1] == 0 or q.shape[1] % k.shape[1]):
        raise ValueError(f"the key/value heads must divide the query heads (each K/V head serves a / a_kv "
                         f"query heads): a={q.shape[1]}, a_kv={k.shape[1]}")
    if q.dtype != k.dtype or q.dtype != v.dtype or not q.dtype.is_floating_point:
        raise TypeError(f"q, k, v must share one floating-point dtype (attention is a softmax), got "
                        f"{q.dtype}, {k.dtype}, {v.dtype}")
    if q.numel() == 0:
        raise ValueError(f"q, k, v must be non-empty: every one of (b, a, n, d) >= 1, got "
                         f"{tuple(q.shape)}")
    return tuple(q.shape)


def block_scores(q: torch.Tensor, k: torch.Tensor, diagonal: bool) -> torch.Tensor:
    """S = Q K^T / sqrt(d): (b, a, n, d) @ (b, a, d, m) -> (b, a, n, m); ``diagonal`` (query and
    key block at the same positions, n == m): the causal mask, -inf above the diagonal."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, a, n, m)
    if diagonal:
        future = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return scores


def block_state(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, diagonal: bool) -> SoftmaxState:
    """The state of one key block: m = rowmax S, l = rowsum exp(S - m), A = exp(S - m) V."""
    scores = block_scores(q, k, diagonal)  # (b, a, n, m)
    m = scores.amax(dim=-1)  # (b, a, n): finite, every row sees at least its own key
    p = torch.exp(scores - m.unsqueeze(-1))  # (b, a, n, m); masked entries exp(-inf) = 0
    return SoftmaxState(m, p.sum(dim=-1), p @ v)  # (b, a, n, m) @ (b, a, m, d) -> (b, a, n, d)


def merge(x: SoftmaxState | None, y: SoftmaxState) -> SoftmaxState:
    """The state over x's blocks and y's (None: no block yet), rescaled to the larger max."""
    if x is None:
        return y
    m = torch.maximum(x.max, y.max)  # (b, a, n)
    ax, ay = torch.exp(x.max - m), torch.exp(y.max - m)  # (b, a, n), each <= 1
    return SoftmaxState(m, x.sum * ax + y.sum * ay,
                        x.acc * ax.unsqueeze(-1) + y.acc * ay.unsqueeze(-1))  # (b, a, n, d)


def block_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor,
                   lse: torch.Tensor, delta: torch.Tensor, diagonal: bool
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) of one block: q, dout (b, a, n, d), k, v (b, a, m, d), the rows' final
    log-sum-exp ``lse`` and ``delta`` = rowsum(dO * O), both (b, a, n)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    p = torch.exp(block_scores(q, k, diagonal) - lse.unsqueeze(-1))  # (b, a, n, m): the softmax
    dv = p.transpose(-2, -1) @ dout  # (b, a, m, n) @ (b, a, n, d) -> (b, a, m, d)
    dp = dout @ v.transpose(-2, -1)  # (b, a, n, d) @ (b, a, d, m) -> (b, a, n, m)
    ds = p * (dp - delta.unsqueeze(-1))  # (b, a, n, m)
    dq = ds @ k * scale  # (b, a, n, m) @ (b, a, m, d) -> (b, a, n, d)
    dk = ds.transpose(-2, -1) @ q * scale  # (b, a, m, n) @ (b, a, n, d) -> (b, a, m, d)
    return dq, dk, dv
