"""Ring or double binary tree for an all-reduce: the message size where they cross, in the
alpha-beta model, once, with the latency and bandwidth it assumes (chapter 02, issue 19 item 6).

Ring (Thakur et al. 2005): 2 (p - 1) steps, 2 (p - 1)/p of the buffer through the busiest rank.
Double binary tree (Sanders, Speck & Traeff 2009; NCCL 2.4): 2 ceil(log2 p) steps and 2x the buffer
(``alphabeta.shape``). With one latency alpha per step and one bandwidth B for both,

    t_ring(n) = 2 (p - 1) alpha + 2 (p - 1)/p n / B,   t_tree(n) = 2 log2(p) alpha + 2 n / (f B),

where f is the tree's bandwidth as a share of the ring's (1: the ideal tree). The tree wins below

    n* = (2 (p - 1) - 2 log2 p) alpha B / (2 / f - 2 (p - 1)/p).

With f = 1 the denominator is 2/p: the tree moves only 2n/p more bytes than the ring, so n* grows
like p^2 alpha B and reaches gigabytes at a few hundred ranks. NCCL's tuner does not see that: it
models each algorithm x protocol ({Ring, Tree, CollNet} x {LL, LL128, Simple}) with its own latency
and bandwidth per size and takes the fastest (S. Jeaugey, NVIDIA/nccl#457, 2021; the choice depends
on the node count, GPUs per node, size and the intra- and inter-node bandwidth, NVIDIA/nccl#754);
its tree is "low latency, ok bandwidth" against the ring's "best bandwidth" (NVIDIA/nccl#471), built
across nodes only (NVIDIA/nccl#211). A tree below the ring's bandwidth (f < 1) moves the crossover
from p^2 to about p: ``MEASURED_TREE_SHARE`` is one public measurement of f.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing.alphabeta import shape
from parlab.costmodel.specs._check import positive
from parlab.costmodel.specs.links import LinkSpec, get_link

#: nccl-tests all_reduce_perf on 5 nodes of 8 H100 with 4 x 400 Gb/s RoCE, NCCL 2.20: bus bandwidth
#: 150 GB/s with NCCL_ALGO=Tree against 190 GB/s with Ring at 1 GiB (NVIDIA/nccl#1368, 2024).
MEASURED_TREE_BUSBW = 150e9
MEASURED_RING_BUSBW = 190e9
MEASURED_TREE_SHARE = MEASURED_TREE_BUSBW / MEASURED_RING_BUSBW


@dataclass(frozen=True)
class Crossover:
    """Where the double binary tree stops beating the ring for an all-reduce on ``ranks`` ranks."""

    ranks: int
    alpha: float  # s per step (the link's latency)
    bandwidth: float  # bytes/s one way, the ring's
    tree_share: float  # the tree's bandwidth / the ring's
    ring_steps: float
    tree_steps: float
    ring_volume: float  # bytes through the busiest rank per byte of buffer
    tree_volume: float
    bytes: float | None  # below this the tree wins; None: the tree never loses (its bytes are no more)

    def formula(self) -> str:
        return ("n* = (s_ring - s_tree) alpha B / (v_tree / f - v_ring) = "
                f"({self.ring_steps:g} - {self.tree_steps:g}) x {self.alpha * 1e6:g} us x "
                f"{self.bandwidth / 1e9:g} GB/s / ({self.tree_volume:g}/{self.tree_share:.3g} - "
                f"{self.ring_volume:.4g})")

    def times(self, nbytes: float) -> tuple[float, float]:
        """(ring seconds, tree seconds) for an all-reduce of ``nbytes`` in this model."""
        ring = self.ring_steps * self.alpha + self.ring_volume * nbytes / self.bandwidth
        tree = self.tree_steps * self.alpha + self.tree_volume * nbytes / (self.tree_share * self.bandwidth)
        return ring, tree


def ring_tree_crossover(ranks: int, link: str | LinkSpec = "ib-hdr", tree_share: float = 1.0) -> Crossover:
    """The all-reduce size (bytes) below which NCCL's double binary tree beats the ring on
    ``ranks`` ranks over ``link`` (its latency per step and one-way bandwidth), with the tree at
    ``tree_share`` of the ring's bandwidth (module docstring: the formula and what it leaves out)."""
    positive("ranks", ranks, integer=True)
    if not 0 < tree_share <= 1:
        raise ValueError(f"tree_share is the tree's bandwidth as a share of the ring's, in (0, 1], got {tree_share!r}")
    spec = get_link(link) if isinstance(link, str) else link
    s_r, v_r, _ = shape("all_reduce", "ring", ranks, 1.0)
    s_t, v_t, _ = shape("all_reduce", "double_binary_tree", ranks, 1.0)
    extra = v_t / tree_share - v_r
    n = None if extra <= 0 else max(0.0, (s_r - s_t) * spec.latency * spec.bandwidth / extra)
    return Crossover(ranks, spec.latency, spec.bandwidth, tree_share, s_r, s_t, v_r, v_t, n)
