"""Whether context parallelism's communication hides behind the attention it feeds, one rank and
one layer's forward: ring attention's K, V block beside the block's attention (Liu et al. 2023,
Section 3.1), all-gather attention's K, V gather before the rank attends (Dubey et al. 2024,
Section 3.3.2; exposed, as TransformerEngine runs it). Re-exported by ``context_parallel``; pure
Python."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing.cp_split import _shape, gathered_kv_bytes, kv_block_bytes
from parlab.costmodel.specs._check import non_negative, positive


def ring_step_flops(micro_batch: int, seq_len: int, hidden: int, cp: int) -> float:
    """FLOPs of one ring step's forward attention on one rank: its s/cp queries against one block
    of s/cp keys, Q K^T then P V, 2 b (s/cp)^2 h each (a causal mask halves the diagonal step)."""
    _shape(micro_batch, seq_len, hidden, cp, 1)
    n = seq_len / cp
    return 4 * micro_batch * n * n * hidden


@dataclass(frozen=True)
class RingOverlap:
    """One forward ring step: the block's attention (``compute_s``) beside the K, V transfer
    (``comm_s`` = alpha + bytes / bandwidth); ``exposed_s`` the transfer not hidden behind it."""

    compute_s: float
    comm_s: float

    @property
    def exposed_s(self) -> float:
        return max(0.0, self.comm_s - self.compute_s)

    @property
    def hidden(self) -> bool:
        return self.comm_s <= self.compute_s


def ring_overlap(micro_batch: int, seq_len: int, hidden: int, cp: int, flops_per_s: float,
                 alpha: float, bandwidth: float, n_head: int = 1, n_kv_head: int | None = None,
                 dtype_bytes: float = 2) -> RingOverlap:
    """Whether a ring step's K, V transfer hides behind its attention (Liu et al. 2023, Section 3.1:
    the block must be large enough that compute >= communication). Compute grows as (s/cp)^2, the
    transfer as s/cp, so small blocks (short sequences, large cp) leave the latency exposed."""
    positive("flops_per_s", flops_per_s)
    non_negative("alpha", alpha)
    positive("bandwidth", bandwidth)
    kv = kv_block_bytes(micro_batch, seq_len, hidden, cp, n_head, n_kv_head, dtype_bytes)
    compute = ring_step_flops(micro_batch, seq_len, hidden, cp) / flops_per_s
    return RingOverlap(compute, 0.0 if cp == 1 else alpha + kv / bandwidth)


@dataclass(frozen=True)
class GatherCost:
    """All-gather attention on one rank, one layer's forward: its attention (``compute_s``) and
    the K, V all-gather before it (``comm_s``), which the model leaves exposed (``exposed_s``)."""

    compute_s: float
    comm_s: float

    @property
    def exposed_s(self) -> float:
        return self.comm_s

    @property
    def share(self) -> float:
        """The gather's part of the layer's attention time (Llama 3: small for long sequences)."""
        total = self.comm_s + self.compute_s
        return self.comm_s / total if total else 0.0


def allgather_cost(micro_batch: int, seq_len: int, hidden: int, cp: int, flops_per_s: float,
                   alpha: float, bandwidth: float, n_head: int = 1, n_kv_head: int | None = None,
                   dtype_bytes: float = 2) -> GatherCost:
    """The K, V all-gather beside the attention it feeds, one rank, one layer's forward. The
    gather (a ring, ``collectives.ring_time``: (cp-1) alpha + (cp-1)/cp 2 b s h_kv B / bandwidth)
    must finish before the rank attends, and the model hides none of it: TransformerEngine's
    ``AttnFuncWithCPAndKVAllGather`` says "KV all-gather between CP ranks is exposed". Dubey et al.
    2024 (Section 3.3.2) chose it anyway because it is small: the gather grows as s, the
    attention as s^2 (here the balanced split's (2 cp + 1) (s / 2cp)^2 scores per rank, Q K^T
    and P V, 4 h FLOPs each), and grouped-query attention makes K, V a_kv / a of Q."""
    from parlab.costmodel.pricing.collectives import ring_time

    positive("flops_per_s", flops_per_s)
    non_negative("alpha", alpha)
    positive("bandwidth", bandwidth)
    whole = gathered_kv_bytes(micro_batch, seq_len, hidden, n_head, n_kv_head, dtype_bytes)
    _shape(micro_batch, seq_len, hidden, cp, dtype_bytes)
    scores = (2 * cp + 1) * (seq_len / (2 * cp)) ** 2
    compute = 4 * micro_batch * scores * hidden / flops_per_s
    return GatherCost(compute, ring_time("all_gather", whole, cp, bandwidth, alpha))
