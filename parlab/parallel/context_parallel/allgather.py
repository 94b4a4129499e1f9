"""All-gather attention: causal self-attention over a sequence split across the cp ranks of
``comm``, each rank's queries against the K, V of the whole sequence, all-gathered.

Dubey et al. 2024 ("The Llama 3 Herd of Models", Section 3.3.2), Llama 3's production context
parallelism: the sequence is cut into 2 cp chunks, rank r holding chunks r and 2 cp - 1 - r (the
load-balanced split the ring uses, ``sequence.shard_sequence``); before attention the K and V of
every rank are all-gathered in the CP group (not passed round a ring), and each rank attends with
its own queries to them, the causal mask set by global positions. Its query chunk at positions
[g c, (g + 1) c) sees the keys [0, (g + 1) c): the keys before it whole, and its own chunk
masked (``blocks.block_state`` twice, merged by the online softmax). With grouped-query
attention K and V have a_kv < a heads and are gathered a_kv wide (each of them then serves
a / a_kv query heads, as Megatron-LM and Hugging Face repeat them): the reason Llama 3 chose it.

Backward, as Megatron-Core runs it (cp_comm_type "all_gather": TransformerEngine's
``AttnFuncWithCPAndKVAllGather``): only the rank's own K, V are kept between the passes; the
backward gathers them again, computes dQ for its queries and dK, dV for the whole sequence
(``blocks.block_backward``), and reduce-scatters dK, dV so that each rank gets the sum over the
ranks at its own positions. ``regather=False`` keeps the gathered K, V instead (memory for
bytes). Bytes per rank: ``costmodel.pricing.context_parallel.allgather_bytes``.

    q: (b, a, n, d), k, v: (b, a_kv, n, d), the rank's n = s / cp positions (``shard_sequence``)
    out = allgather_attention(q, k, v, comm, balanced=True)       # (b, a, n, d)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from parlab.costmodel.pricing.context_parallel import rank_chunks, rank_positions
from parlab.costmodel.specs._check import boolean

from ..agree import agree
from .blocks import SoftmaxState, block_backward, block_state, check_qkv, merge

_COUNTED = ("all_gather", "reduce_scatter")


@dataclass
class GatherWork:
    """What one rank's all-gather attention did: the attention ``scores`` it computed in the
    forward (query, key pairs, the masked ones of its diagonal blocks included), and what its
    own collectives sent as the communicator counted them, (bytes, messages): ``forward`` the
    K, V all-gather, ``backward`` the gather again (``regather``) and the dK, dV reduce-scatter."""

    scores: int = 0
    forward: tuple[int, int] = (0, 0)
    backward: tuple[int, int] = (0, 0)


def _sent(comm) -> tuple[int, int]:
    """(bytes, messages) this rank sent in all-gathers and reduce-scatters so far."""
    t = comm.traffic()
    return (sum(t[o].bytes_sent for o in _COUNTED if o in t), sum(t[o].msgs_sent for o in _COUNTED if o in t))


def _gather(kv: torch.Tensor, comm, balanced: bool) -> torch.Tensor:
    """(2, b, a_kv, n, d) of this rank -> (2, b, a_kv, s, d): every rank's K, V in sequence order
    (one all-gather; block j of its result is rank j's positions, ``rank_positions``)."""
    cp, n = comm.world_size, kv.shape[-2]
    got = comm.all_gather(kv.contiguous())  # (2 cp, b, a_kv, n, d): rank j's K, V at 2j, 2j + 1
    whole = torch.empty(*kv.shape[:-2], cp * n, kv.shape[-1], dtype=kv.dtype, device=kv.device)
    for j in range(cp):
        whole[..., rank_positions(cp * n, j, cp, balanced), :] = got[2 * j:2 * j + 2]
    return whole


def _scatter(dkv: torch.Tensor, comm, balanced: bool) -> torch.Tensor:
    """(2, b, a_kv, s, d) of dK, dV on every rank -> (2, b, a_kv, n, d): their sum over the ranks
    at this rank's positions (one reduce-scatter; block j of its input is rank j's positions)."""
    cp, s = comm.world_size, dkv.shape[-2]
    blocks = torch.cat([dkv[..., rank_positions(s, j, cp, balanced), :] for j in range(cp)])
    return comm.reduce_scatter(blocks.contiguous())  # (2 cp, b, a_kv, n, d) -> (2, b, a_kv, n, d)


def repeat_kv(x: torch.Tensor, group: int) -> torch.Tensor:
    """(b, a_kv, s, d) -> (b, a, s, d): each K/V head serves ``group`` = a / a_kv query heads."""
    return x if group == 1 else x.repeat_interleave(group, dim=1)


def _keys(mine: tuple[int, ...], c: int):
    """Per query chunk (its index i in ``mine``, global chunk g of size c): the keys before it
    (none for chunk 0) unmasked, then its own chunk's keys, masked: (i, keys, diagonal) each."""
    for i, g in enumerate(mine):
        if g:
            yield i, slice(0, g * c), False
        yield i, slice(g * c, (g + 1) * c), True


class _AllGatherAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, comm, balanced: bool, regather: bool, work: GatherWork | None):
        r, cp = comm.rank, comm.world_size
        mine = rank_chunks(r, cp, balanced)
        c, group = q.shape[-2] // len(mine), q.shape[1] // k.shape[1]
        before = _sent(comm) if work is not None else None
        kv = _gather(torch.stack((k, v)), comm, balanced)  # (2, b, a_kv, s, d)
        if work is not None:
            work.forward = tuple(x - y for x, y in zip(_sent(comm), before, strict=True))
        kw, vw = repeat_kv(kv[0], group), repeat_kv(kv[1], group)  # (b, a, s, d)
        states: list[SoftmaxState | None] = [None] * len(mine)
        for i, keys, diagonal in _keys(mine, c):
            qc = q[..., i * c:(i + 1) * c, :]  # (b, a, c, d)
            states[i] = merge(states[i], block_state(qc, kw[..., keys, :], vw[..., keys, :], diagonal))
            if work is not None:
                work.scores += c * (keys.stop - keys.start)
        out = torch.cat([st.output() for st in states], dim=-2)  # (b, a, n, d)
        lse = torch.cat([st.lse() for st in states], dim=-1)  # (b, a, n)
        ctx.save_for_backward(q, out, lse, *((k, v) if regather else (kv[0], kv[1])))
        ctx.comm, ctx.balanced, ctx.regather, ctx.work, ctx.group = comm, balanced, regather, work, group
        return out

    @staticmethod
    def backward(ctx, dout):
        q, out, lse, k, v = ctx.saved_tensors
        comm, balanced, work, group = ctx.comm, ctx.balanced, ctx.work, ctx.group
        mine = rank_chunks(comm.rank, comm.world_size, balanced)
        c = q.shape[-2] // len(mine)
        before = _sent(comm) if work is not None else None
        kv = _gather(torch.stack((k, v)), comm, balanced) if ctx.regather else torch.stack((k, v))
        kw, vw = repeat_kv(kv[0], group), repeat_kv(kv[1], group)  # (b, a, s, d)
        delta = (dout * out).sum(dim=-1)  # (b, a, n): rowsum(dO * O)
        dq = torch.zeros_like(q)  # (b, a, n, d)
        dkv = torch.zeros(2, *kw.shape, dtype=kw.dtype, device=kw.device)  # (2, b, a, s, d): every key's dK, dV
        for i, keys, diagonal in _keys(mine, c):
            rows = slice(i * c, (i + 1) * c)
            dqb, dkb, dvb = block_backward(q[..., rows, :], kw[..., keys, :], vw[..., keys, :],
                                           dout[..., rows, :], lse[..., rows], delta[..., rows], diagonal)
            dq[..., rows, :] += dqb
            dkv[0][..., keys, :] += dkb
            dkv[1][..., keys, :] += dvb
        if group > 1:  # a K/V head's gradient is the sum over the query heads it served
            dkv = dkv.unflatten(2, (-1, group)).sum(dim=3)  # (2, b, a_kv, s, d)
        dk, dv = _scatter(dkv, comm, balanced)  # (b, a_kv, n, d) each
        if work is not None:
            work.backward = tuple(x - y for x, y in zip(_sent(comm), before, strict=True))
        return dq, dk, dv, None, None, None, None


def allgather_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, comm, balanced: bool = True,
                        regather: bool = True, work: GatherWork | None = None) -> torch.Tensor:
    """Causal attention of this rank's queries over the whole sequence (collective over ``comm``,
    the CP group): q (b, a, n, d), k, v (b, a_kv, n, d), a_kv dividing a, hold the rank's positions
    of the ``balanced`` (or naive) split; returns (b, a, n, d), differentiable in q, k, v.
    ``regather`` (TransformerEngine's way) gathers K, V again in the backward rather than keeping
    them; ``work`` counts what this rank did. Every rank must pass the same ``balanced``,
    ``regather``, shapes and dtype (checked: one small all-gather, ``CollectiveMismatch`` naming the
    field otherwise)."""
    b, a, n, d = check_qkv(q, k, v, grouped=True)
    boolean("allgather_attention balanced", balanced)
    boolean("allgather_attention regather", regather)
    if balanced and n % 2:
        raise ValueError(f"the balanced split holds 2 chunks per rank: n = s / cp must be even, got "
                         f"n={n}")
    agree(comm, "allgather_attention", {"balanced": balanced, "regather": regather, "batch": b, "heads": a,
                                        "K/V heads": k.shape[1], "positions per rank": n, "head dim": d,
                                        "dtype": q.dtype})
    return _AllGatherAttention.apply(q, k, v, comm, balanced, regather, work)
