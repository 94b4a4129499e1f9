"""Ring attention: causal self-attention over a sequence split across the cp ranks of ``comm``.

Liu, Zaharia & Abbeel 2023 ("Ring Attention with Blockwise Transformers for Near-Infinite
Context", Section 3): each rank keeps the queries of its part of the sequence; the K, V blocks
travel round the ring, rank r sending to r+1 and receiving from r-1, so after cp - 1 steps every
rank has met every block. Each step's transfer is posted asynchronously (``send``/``recv`` with
``async_op=True``) before the block in hand is attended to, so the next block arrives while this
one computes; the blocks' results merge by the online softmax of ``blocks`` (FlashAttention).

Backward (as ring-flash-attention and Megatron-Core's ``AttnFuncWithCPAndKVP2P`` run it): the
K, V blocks go round again; at each step a rank adds its share of the held block's dK, dV to an
accumulator that travels with the block, one hop behind it, and its own dQ stays home; after the
last step each accumulator is one hop short of its owner and takes that hop: cp - 1 sends of K, V
and cp of dK, dV (``costmodel.context_parallel.ring_attention_bytes``).

Causal mask and load balance: the sequence is cut into chunks, and only the (query chunk, key
chunk) blocks a causal mask does not blank out are computed (``causal_pairs``), the diagonal ones
masked. With the naive split (rank r: chunk r of cp) rank r computes r + 1 blocks; with the
balanced split (rank r: chunks r and 2 cp - 1 - r of 2 cp; Megatron-Core, Llama 3 Section 3.3.2)
every rank computes the same 2 cp + 1 half-size blocks (``costmodel.context_parallel.causal_work``).
``RingWork`` counts what a rank computed and how long it took.

    q, k, v: (b, a, n, d), the rank's n = s / cp positions (``sequence.shard_sequence``)
    out = ring_attention(q, k, v, comm, balanced=True)            # (b, a, n, d)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from parlab.costmodel.pricing.context_parallel import causal_pairs, rank_chunks
from parlab.costmodel.specs._check import boolean

from ..agree import agree
from .blocks import SoftmaxState, block_backward, block_state, check_qkv, merge


@dataclass
class RingWork:
    """What one rank's ring attention computed: attention ``scores`` (query, key pairs, masked
    ones in a diagonal block included), ``blocks`` attended to, and seconds spent on them, in the
    forward pass; ``waited`` the seconds spent waiting for the next block."""

    scores: int = 0
    blocks: int = 0
    seconds: float = 0.0
    waited: float = 0.0


def _chunk(x: torch.Tensor, i: int, n_chunks: int) -> torch.Tensor:
    """Chunk i of n_chunks along the sequence dim -2: (..., n, d) -> (..., n / n_chunks, d)."""
    c = x.shape[-2] // n_chunks
    return x[..., i * c:(i + 1) * c, :]


def _exchange(comm, x: torch.Tensor):
    """Post the send of ``x`` to the next rank and the receive from the previous one (async)."""
    r, n = comm.rank, comm.world_size
    return comm.send(x, (r + 1) % n, async_op=True), comm.recv((r - 1) % n, async_op=True)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, comm, balanced: bool, work: RingWork | None):
        r, n = comm.rank, comm.world_size
        layout = [rank_chunks(j, n, balanced) for j in range(n)]
        mine, nc = layout[r], len(layout[r])
        kv = torch.stack((k, v))  # (2, b, a, n, d): one message per step
        states: list[SoftmaxState | None] = [None] * nc
        for step in range(n):
            owner = (r - step) % n  # whose K, V block this rank holds at this step
            pending = _exchange(comm, kv) if step < n - 1 else None
            start = time.perf_counter()
            for qi, kj, diagonal in causal_pairs(mine, layout[owner]):
                qc, kc, vc = _chunk(q, qi, nc), _chunk(kv[0], kj, nc), _chunk(kv[1], kj, nc)
                states[qi] = merge(states[qi], block_state(qc, kc, vc, diagonal))
                if work is not None:
                    work.scores += qc.shape[-2] * kc.shape[-2]
                    work.blocks += 1
            computed = time.perf_counter()
            if pending is not None:
                kv = pending[1].wait()  # (2, b, a, n, d): the previous rank's block
                pending[0].wait()
            if work is not None:
                work.seconds += computed - start
                work.waited += time.perf_counter() - computed
        out = torch.cat([s.output() for s in states], dim=-2)  # (b, a, n, d)
        lse = torch.cat([s.lse() for s in states], dim=-1)  # (b, a, n)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.comm, ctx.layout = comm, layout
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        comm, layout = ctx.comm, ctx.layout
        r, n = comm.rank, comm.world_size
        mine, nc = layout[r], len(layout[r])
        delta = (dout * out).sum(dim=-1)  # (b, a, n): rowsum(dO * O)
        dq = torch.zeros_like(q)  # (b, a, n, d)
        kv = torch.stack((k, v))  # (2, b, a, n, d)
        sends, grads = [], None  # grads: the async receive of the next block's dK, dV so far
        for step in range(n):
            owner = (r - step) % n
            pending = _exchange(comm, kv) if step < n - 1 else None
            mine_kv = torch.zeros_like(kv)  # this rank's share of the held block's dK, dV
            for qi, kj, diagonal in causal_pairs(mine, layout[owner]):
                dqb, dkb, dvb = block_backward(_chunk(q, qi, nc), _chunk(kv[0], kj, nc),
                                               _chunk(kv[1], kj, nc), _chunk(dout, qi, nc),
                                               _chunk(lse.unsqueeze(-1), qi, nc).squeeze(-1),
                                               _chunk(delta.unsqueeze(-1), qi, nc).squeeze(-1),
                                               diagonal)
                _chunk(dq, qi, nc).add_(dqb)
                _chunk(mine_kv[0], kj, nc).add_(dkb)
                _chunk(mine_kv[1], kj, nc).add_(dvb)
            dkv = mine_kv if grads is None else grads.wait() + mine_kv  # (2, b, a, n, d)
            if n > 1:  # pass the accumulator on, one hop behind its block
                sent, grads = _exchange(comm, dkv)
                sends.append(sent)
            if pending is not None:
                kv = pending[1].wait()
                sends.append(pending[0])
        dkv = grads.wait() if grads is not None else dkv  # this rank's own dK, dV, home
        for s in sends:
            s.wait()
        return dq, dkv[0], dkv[1], None, None, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, comm, balanced: bool = True,
                   work: RingWork | None = None) -> torch.Tensor:
    """Causal attention of this rank's queries over the whole sequence (collective over ``comm``,
    the CP group): q, k, v (b, a, n, d) hold the rank's positions of the ``balanced`` (or naive)
    split; returns (b, a, n, d), differentiable in q, k, v. ``work`` counts what this rank did.
    Every rank must pass the same ``balanced``, shapes and dtype (checked: one small all-gather,
    ``CollectiveMismatch`` naming the field otherwise)."""
    b, a, n, d = check_qkv(q, k, v)
    boolean("ring_attention balanced", balanced)
    if balanced and n % 2:
        raise ValueError(f"the balanced split holds 2 chunks per rank: n = s / cp must be even, got "
                         f"n={n}")
    # the same layout on every rank: a choice that changes no message size (balanced) would
    # otherwise give wrong numbers silently, and the others raw torch errors mid-ring
    agree(comm, "ring_attention", {"balanced": balanced, "batch": b, "heads": a,
                                   "positions per rank": n, "head dim": d, "dtype": q.dtype})
    return _RingAttention.apply(q, k, v, comm, balanced, work)
